"""Hostile code against the isolating backends: every attack is contained and the host keeps serving."""

from __future__ import annotations

import http.server
import os
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from toolgym.simulators.sandbox.cgroup import CGROUP_ROOT


def wait_for(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture(autouse=True)
def host_keeps_serving(host_server):
    """Every hostile test ends by checking that the host server still answers, untouched."""
    before = host_server.stats()
    yield
    after = host_server.stats()
    assert after["foreign"] == before["foreign"] == 0  # no request from the sandbox got through


def test_runs_as_unprivileged_user_without_capabilities(isolated):
    code = "import os\nprint(os.getuid(), os.geteuid())\nprint(open('/proc/self/status').read())"
    result = isolated.run(code)
    uid, euid = map(int, result.stdout.splitlines()[0].split())
    assert uid != 0 and euid != 0
    status = dict(line.split(":\t", 1) for line in result.stdout.splitlines()[1:] if ":\t" in line)
    for capabilities in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert status[capabilities] == "0000000000000000", capabilities
    assert status["NoNewPrivs"] == "1"  # no setuid binary can give privileges back
    if isolated.name == "bwrap":
        assert status["Seccomp"] == "2"  # the filter is installed


def test_infinite_loop(isolated):
    with isolated.open_session() as session:
        result = session.run("while True:\n    pass", timeout=0.5)
        assert result.timed_out and result.killed_reason is None
        stubborn = "import time\nwhile True:\n    try:\n        time.sleep(60)\n    except BaseException:\n        pass"
        start = time.monotonic()
        result = session.run(stubborn, timeout=0.5)
        assert result.timed_out and result.killed_reason == "timeout"
        assert time.monotonic() - start < 0.5 + isolated.limits.kill_grace + 1
        assert session.run("'recovered'").stdout == "'recovered'\n"


def test_interpreter_that_stops_itself(isolated):
    # A thread stops the interpreter after the call answered; the next request (1 MB, more than a
    # pipe holds) cannot be delivered: the host gives up at the deadline instead of hanging.
    stopper = "import os, signal, threading, time\nthreading.Timer(0.2, os.kill, (os.getpid(), signal.SIGSTOP)).start()"
    with isolated.open_session() as session:
        assert session.run(stopper).ok
        time.sleep(0.5)
        start = time.monotonic()
        result = session.run("x = '" + "a" * 2**20 + "'", timeout=0.5)
        assert result.killed_reason == "timeout" and time.monotonic() - start < 0.5 + isolated.limits.kill_grace + 1
        assert session.run("'fresh'").stdout == "'fresh'\n" and session.restarts == 1


def test_fork_bomb(isolated, uid_processes):
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    with isolated.open_session() as session:
        uid = int(session.run("import os; os.getuid()").stdout)
        result = session.run(bomb, timeout=1)
        assert result.timed_out
        if isolated.name == "bwrap":
            # Strays are killed after the call and only the interpreter is left; or, when the bomb
            # starved the interpreter past its grace period, the whole sandbox was killed.
            left = 1 if result.killed_reason is None else 0
            assert wait_for(lambda: len(uid_processes(uid)) == left), (result, len(uid_processes(uid)))
        assert session.run("'still here'").stdout == "'still here'\n"
    if isolated.name == "bwrap":
        assert wait_for(lambda: uid_processes(uid) == [])


def test_fork_bomb_with_shell(isolated, uid_processes):
    bomb = "import subprocess, time\nsubprocess.run(['sh', '-c', 'bomb() { bomb | bomb & }; bomb'])\ntime.sleep(1)"
    with isolated.open_session() as session:
        uid = int(session.run("import os; os.getuid()").stdout)
        result = session.run(bomb, timeout=3)
        assert "Cannot fork" in result.stderr  # the process limit binds
        if isolated.name == "bwrap":  # the backgrounded shells were killed after the call
            assert wait_for(lambda: len(uid_processes(uid)) == 1)


def test_memory_bomb(isolated):
    with isolated.open_session() as session:
        result = session.run("hog = []\nwhile True:\n    hog.append(bytearray(64 * 1024 ** 2))")
        assert "MemoryError" in result.stderr
        assert session.run("del hog\n'ok'").stdout == "'ok'\n"


def _sandbox_memory_cgroup() -> Path | None:
    groups = list((CGROUP_ROOT / "memory" / "toolgym-sandbox").glob(f"{os.getpid()}-*"))
    return groups[0] if len(groups) == 1 else None


def test_memory_bomb_across_processes(isolated):
    # Four children each touch 200 MiB (each under the per-process limit, together far over the
    # sandbox's cap): the sandbox's memory cgroup holds the total; the host is untouched.
    code = (
        "import os, time\n"
        "for _ in range(4):\n"
        "    if os.fork() == 0:\n"
        "        try:\n"
        "            hog = bytearray(b'\\x01') * (200 * 1024 ** 2)\n"
        "            time.sleep(0.5)\n"
        "        finally:\n"
        "            os._exit(0)\n"
        "for _ in range(4):\n"
        "    os.wait()\n"
        "print('survived')"
    )
    with isolated.open_session() as session:
        group = _sandbox_memory_cgroup() if isolated.name == "bwrap" else None
        result = session.run(code, timeout=10)
        assert result.killed_reason in (None, "crashed")
        assert session.run("'next'").stdout == "'next'\n"
        if group is not None:
            cap = int((group / "memory.limit_in_bytes").read_text())
            assert int((group / "memory.max_usage_in_bytes").read_text()) <= cap < 800 * 1024**2
            assert int((group / "memory.failcnt").read_text()) > 0  # the cap was hit and held


def test_2gb_file_and_disk_filling(isolated):
    with isolated.open_session() as session:
        write = "f = open('/tmp/big', 'wb')\nfor _ in range(2048):\n    f.write(b'x' * 2 ** 20)"
        result = session.run(write)
        assert "File too large" in result.stderr and result.duration < 5
        fill = "for i in range(100):\n    open(f'part{i}', 'wb').write(b'x' * (15 * 2 ** 20))"
        result = session.run(fill)
        assert "No space left on device" in result.stderr
        assert result.duration < 10


def test_reading_host_secrets(isolated, server_database):
    paths = ["/etc/shadow", "/etc/passwd", str(server_database), "/root/.bash_history", "/proc/1/environ"]
    paths.append(str(Path.cwd() / "pyproject.toml"))
    code = (
        f"paths = {paths!r}\n"
        "for p in paths:\n"
        "    try:\n"
        "        print(p, 'LEAKED', open(p, 'rb').read()[:20])\n"
        "    except OSError as e:\n"
        "        print(p, 'denied', type(e).__name__)\n"
    )
    result = isolated.run(code)
    assert "LEAKED" not in result.stdout and result.stdout.count("denied") == len(paths)
    query = f"import sqlite3\nsqlite3.connect('file:{server_database}?mode=ro', uri=True).execute('select * from api_keys').fetchall()"
    result = isolated.run(query)
    assert "sk-secret" not in result.stdout and "OperationalError" in result.stderr


def test_network_is_unreachable(isolated, host_server):
    # Loopback (the host's HTTP server, PostgreSQL), private and link-local (cloud metadata) addresses
    # and the database's unix socket: all fail at once, and nothing can leave the machine (no route).
    targets = [
        ("127.0.0.1", host_server.port),
        ("::1", host_server.port),
        ("127.0.0.1", 5432),
        ("10.255.255.1", 80),
        ("192.168.0.1", 80),
        ("172.16.0.1", 80),
        ("169.254.169.254", 80),
        "/var/run/postgresql/.s.PGSQL.5432",
    ]
    code = (
        "import socket, time\n"
        f"for target in {targets!r}:\n"
        "    start = time.monotonic()\n"
        "    try:\n"
        "        if isinstance(target, str):\n"
        "            sock = socket.socket(socket.AF_UNIX)\n"
        "            sock.settimeout(2)\n"
        "            sock.connect(target)\n"
        "        else:\n"
        "            sock = socket.create_connection(target, timeout=2)\n"
        "        sock.sendall(b'GET /evil HTTP/1.0\\r\\n\\r\\n')\n"
        "        print(target, 'CONNECTED')\n"
        "    except OSError as e:\n"
        "        print(repr(target).replace(' ', ''), 'blocked', type(e).__name__, round(time.monotonic() - start, 3))\n"
    )
    result = isolated.run(code)
    lines = result.stdout.splitlines()
    assert "CONNECTED" not in result.stdout and len(lines) == len(targets), result.stdout
    assert all(line.split()[1] == "blocked" for line in lines)
    assert all(float(line.split()[-1]) < 1.0 for line in lines), lines  # fails at once, not after the 2 s timeout
    interfaces = isolated.run("import socket; [name for _, name in socket.if_nameindex()]")
    assert interfaces.stdout == "['lo']\n"
    dns = isolated.run("import socket; socket.gethostbyname('example.com')")
    assert dns.exit_code == 1 and "gaierror" in dns.stderr


def test_deleting_files_outside(isolated, tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    code = (
        "import os, shutil, sys\n"
        f"targets = [{str(victim)!r}, sys.executable, '/usr/bin/env', '/usr/lib']\n"
        "for t in targets:\n"
        "    try:\n"
        "        shutil.rmtree(t) if os.path.isdir(t) else os.remove(t)\n"
        "        print(t, 'DELETED')\n"
        "    except OSError as e:\n"
        "        print(t, 'refused', type(e).__name__)\n"
        "try:\n"
        "    open('/usr/evil', 'w')\n"
        "except OSError as e:\n"
        "    print('write refused', type(e).__name__)\n"
    )
    result = isolated.run(code)
    assert "DELETED" not in result.stdout and "write refused" in result.stdout
    assert victim.read_text() == "keep me"
    assert Path("/usr/bin/env").exists() and Path(os.path.realpath(os.sys.executable)).exists()


def test_signalling_the_parent(isolated):
    code = (
        "import os, signal\n"
        f"for pid in [{os.getpid()}, {os.getppid()}, os.getppid(), 1]:\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n"
        "        print(pid, 'SIGNALLED')\n"
        "    except OSError as e:\n"
        "        print(pid, 'refused', type(e).__name__)\n"
    )
    with isolated.open_session() as session:
        result = session.run(code)
        assert "SIGNALLED" not in result.stdout, result.stdout
        # kill(-1) and killpg(0) can only reach the sandbox's own processes
        session.run("import os, signal\nos.kill(-1, signal.SIGKILL)")
        session.run("import os, signal\nos.killpg(0, signal.SIGKILL)")
        assert session.run("'alive'").stdout == "'alive'\n"
    os.kill(os.getpid(), 0)  # this process is fine


def test_escape_attempts_via_namespaces_and_mounts(isolated):
    code = (
        "import os, subprocess\n"
        "for cmd in (['unshare', '-r', 'true'], ['mount', '-t', 'tmpfs', 'x', '/usr'], ['chroot', '/', 'true']):\n"
        "    r = subprocess.run(cmd, capture_output=True)\n"
        "    print(cmd[0], r.returncode)\n"
    )
    result = isolated.run(code)
    codes = {line.split()[0]: int(line.split()[1]) for line in result.stdout.splitlines()}
    assert codes and all(code != 0 for code in codes.values()), result.stdout


class _Recorder(http.server.BaseHTTPRequestHandler):
    paths: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self.paths.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def test_host_keeps_serving_while_hostile_code_runs(isolated):
    """An HTTP server in this very process answers promptly while four attacks run at once."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    attacks = [
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        "while True:\n    pass",
        "hog = []\nwhile True:\n    hog.append(bytearray(b'\\x01') * (16 * 1024 ** 2))",
        "import socket, time\nwhile True:\n    try:\n"
        f"        socket.create_connection(('127.0.0.1', {port}), timeout=0.2).sendall(b'GET /evil HTTP/1.0\\r\\n\\r\\n')\n"
        "    except OSError:\n        time.sleep(0.01)",
    ]
    results: list[object] = []
    runners = [threading.Thread(target=lambda c=code: results.append(isolated.run(c, timeout=2))) for code in attacks]
    latencies = []
    try:
        for runner in runners:
            runner.start()
        while any(runner.is_alive() for runner in runners):
            start = time.monotonic()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
                assert response.read() == b"ok"
            latencies.append(time.monotonic() - start)
            time.sleep(0.05)
        for runner in runners:
            runner.join()
    finally:
        server.shutdown()
        server.server_close()
    assert len(results) == 4 and len(latencies) >= 10
    assert max(latencies) < 1.0, latencies
    assert set(_Recorder.paths) == {"/health"}  # the sandboxes never reached the server
