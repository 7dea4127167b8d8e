"""Fixtures for the sandbox tests: backends, a host HTTP server, and a fake server database."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolgym.simulators.sandbox import SandboxLimits, get_backend
from toolgym.simulators.sandbox.backends import backend_works
from toolgym.simulators.sandbox.base import ChannelSandbox

# Short limits keep the suite fast; hostile tests rely on them being enforced.
FAST = SandboxLimits(wall_time=5.0, cpu_time=5.0, kill_grace=0.5, memory_bytes=256 * 1024 * 1024)

ALL_BACKENDS = [
    "bwrap",
    pytest.param("docker", marks=pytest.mark.docker),
    "subprocess",
]
ISOLATING_BACKENDS = ["bwrap", pytest.param("docker", marks=pytest.mark.docker)]


def make_sandbox(name: str, limits: SandboxLimits = FAST) -> ChannelSandbox:
    """Build a backend, skipping Docker where no engine answers (bwrap must work here)."""
    if name == "docker" and not backend_works("docker"):
        pytest.skip("no Docker engine answers; the same contract runs on bwrap and subprocess")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the subprocess fallback warns by design
        return get_backend(name, limits)


@pytest.fixture(params=ALL_BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> ChannelSandbox:
    return make_sandbox(request.param)


@pytest.fixture(params=ISOLATING_BACKENDS)
def isolated(request: pytest.FixtureRequest) -> ChannelSandbox:
    return make_sandbox(request.param)


_SERVER = textwrap.dedent(
    """
    import http.server, json, sys, threading
    hits = {"foreign": 0}
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path != "/health":
                hits["foreign"] += 1
            body = json.dumps(hits).encode()
            self.send_response(200); self.end_headers(); self.wfile.write(body)
        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    threading.Timer(float(sys.argv[1]), server.shutdown).start()  # stops by itself
    server.serve_forever()
    """
)


class HostServer:
    """A real HTTP server process on the host that the sandbox must neither reach nor hurt."""

    def __init__(self, lifetime: float = 300.0) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(lifetime)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def stats(self) -> dict[str, int]:
        """Answer of the health endpoint; raises if the server stopped serving."""
        url = f"http://127.0.0.1:{self.port}/health"
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="session")
def host_server() -> Iterator[HostServer]:
    server = HostServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def server_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fake server database outside the sandbox, holding a secret."""
    path = tmp_path_factory.mktemp("server") / "toolgym.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE api_keys (key TEXT)")
        db.execute("INSERT INTO api_keys VALUES ('sk-secret-do-not-leak')")
    return path


@pytest.fixture
def sandbox_factory() -> object:
    """``sandbox_factory(name, limits=FAST)`` builds a backend (skipping Docker without an engine)."""
    return make_sandbox


@pytest.fixture
def fast_limits() -> SandboxLimits:
    return FAST


@pytest.fixture
def uid_processes() -> object:
    """``uid_processes(uid)`` lists host pids whose real uid is ``uid``."""
    return processes_of_uid


def processes_of_uid(uid: int) -> list[int]:
    """Host pids whose real uid is ``uid``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        line = next(row for row in status.splitlines() if row.startswith("Uid:"))
        if int(line.split()[1]) == uid:
            pids.append(int(entry))
    return pids
