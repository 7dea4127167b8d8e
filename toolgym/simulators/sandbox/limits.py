"""Resource limits of a sandbox and the result of one code execution."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

MiB = 1024 * 1024


@dataclass(frozen=True)
class SandboxLimits:
    """Limits applied to every process started inside a sandbox.

    Attributes:
        wall_time: Seconds of wall-clock time one call may take (overridable per call).
        cpu_time: Seconds of CPU time one call may use.
        memory_bytes: Address-space limit of each process (RLIMIT_AS; a memory cgroup
            with the same size caps the whole sandbox where cgroups are writable).
        max_processes: Processes and threads the sandbox user may own (RLIMIT_NPROC).
        file_size_bytes: Largest file any process may write (RLIMIT_FSIZE).
        disk_bytes: Size of the private working directory and of /tmp (tmpfs size).
        max_output_bytes: Characters of stdout and of stderr kept per call; the rest is cut.
        open_files: Open file descriptors per process (RLIMIT_NOFILE).
        session_cpu_time: Total CPU seconds a persistent session may use before it is killed.
        kill_grace: Seconds between the soft in-process timeout and the hard kill.
    """

    wall_time: float = 10.0
    cpu_time: float = 10.0
    memory_bytes: int = 512 * MiB
    max_processes: int = 32
    file_size_bytes: int = 16 * MiB
    disk_bytes: int = 64 * MiB
    max_output_bytes: int = 64 * 1024
    open_files: int = 256
    session_cpu_time: float = 600.0
    kill_grace: float = 1.0

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"SandboxLimits.{field.name} must be a positive number, got {value!r}")
        if self.session_cpu_time < self.cpu_time:
            raise ValueError("SandboxLimits.session_cpu_time must be >= cpu_time")

    def to_dict(self) -> dict[str, Any]:
        """Return the limits as a JSON-serializable dict."""
        return asdict(self)


@dataclass(frozen=True)
class ExecResult:
    """What one execution of code in a sandbox produced.

    Attributes:
        stdout: Captured standard output (cut to ``max_output_bytes``).
        stderr: Captured standard error; an uncaught exception's traceback lands here.
        exit_code: 0 on success, 1 for an uncaught exception, N for ``sys.exit(N)``, and the
            negative signal number when the sandbox process itself was killed.
        timed_out: True when the wall-time or CPU-time limit of the call expired.
        killed_reason: None while the interpreter survived the call. Otherwise why the
            sandbox process ended ("timeout", "crashed", "protocol", "closed"); its
            variables are lost and a session starts a fresh interpreter on the next call.
        duration: Wall-clock seconds the call took, measured on the host.
        truncated: True when stdout or stderr was cut to the output limit.
    """

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    killed_reason: str | None = None
    duration: float = 0.0
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the code ran to completion without an error."""
        return self.exit_code == 0 and not self.timed_out and self.killed_reason is None

    def to_dict(self) -> dict[str, Any]:
        """Return the result as a JSON-serializable dict."""
        return asdict(self)
