"""In-sandbox Python REPL speaking length-prefixed JSON over stdin/stdout (stdlib only)."""

# This file is sent as the `-c` source of the interpreter inside the sandbox, so it must not import
# anything from toolgym and must work on any Python >= 3.8. Protocol: each frame is a 4-byte
# big-endian length followed by UTF-8 JSON. The runner first sends {"ready": true}; then for every
# request {"id", "code", "timeout", "cpu_time", "max_output", "kill_strays"} it answers {"id", "stdout", "stderr",
# "exit_code", "timed_out", "stdout_truncated", "stderr_truncated"}.

from __future__ import annotations

import _ast  # the C module: the ast package would add import time to every fresh sandbox
import builtins
import json
import math
import os
import resource
import signal
import struct
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations stay strings at run time; typing costs start-up time
    from types import CodeType
    from typing import Any, TextIO

_HEADER = struct.Struct(">I")
_ONLY_AST = 0x400  # ast.PyCF_ONLY_AST
_ENVIRONMENT = ("PATH", "HOME", "TMPDIR", "LANG")  # every other variable is removed
_MAX_REQUEST = 16 * 1024 * 1024
_RUNNER_PID = os.getpid()
_ARMED = [False]  # whether a call's limits are armed; late timer signals are ignored otherwise


class CallTimeout(BaseException):
    """Raised inside user code when its wall-time limit expires."""


class CpuTimeExceeded(BaseException):
    """Raised inside user code when its CPU-time limit expires."""


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n > 0:
        chunk = os.read(fd, n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(fd: int) -> Any:
    (length,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    if length > _MAX_REQUEST:
        raise ValueError("request too large")
    return json.loads(_read_exact(fd, length).decode("utf-8"))


def _send(fd: int, obj: Any) -> None:
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    payload = _HEADER.pack(len(data)) + data
    while payload:
        payload = payload[os.write(fd, payload) :]


def _capture_file(path: str, target_fd: int) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, target_fd)
    os.close(fd)


def _take_protocol_fds() -> tuple[int, int]:
    """Move the protocol pipes off fds 0/1 so user code and its children cannot touch them."""
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    tmp = os.environ.get("TMPDIR") or "/tmp"
    _capture_file(os.path.join(tmp, ".toolgym-stdout"), 1)
    _capture_file(os.path.join(tmp, ".toolgym-stderr"), 2)
    return proto_in, proto_out


def _on_alarm(signum: int, frame: Any) -> None:
    if _ARMED[0]:
        raise CallTimeout


def _on_xcpu(signum: int, frame: Any) -> None:
    if _ARMED[0]:
        raise CpuTimeExceeded


def _used_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _arm_limits(timeout: float | None, cpu_time: float | None) -> None:
    _ARMED[0] = True
    if cpu_time:
        # ITIMER_PROF measures this process's CPU time precisely; RLIMIT_CPU (whole seconds,
        # SIGXCPU) is the backstop for code that blocks SIGPROF.
        signal.setitimer(signal.ITIMER_PROF, cpu_time)
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        soft = math.ceil(_used_cpu() + cpu_time) + 1
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    if timeout:
        signal.setitimer(signal.ITIMER_REAL, timeout)


def _disarm_limits() -> None:
    _ARMED[0] = False
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.setitimer(signal.ITIMER_PROF, 0)


def _compile_cell(code: str) -> tuple[CodeType, CodeType | None]:
    """Compile a cell; a trailing expression is evaluated and its repr printed, as in a REPL."""
    # dont_inherit: the cell must not inherit this file's `from __future__` flags.
    tree = compile(code, "<cell>", "exec", _ONLY_AST, dont_inherit=True)
    tail = tree.body[-1] if tree.body else None
    if not isinstance(tail, _ast.Expr):
        return compile(tree, "<cell>", "exec", dont_inherit=True), None
    tree.body.pop()
    expression = _ast.Expression(tail.value)
    return compile(tree, "<cell>", "exec", dont_inherit=True), compile(expression, "<cell>", "eval", dont_inherit=True)


def _format_exception(exc: BaseException) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<cell>":
        tb = tb.tb_next
    if isinstance(exc, CallTimeout):
        return "TimeoutError: the call exceeded its wall-time limit\n"
    if isinstance(exc, CpuTimeExceeded):
        return "TimeoutError: the call exceeded its CPU-time limit\n"
    import traceback  # only when needed: it costs start-up time

    return "".join(traceback.format_exception(type(exc), exc, tb))


def _exit_code_of(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    sys.stderr.write(str(exc.code) + "\n")
    return 1


def _execute(code: str, namespace: dict[str, Any]) -> tuple[int, bool]:
    """Run one cell; return (exit_code, timed_out)."""
    try:
        body, last = _compile_cell(code)
        exec(body, namespace)
        if last is not None:
            value = eval(last, namespace)
            if value is not None:
                sys.stdout.write(repr(value) + "\n")
        return 0, False
    except SystemExit as exc:
        return _exit_code_of(exc), False
    except BaseException as exc:  # noqa: B036 - user code may raise anything
        sys.stderr.write(_format_exception(exc))
        return 1, isinstance(exc, (CallTimeout, CpuTimeExceeded))


def _read_capture(fd: int, limit: int) -> tuple[str, bool]:
    data = os.pread(fd, limit + 1, 0)
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    return data[:limit].decode("utf-8", "replace"), len(data) > limit


def _may_kill_strays() -> bool:
    """True only where ``kill(-1)`` can reach nothing but this sandbox's own processes.

    That needs an unprivileged uid (root could signal every process it sees) and a private PID
    namespace, where the runner is pid 1 (docker) or a child of the namespace's init (bwrap).
    Anywhere else (a runner started on the host by mistake) stray processes are left alone.
    """
    return os.geteuid() != 0 and os.getuid() != 0 and (os.getpid() == 1 or os.getppid() == 1)


def _kill_strays() -> None:
    """Kill every other process of the sandbox (only inside a private PID namespace)."""
    if not _may_kill_strays():
        return
    for _ in range(200):
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            return  # nothing left to signal
        _reap_children()
        time.sleep(0.001)


def _reap_children() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def _run_request(request: dict[str, Any], namespace: dict[str, Any], streams: tuple[TextIO, TextIO]) -> dict[str, Any]:
    sys.stdout, sys.stderr = streams
    try:
        try:
            _arm_limits(request.get("timeout"), request.get("cpu_time"))
            exit_code, timed_out = _execute(request["code"], namespace)
            if os.getpid() != _RUNNER_PID:
                os._exit(exit_code & 0xFF)  # a child forked by the cell must never answer
        finally:
            _disarm_limits()
    except (CallTimeout, CpuTimeExceeded):  # the limit fired between the cell and the disarm
        exit_code, timed_out = 1, True
    for stream in streams:
        try:
            stream.flush()
        except BaseException:  # noqa: B036 - a full disk must not kill the session
            pass
    if request.get("kill_strays"):
        _kill_strays()
    _reap_children()
    limit = int(request.get("max_output", 65536))
    stdout, out_cut = _read_capture(1, limit)
    stderr, err_cut = _read_capture(2, limit)
    return {
        "id": request.get("id"),
        "stdout": stdout,
        "stderr": stderr,
        "exit_code": exit_code,
        "timed_out": timed_out,
        "stdout_truncated": out_cut,
        "stderr_truncated": err_cut,
    }


def _prepare_interpreter() -> None:
    """Clear the environment (a container image brings its own variables), add the import paths
    given after ``-c``, and the ``exit``/``quit`` builtins that ``-S`` omits."""
    import site  # under -S this only defines helpers; it touches no paths

    kept = {key: os.environ[key] for key in _ENVIRONMENT if key in os.environ}
    os.environ.clear()
    os.environ.update(kept)
    sys.path.extend(sys.argv[1:])
    if not hasattr(builtins, "exit"):
        site.setquit()


def main() -> None:
    _prepare_interpreter()
    proto_in, proto_out = _take_protocol_fds()
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGXCPU, _on_xcpu)
    signal.signal(signal.SIGPROF, _on_xcpu)
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)
    streams = (sys.stdout, sys.stderr)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    _send(proto_out, {"ready": True, "pid": os.getpid()})
    while True:
        try:
            request = _recv(proto_in)
        except EOFError:
            return
        _send(proto_out, _run_request(request, namespace, streams))


if __name__ == "__main__":
    main()
