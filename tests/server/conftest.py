"""Fixtures: real `toolgym serve` processes on free loopback ports, over SQLite files and PostgreSQL schemas."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).parent
REPO = HERE.parent.parent
POSTGRES_URL = os.environ.get("TOOLGYM_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
KEY_A, KEY_B = "key-a-secret", "key-b-secret"


@dataclass
class Server:
    """A running server process."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path
    database_url: str
    env: dict[str, str] = field(default_factory=dict)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(database_url: str, log: Path, **settings: str) -> Server:
    """Start `toolgym serve` in a subprocess and wait until it answers /healthz."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO)]),
        "TOOLGYM_DATABASE_URL": database_url,
        "TOOLGYM_API_KEYS": f"{KEY_A},{KEY_B}",
        "TOOLGYM_ENV_MODULES": "server_plugin_envs",
        "TOOLGYM_STEP_TIMEOUT_S": "3",
        **{f"TOOLGYM_{k.upper()}": v for k, v in settings.items()},
    }
    command = [sys.executable, "-m", "toolgym.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("ab") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT, cwd=REPO)
    server = Server(f"http://127.0.0.1:{port}", process, log, database_url, env)
    _wait_ready(server)
    return server


def _wait_ready(server: Server, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited with {server.process.returncode}:\n{server.log_text()}")
        try:
            if httpx.get(server.url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop(signal.SIGKILL)
    raise RuntimeError(f"server did not start in {timeout} s:\n{server.log_text()}")


def _postgres_schema_url() -> Iterator[str]:
    import psycopg

    schema = f"tg_{uuid.uuid4().hex[:12]}"
    plain = POSTGRES_URL.replace("postgresql+psycopg://", "postgresql://")
    try:
        with psycopg.connect(plain, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL at {POSTGRES_URL} is not reachable ({exc}); .ci/run starts it")
    sep = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(scope="session")
def database_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], str]]:
    """Makes a fresh database URL of a kind ("sqlite" or "postgres"), cleaned up at the end."""
    cleanups: list[Iterator[str]] = []

    def make(kind: str) -> str:
        if kind == "sqlite":
            return f"sqlite:///{tmp_path_factory.mktemp('db') / 'toolgym.db'}"
        generator = _postgres_schema_url()
        cleanups.append(generator)
        return next(generator)

    yield make
    for generator in cleanups:
        next(generator, None)


@pytest.fixture(scope="session")
def server_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Server]]:
    """Starts servers that are all stopped at the end of the session."""
    started: list[Server] = []

    def make(database_url: str, **settings: str) -> Server:
        log = tmp_path_factory.mktemp("log") / "server.log"
        server = start_server(database_url, log, **settings)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture(scope="session", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(
    request: pytest.FixtureRequest, database_factory: Callable[[str], str], server_factory: Callable[..., Server]
) -> Server:
    """The shared server of the protocol tests, over SQLite and over PostgreSQL."""
    return server_factory(database_factory(request.param))


@pytest.fixture(scope="session")
def sqlite_server(database_factory: Callable[[str], str], server_factory: Callable[..., Server]) -> Server:
    """One shared server over SQLite (for the RemoteEnv equivalence tests; heavy envs may take a while a step)."""
    return server_factory(database_factory("sqlite"), step_timeout_s="300")


@pytest.fixture
def api(server: Server) -> Iterator[httpx.Client]:
    """An HTTP client of the shared server, authenticated with key A."""
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30) as client:
        yield client
