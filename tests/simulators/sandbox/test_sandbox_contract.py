"""The Sandbox contract, run against every backend available here (bwrap, subprocess; docker with an engine)."""

from __future__ import annotations

import pytest

from toolgym.simulators.sandbox import ExecResult, Sandbox, SandboxError, SandboxLimits

BACKEND_NAMES = ["bwrap", pytest.param("docker", marks=pytest.mark.docker), "subprocess"]


def test_backend_satisfies_protocol(sandbox):
    assert isinstance(sandbox, Sandbox)


def test_fresh_run_returns_output_and_exit_code(sandbox):
    result = sandbox.run("import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert isinstance(result, ExecResult)
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 0)
    assert result.ok and not result.timed_out and result.killed_reason is None
    assert result.duration > 0


def test_fresh_runs_share_nothing(sandbox):
    assert sandbox.run("open('note.txt', 'w').write('hi'); secret = 1").ok
    result = sandbox.run("import os; print(os.path.exists('note.txt'), 'secret' in globals())")
    assert result.stdout == "False False\n"


def test_session_keeps_variables_imports_and_files(sandbox):
    with sandbox.open_session() as session:
        assert session.run("import math\nx = 40\ndef f(y):\n    return y + 2").ok
        assert session.run("f(x)").stdout == "42\n"  # trailing expression is echoed
        assert session.run("math.sqrt(16)").stdout == "4.0\n"
        assert session.run("open('data.txt', 'w').write('abc')").ok
        assert session.run("print(open('data.txt').read())").stdout == "abc\n"


def test_exceptions_and_exit_codes(sandbox):
    with sandbox.open_session() as session:
        error = session.run("x = 1\n1 / 0")
        assert error.exit_code == 1 and not error.ok
        assert "ZeroDivisionError" in error.stderr and 'File "<cell>", line 2' in error.stderr
        assert "_runner" not in error.stderr  # the REPL's own frames are hidden
        assert session.run("raise SystemExit(3)").exit_code == 3
        assert session.run("syntax error here").exit_code == 1
        assert session.run("x").stdout == "1\n"  # state survived all of it


def test_soft_timeout_keeps_the_session(sandbox):
    with sandbox.open_session() as session:
        session.run("kept = 'yes'")
        result = session.run("while True: pass", timeout=0.5)
        assert result.timed_out and result.killed_reason is None
        assert "wall-time" in result.stderr
        assert session.run("kept").stdout == "'yes'\n"
        assert session.restarts == 0


def test_hard_timeout_kills_and_replaces_the_session(sandbox):
    code = "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True: pass"
    with sandbox.open_session() as session:
        session.run("lost = 1")
        result = session.run(code, timeout=0.5)
        assert result.timed_out and result.killed_reason == "timeout"
        assert result.duration < 0.5 + sandbox.limits.kill_grace + 2
        assert not session.alive
        after = session.run("print('lost' in globals())")
        assert after.stdout == "False\n" and session.restarts == 1


def test_crash_kills_and_replaces_the_session(sandbox):
    with sandbox.open_session() as session:
        result = session.run("import os\nos._exit(7)")
        assert result.killed_reason == "crashed" and result.exit_code != 0
        assert session.run("1 + 1").stdout == "2\n" and session.restarts == 1


def test_protocol_garbage_kills_and_replaces_the_session(sandbox):
    # The REPL's protocol pipes hide on private fds; scribbling on every fd must not confuse the host.
    code = (
        "import os\n"
        "for fd in map(int, os.listdir('/proc/self/fd')):\n"
        "    try:\n"
        "        os.write(fd, b'\\xff\\xff\\xff\\xffgarbage')\n"
        "    except OSError:\n"
        "        pass\n"
    )
    with sandbox.open_session() as session:
        result = session.run(code)
        assert result.killed_reason in (None, "protocol")
        assert session.run("6 * 7").stdout == "42\n"


def test_code_sees_the_standard_library_only(sandbox):
    with sandbox.open_session() as session:
        assert "ModuleNotFoundError" in session.run("import pytest").stderr  # installed on the host
        assert session.run("import json, sqlite3, fractions; fractions.Fraction(1, 3) * 3").stdout == "Fraction(1, 1)\n"
        assert session.run("exit(3)").exit_code == 3  # the builtins -S would drop are there


def test_cells_compile_like_a_plain_interpreter(sandbox):
    # The REPL's own `from __future__ import annotations` must not leak into user code.
    code = "def f(x: int) -> None:\n    pass\nf.__annotations__['x']"
    assert sandbox.run(code).stdout == "<class 'int'>\n"


def test_threads_and_subprocesses_work(sandbox):
    code = (
        "import concurrent.futures, subprocess\n"
        "with concurrent.futures.ThreadPoolExecutor(4) as pool:\n"
        "    print(sum(pool.map(abs, range(-4, 0))))\n"
        "print(subprocess.run(['echo', 'hi'], capture_output=True, text=True).stdout.strip())\n"
        "import multiprocessing\n"
        "with multiprocessing.get_context('fork').Pool(2) as pool:\n"
        "    print(pool.map(abs, [-1, -2]))"
    )
    result = sandbox.run(code)
    assert result.stdout == "10\nhi\n[1, 2]\n", result.stderr


def test_forged_replies_are_refused(sandbox):
    # A well-formed reply written to every fd: the host must not take it for the real one (and
    # then read the real reply as the answer to the next call).
    code = (
        "import json, os, struct\n"
        "body = json.dumps({'stdout': 'forged', 'stderr': '', 'exit_code': 0, 'timed_out': False}).encode()\n"
        "for fd in map(int, os.listdir('/proc/self/fd')):\n"
        "    try:\n"
        "        os.write(fd, struct.pack('>I', len(body)) + body)\n"
        "    except OSError:\n"
        "        pass\n"
    )
    with sandbox.open_session() as session:
        result = session.run(code)
        assert "forged" not in result.stdout and result.killed_reason in (None, "protocol")
        assert session.run("'after'").stdout == "'after'\n"
        assert session.run("'again'").stdout == "'again'\n"


def test_forked_child_never_answers(sandbox):
    with sandbox.open_session() as session:
        result = session.run("import os\npid = os.fork()\nprint('child' if pid == 0 else 'parent')")
        assert result.ok and "parent" in result.stdout
        assert session.run("'next'").stdout == "'next'\n"  # no stale second reply


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_cpu_time_limit(sandbox_factory, name):
    limits = SandboxLimits(wall_time=20, cpu_time=0.3, kill_grace=0.5)
    with sandbox_factory(name, limits).open_session() as session:
        assert session.run("import time\ntime.sleep(0.4)").ok  # sleeping costs no CPU time
        result = session.run("while True: pass")
        assert result.timed_out and "CPU-time" in result.stderr and result.killed_reason is None
        assert result.duration < 10
        assert session.run("'next'").stdout == "'next'\n"


def test_memory_limit_raises_memory_error(sandbox):
    with sandbox.open_session() as session:
        result = session.run("x = bytearray(4 * 1024 ** 3)")
        assert result.exit_code == 1 and "MemoryError" in result.stderr
        grow = "chunks = []\nwhile True:\n    chunks.append(bytearray(32 * 1024 ** 2))"
        assert "MemoryError" in session.run(grow).stderr
        assert session.run("del chunks\n'alive'").stdout == "'alive'\n"


def test_file_size_limit_stops_a_2gb_write_fast(sandbox):
    code = "f = open('big.bin', 'wb')\nchunk = b'\\0' * 2 ** 20\nfor _ in range(2048):\n    f.write(chunk)"
    with sandbox.open_session() as session:
        result = session.run(code)
        assert result.exit_code == 1 and "File too large" in result.stderr
        assert result.duration < 5
        size = session.run("import os; os.path.getsize('big.bin')").stdout
        assert int(size) <= sandbox.limits.file_size_bytes
        sparse = session.run("open('sparse.bin', 'wb').truncate(2 * 1024 ** 3)")
        assert "File too large" in sparse.stderr


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_output_is_truncated(sandbox_factory, name):
    limits = SandboxLimits(max_output_bytes=1000)
    result = sandbox_factory(name, limits).run("print('x' * 100000)")
    assert result.truncated and len(result.stdout) == 1000 and result.ok


def test_environment_is_cleared(sandbox, monkeypatch):
    monkeypatch.setenv("TOOLGYM_HOST_SECRET", "hunter2")
    result = sandbox.run("import os; print(sorted(os.environ))")
    assert "TOOLGYM_HOST_SECRET" not in result.stdout and "hunter2" not in result.stdout
    assert set(eval(result.stdout)) <= {"PATH", "HOME", "TMPDIR", "LANG", "LC_CTYPE", "PWD"}


def test_private_working_directory(sandbox):
    result = sandbox.run("import os; print(os.listdir('.'))\nprint(os.access('.', os.W_OK))")
    assert result.stdout == "[]\nTrue\n"


def test_stdin_is_not_the_protocol(sandbox):
    with sandbox.open_session() as session:
        result = session.run("import sys\nprint(repr(sys.stdin.read()))")
        assert result.stdout == "''\n"
        assert session.run("input()").exit_code == 1  # EOFError, not a hang


def test_closed_session_raises_and_bad_arguments_are_rejected(sandbox):
    session = sandbox.open_session()
    with pytest.raises(TypeError):
        session.run(b"print(1)")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        session.run("1", timeout=-1)
    session.close()
    session.close()  # idempotent
    with pytest.raises(SandboxError):
        session.run("1")
