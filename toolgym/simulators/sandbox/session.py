"""Persistent interpreter sessions: a Python REPL in a sandbox, driven over framed JSON."""

from __future__ import annotations

import json
import logging
import signal
import struct
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from toolgym.simulators.sandbox.base import Channel, SandboxError
from toolgym.simulators.sandbox.limits import ExecResult, SandboxLimits

logger = logging.getLogger(__name__)

_HEADER = struct.Struct(">I")
_STARTUP_TIMEOUT = 15.0


class _Fault(Exception):
    """The interpreter process misbehaved; ``reason`` becomes ExecResult.killed_reason."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def encode_frame(obj: Any) -> bytes:
    """Encode one protocol frame: 4-byte big-endian length, then UTF-8 JSON."""
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    return _HEADER.pack(len(data)) + data


class _FrameReader:
    """Reads length-prefixed JSON frames from a channel with a deadline and a size cap."""

    def __init__(self, channel: Channel, max_frame: int) -> None:
        self._channel = channel
        self._max_frame = max_frame
        self._buffer = bytearray()

    def read(self, deadline: float) -> dict[str, Any]:
        header = self._read_exact(_HEADER.size, deadline)
        (length,) = _HEADER.unpack(header)
        if length > self._max_frame:
            raise _Fault("protocol", f"reply of {length} bytes exceeds the {self._max_frame} limit")
        body = self._read_exact(length, deadline)
        try:
            reply = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise _Fault("protocol", f"malformed reply: {e}") from e
        if not isinstance(reply, dict):
            raise _Fault("protocol", "reply is not a JSON object")
        return reply

    def _read_exact(self, n: int, deadline: float) -> bytes:
        while len(self._buffer) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Fault("timeout", "no reply before the deadline")
            chunk = self._channel.read(max(n - len(self._buffer), 65536), remaining)
            if chunk is None:
                raise _Fault("timeout", "no reply before the deadline")
            if not chunk:
                raise _Fault("crashed", "the interpreter exited")
            self._buffer += chunk
        data = bytes(self._buffer[:n])
        del self._buffer[:n]
        return data


class InterpreterSession:
    """A persistent Python interpreter inside a sandbox.

    Variables, imports and functions defined by one ``run`` are visible to the next. A call that
    times out softly (the interpreter interrupts itself) keeps the state. When the interpreter
    has to be killed or dies (hard timeout, crash, protocol garbage), the result says so in
    ``killed_reason`` and the next call starts a fresh interpreter (``restarts`` counts them).
    Calls from several threads are serialised.

    Args:
        spawn: Starts one interpreter process in a new sandbox and returns its channel.
        limits: The limits the sandbox was built with (per-call time and output limits).
        backend: Backend name, for messages.
        kill_strays: After every call, kill processes the code left running. Only for
            backends with a private PID namespace (bwrap, docker).
    """

    def __init__(
        self,
        spawn: Callable[[], Channel],
        limits: SandboxLimits,
        backend: str,
        *,
        kill_strays: bool = False,
    ) -> None:
        self.limits = limits
        self.backend = backend
        self.kill_strays = kill_strays
        self.restarts = 0
        self._requests = 0
        self._spawn = spawn
        self._channel: Channel | None = None
        self._reader: _FrameReader | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._start()

    @property
    def alive(self) -> bool:
        """True while an interpreter process is running for this session."""
        return self._channel is not None

    def run(self, code: str, timeout: float | None = None) -> ExecResult:
        """Execute ``code`` in the session and return its output.

        Args:
            code: Python source. A trailing expression's repr is printed, as in a REPL.
            timeout: Wall-time limit of this call in seconds (default ``limits.wall_time``).
        """
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        wall = self._check_timeout(timeout)
        with self._lock:
            if self._closed:
                raise SandboxError("the session is closed")
            if self._channel is None:
                self.restarts += 1
                self._start()
            return self._call(code, wall)

    def close(self) -> None:
        """Kill the interpreter and release the sandbox; later calls raise SandboxError."""
        with self._lock:
            self._closed = True
            self._kill()

    def _check_timeout(self, timeout: float | None) -> float:
        if timeout is None:
            return self.limits.wall_time
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        return float(timeout)

    def _start(self) -> None:
        channel = self._spawn()
        reader = _FrameReader(channel, self._max_frame())
        try:
            reply = reader.read(time.monotonic() + _STARTUP_TIMEOUT)
        except _Fault as e:
            diagnostics = channel.diagnostics()
            channel.kill()
            raise SandboxError(f"{self.backend} sandbox failed to start: {e.detail}; {diagnostics}") from e
        if reply.get("ready") is not True:
            channel.kill()
            raise SandboxError(f"{self.backend} sandbox sent an unexpected greeting: {reply!r}")
        self._channel, self._reader = channel, reader

    def _max_frame(self) -> int:
        # JSON may escape a character into 6 bytes; two streams plus slack for the envelope.
        return 2 * 6 * self.limits.max_output_bytes + 4096

    def _call(self, code: str, wall: float) -> ExecResult:
        assert self._channel is not None and self._reader is not None
        start = time.monotonic()
        self._requests += 1
        request = {
            "id": self._requests,
            "code": code,
            "timeout": wall,
            "cpu_time": self.limits.cpu_time,
            "max_output": self.limits.max_output_bytes,
            "kill_strays": self.kill_strays,
        }
        deadline = start + wall + self.limits.kill_grace
        try:
            self._channel.write(encode_frame(request), deadline - time.monotonic())
            reply = self._reader.read(deadline)
            if reply.get("id") != self._requests:  # a frame forged by the code, or a stale one
                raise _Fault("protocol", f"reply to request {reply.get('id')!r}, expected {self._requests}")
            return self._result(reply, time.monotonic() - start)
        except TimeoutError as e:
            return self._fault(_Fault("timeout", str(e)), start)
        except OSError as e:
            return self._fault(_Fault("crashed", f"the interpreter is gone ({e})"), start)
        except _Fault as fault:
            return self._fault(fault, start)

    def _result(self, reply: dict[str, Any], duration: float) -> ExecResult:
        try:
            return ExecResult(
                stdout=str(reply["stdout"]),
                stderr=str(reply["stderr"]),
                exit_code=int(reply["exit_code"]),
                timed_out=bool(reply["timed_out"]),
                duration=duration,
                truncated=bool(reply.get("stdout_truncated") or reply.get("stderr_truncated")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise _Fault("protocol", f"reply misses a field: {e}") from e

    def _fault(self, fault: _Fault, start: float) -> ExecResult:
        status = self._kill()
        logger.info("%s sandbox session killed: %s (%s)", self.backend, fault.reason, fault.detail)
        timed_out = fault.reason == "timeout"
        message = _fault_message(fault, status)
        return ExecResult(
            stdout="",
            stderr=message,
            exit_code=-signal.SIGKILL if timed_out or status is None else status,
            timed_out=timed_out,
            killed_reason=fault.reason,
            duration=time.monotonic() - start,
        )

    def _kill(self) -> int | None:
        channel, self._channel, self._reader = self._channel, None, None
        return channel.kill() if channel is not None else None

    def __enter__(self) -> InterpreterSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_channel", None) is not None:
            self._kill()


def _fault_message(fault: _Fault, status: int | None) -> str:
    if fault.reason == "timeout":
        head = "TimeoutError: the call exceeded its time limit and the interpreter was killed"
    elif fault.reason == "crashed":
        head = f"the interpreter died (exit status {status})"
    else:
        head = f"the interpreter broke the protocol ({fault.detail}) and was killed"
    return f"{head}; its variables were lost and the next call starts a fresh interpreter\n"
