"""The Sandbox contract shared by every backend, its errors, and the process channel protocol."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from toolgym.simulators.sandbox.limits import ExecResult, SandboxLimits

if TYPE_CHECKING:
    from toolgym.simulators.sandbox.session import InterpreterSession


class SandboxError(RuntimeError):
    """A sandbox could not be started or used (not a failure of the user's code)."""


class SandboxUnavailable(SandboxError):
    """The requested backend does not work on this machine (missing binary, no engine...)."""


class Channel(Protocol):
    """Byte pipe to one interpreter process running inside a sandbox."""

    def write(self, data: bytes, timeout: float) -> None:
        """Send bytes to the interpreter's stdin.

        Raises:
            TimeoutError: the interpreter did not take the bytes within ``timeout`` seconds.
            OSError: the interpreter is gone.
        """

    def read(self, max_bytes: int, timeout: float) -> bytes | None:
        """Read up to max_bytes of stdout; None on timeout, b"" at end of file."""

    def kill(self) -> int | None:
        """Kill the sandbox and every process in it; return the exit status if known."""

    def diagnostics(self) -> str:
        """Return whatever the sandbox tooling itself printed (for error messages)."""


@runtime_checkable
class Sandbox(Protocol):
    """Runs untrusted Python code in isolation.

    ``run`` executes code in a fresh interpreter that is thrown away afterwards;
    ``open_session`` starts a persistent interpreter whose variables survive between calls.
    """

    name: str
    limits: SandboxLimits

    def run(self, code: str, timeout: float | None = None) -> ExecResult:
        """Execute ``code`` in a fresh sandbox and return what it produced."""
        ...

    def open_session(self) -> InterpreterSession:
        """Start a persistent interpreter session."""
        ...


class ChannelSandbox:
    """Base class of backends that spawn the runner over a :class:`Channel`.

    Subclasses implement ``spawn()``; ``run`` and ``open_session`` come for free.
    """

    name = "base"
    #: Whether the backend has a private PID namespace, so stray processes may be killed.
    private_pids = False

    def __init__(self, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()

    def spawn(self) -> Channel:
        """Start one interpreter process in a new sandbox and return its channel."""
        raise NotImplementedError

    def open_session(self) -> InterpreterSession:
        """Start a persistent interpreter session (variables survive between calls)."""
        from toolgym.simulators.sandbox.session import InterpreterSession

        return InterpreterSession(self.spawn, self.limits, backend=self.name, kill_strays=self.private_pids)

    def run(self, code: str, timeout: float | None = None) -> ExecResult:
        """Execute ``code`` in a fresh sandbox that is destroyed afterwards."""
        start = time.monotonic()
        with self.open_session() as session:
            result = session.run(code, timeout=timeout)
        return dataclasses.replace(result, duration=time.monotonic() - start)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(limits={self.limits!r})"
