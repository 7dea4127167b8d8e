"""Docker backend through the docker SDK (``pip install 'toolgym[docker]'``), used when an engine answers."""

from __future__ import annotations

import functools
import logging
import select
import struct
import time
from typing import Any

from toolgym.simulators.sandbox._proc import runner_source
from toolgym.simulators.sandbox.base import ChannelSandbox, SandboxError, SandboxUnavailable
from toolgym.simulators.sandbox.limits import SandboxLimits

logger = logging.getLogger(__name__)

DEFAULT_IMAGE = "python:3.11-slim"
_FRAME = struct.Struct(">BxxxI")
_STDOUT, _STDERR = 1, 2


def _docker_module() -> Any:
    try:
        import docker
    except ImportError as e:
        raise SandboxUnavailable("the docker backend needs the docker SDK: pip install 'toolgym[docker]'") from e
    return docker


class StreamDemuxer:
    """Splits Docker's multiplexed attach stream (8-byte headers) into stdout and stderr bytes."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """Add raw bytes; return the complete stdout and stderr payloads decoded so far."""
        self._buffer += data
        out, err = bytearray(), bytearray()
        while len(self._buffer) >= _FRAME.size:
            stream, size = _FRAME.unpack_from(self._buffer)
            if len(self._buffer) < _FRAME.size + size:
                break
            payload = self._buffer[_FRAME.size : _FRAME.size + size]
            del self._buffer[: _FRAME.size + size]
            (err if stream == _STDERR else out).extend(payload)
        return bytes(out), bytes(err)


class DockerChannel:
    """A :class:`~toolgym.simulators.sandbox.base.Channel` to a container's attached stdio."""

    def __init__(self, container: Any, sock: Any) -> None:
        self._container = container
        self._sock = sock
        self._demux = StreamDemuxer()
        self._stderr = bytearray()
        self._status: int | None = None
        self._killed = False

    def write(self, data: bytes, timeout: float) -> None:
        self._sock.settimeout(timeout)  # socket.timeout is TimeoutError
        try:
            self._sock.sendall(data)
        finally:
            self._sock.settimeout(None)

    def read(self, max_bytes: int, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            remaining = max(deadline - time.monotonic(), 0.0)
            ready, _, _ = select.select([self._sock], [], [], remaining)
            if not ready:
                return None
            raw = self._sock.recv(max(max_bytes, 65536))
            if not raw:
                return b""
            out, err = self._demux.feed(raw)
            self._stderr = (self._stderr + err)[-4096:]
            if out:
                return out

    def kill(self) -> int | None:
        if self._killed:
            return self._status
        self._killed = True
        try:
            self._container.reload()
            self._status = self._container.attrs.get("State", {}).get("ExitCode")
            self._container.remove(force=True)
        except Exception as e:  # noqa: BLE001 - the engine may already have removed it
            logger.debug("removing sandbox container failed: %s", e)
        self._sock.close()
        return self._status

    def diagnostics(self) -> str:
        return bytes(self._stderr[-4096:]).decode("utf-8", "replace").strip()


class DockerSandbox(ChannelSandbox):
    """Runs code in a throw-away container: no network, read-only root, tmpfs /work and /tmp,
    uid 65534 without capabilities, memory/pids cgroup limits and rlimits (ulimits).

    Args:
        limits: Resource limits.
        image: Image with ``python`` on its PATH (default ``python:3.11-slim``).
        client: A ``docker.DockerClient``; default ``docker.from_env()``.
    """

    name = "docker"
    private_pids = True

    def __init__(self, limits: SandboxLimits | None = None, *, image: str = DEFAULT_IMAGE, client: Any = None) -> None:
        super().__init__(limits)
        self.image = image
        self._client = client or _docker_module().from_env()

    def container_options(self) -> dict[str, Any]:
        """Keyword arguments for ``containers.create`` that enforce the limits."""
        limits = self.limits
        docker = _docker_module()
        tmpfs = f"size={limits.disk_bytes},mode=1777"
        cpu = int(limits.session_cpu_time)
        return {
            "command": ["python", "-I", "-c", runner_source()],
            "stdin_open": True,
            "network_disabled": True,
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {"/work": tmpfs, "/tmp": tmpfs},
            "working_dir": "/work",
            "user": "65534:65534",
            "environment": {"HOME": "/work", "TMPDIR": "/tmp", "LANG": "C.UTF-8"},
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "shm_size": limits.disk_bytes,
            "mem_limit": limits.memory_bytes + 3 * limits.disk_bytes,  # tmpfs pages count too
            "memswap_limit": limits.memory_bytes + 3 * limits.disk_bytes,
            "pids_limit": limits.max_processes,
            "ulimits": [
                docker.types.Ulimit(name="cpu", soft=cpu, hard=cpu),
                docker.types.Ulimit(name="fsize", soft=limits.file_size_bytes, hard=limits.file_size_bytes),
                docker.types.Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
                docker.types.Ulimit(name="core", soft=0, hard=0),
            ],
        }

    def spawn(self) -> DockerChannel:
        """Create, attach to and start one container running the REPL runner."""
        try:
            container = self._client.containers.create(self.image, **self.container_options())
        except Exception as e:  # noqa: BLE001 - docker raises many error types
            raise SandboxError(f"docker could not create a sandbox container: {e}") from e
        params = {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        sock = container.attach_socket(params=params)
        sock = getattr(sock, "_sock", sock)
        container.start()
        return DockerChannel(container, sock)


@functools.cache
def docker_works() -> bool:
    """True when the docker SDK is installed and an engine answers a ping."""
    try:
        return bool(_docker_module().from_env(timeout=3).ping())
    except Exception as e:  # noqa: BLE001 - any failure means "no engine"
        logger.info("docker engine not available: %s", e)
        return False
