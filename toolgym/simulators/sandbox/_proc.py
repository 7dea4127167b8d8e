"""Host-side process plumbing: rlimits, the runner source, and a pipe channel to a child."""

from __future__ import annotations

import functools
import math
import os
import resource
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from toolgym.simulators.sandbox.limits import SandboxLimits

_RUNNER_PATH = Path(__file__).with_name("_runner.py")
#: Unprivileged uids sandboxes run as when the host is root: one fresh uid per sandbox, so
#: RLIMIT_NPROC counts that sandbox alone and sandboxes cannot signal or read one another.
UID_RANGE = (2_000_000, 3_000_000)


def random_uid() -> int:
    """A fresh unprivileged uid from :data:`UID_RANGE` (no user of the host has one)."""
    return UID_RANGE[0] + secrets.randbelow(UID_RANGE[1] - UID_RANGE[0])


@functools.cache
def runner_source() -> str:
    """Return the source of the in-sandbox REPL, passed to ``python -c``."""
    return _RUNNER_PATH.read_text(encoding="utf-8")


def runner_argv(python: str, python_paths: Sequence[str] = ()) -> list[str]:
    """Command line of the in-sandbox REPL: isolated mode, no site-packages, extra import paths.

    ``-S`` keeps the interpreter hermetic (only the standard library, plus ``python_paths``,
    which the runner appends to ``sys.path``) and halves its start-up time.
    """
    return [python, "-I", "-S", "-c", runner_source(), *python_paths]


def host_python() -> tuple[str, list[str]]:
    """Return the real interpreter behind ``sys.executable`` and the prefixes it needs."""
    executable = os.path.realpath(sys.executable)
    prefixes = sorted({os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)})
    return executable, [p for p in prefixes if p != "/usr" and not p.startswith("/usr/")]


def rlimits_for(limits: SandboxLimits, *, shared_uid: bool = False) -> dict[int, tuple[int, int]]:
    """Map the sandbox limits onto POSIX rlimits (soft, hard).

    RLIMIT_NPROC counts every task of the sandbox's real uid. With ``shared_uid`` (the code runs
    as the caller's own non-root uid) the caller's current tasks are added, so the sandbox may
    start ``max_processes`` more rather than none at all.
    """
    cpu = math.ceil(limits.session_cpu_time)
    nproc = limits.max_processes + (tasks_of_uid(os.getuid()) if shared_uid else 0)
    return {
        resource.RLIMIT_AS: (limits.memory_bytes, limits.memory_bytes),
        resource.RLIMIT_CPU: (cpu, cpu),
        resource.RLIMIT_NPROC: (nproc, nproc),
        resource.RLIMIT_FSIZE: (limits.file_size_bytes, limits.file_size_bytes),
        resource.RLIMIT_NOFILE: (limits.open_files, limits.open_files),
        resource.RLIMIT_CORE: (0, 0),
    }


def tasks_of_uid(uid: int) -> int:
    """Processes and threads whose real uid is ``uid`` (what RLIMIT_NPROC counts)."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:
            continue  # the process exited meanwhile
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["Uid"].split()[0]) == uid:
            count += int(fields["Threads"])
    return count


def make_preexec(rlimits: dict[int, tuple[int, int]], before: Sequence[Callable[[], None]] = ()) -> Callable[[], None]:
    """Build a preexec_fn that runs ``before`` hooks, then applies rlimits in the child."""

    def preexec() -> None:
        for hook in before:
            hook()
        for which, value in rlimits.items():
            resource.setrlimit(which, value)
        # Python ignores SIGPIPE/SIGXFSZ; restore the defaults for what the sandbox runs.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)

    return preexec


class PipeChannel:
    """A :class:`~toolgym.simulators.sandbox.base.Channel` over a child's stdin/stdout pipes.

    The child runs in its own process group (session); ``kill`` sends SIGKILL to the group.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        cwd: str | None = None,
        preexec: Callable[[], None] | None = None,
        on_kill: Callable[[], None] | None = None,
        pass_fds: Sequence[int] = (),
    ) -> None:
        self._proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            preexec_fn=preexec,
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )
        self._on_kill = on_kill
        self._status: int | None = None
        self._killed = False
        self._stdin = self._proc.stdin.fileno()  # type: ignore[union-attr]
        self._stdout = self._proc.stdout.fileno()  # type: ignore[union-attr]
        os.set_blocking(self._stdin, False)  # writes wait in select, with a deadline
        os.set_blocking(self._proc.stderr.fileno(), False)  # type: ignore[union-attr]

    @property
    def pid(self) -> int:
        """Process id of the direct child (the sandbox launcher)."""
        return self._proc.pid

    def write(self, data: bytes, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        view = memoryview(data)
        while view:
            _, ready, _ = select.select([], [self._stdin], [], max(deadline - time.monotonic(), 0.0))
            if not ready:
                raise TimeoutError("the interpreter stopped reading its input")
            try:
                view = view[os.write(self._stdin, view) :]
            except BlockingIOError:
                continue

    def read(self, max_bytes: int, timeout: float) -> bytes | None:
        ready, _, _ = select.select([self._stdout], [], [], max(timeout, 0.0))
        if not ready:
            return None
        return os.read(self._stdout, max_bytes)

    def kill(self) -> int | None:
        if self._killed:
            return self._status
        self._killed = True
        if self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._status = status = self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            if stream is not None:
                stream.close()
        if self._on_kill is not None:
            self._on_kill()
        return status

    def diagnostics(self) -> str:
        stream = self._proc.stderr
        if stream is None or stream.closed:
            return ""
        try:
            data = stream.read(4096) or b""
        except (BlockingIOError, ValueError):
            data = b""
        return data.decode("utf-8", "replace").strip()
