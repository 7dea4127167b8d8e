"""Best-effort cgroup confinement (memory and process caps for a whole sandbox)."""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from pathlib import Path

from toolgym.simulators.sandbox.limits import SandboxLimits

logger = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
_GROUP = "toolgym-sandbox"
# Processes bwrap itself keeps inside the sandbox (its monitor and the pid-1 reaper).
_LAUNCHER_PROCESSES = 4
_QUICK_WAIT, _LATE_WAIT = 0.1, 30.0  # seconds to wait for a killed sandbox's processes to exit


def _v1_files(limits: SandboxLimits) -> dict[str, dict[str, str]]:
    memory = str(_memory_cap(limits))
    return {
        "memory": {"memory.limit_in_bytes": memory},
        "pids": {"pids.max": str(limits.max_processes + _LAUNCHER_PROCESSES)},
    }


def _memory_cap(limits: SandboxLimits) -> int:
    # One process's address space plus the three tmpfs mounts (/work, /tmp, /dev/shm), whose
    # pages are charged here too.
    return limits.memory_bytes + 3 * limits.disk_bytes


def _v2_files(limits: SandboxLimits) -> dict[str, str]:
    return {
        "memory.max": str(_memory_cap(limits)),
        "memory.swap.max": "0",
        "pids.max": str(limits.max_processes + _LAUNCHER_PROCESSES),
    }


class Cgroup:
    """A set of cgroup directories (one per v1 controller, or one v2 group) for one sandbox."""

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = dirs

    @classmethod
    def create(cls, limits: SandboxLimits, root: Path = CGROUP_ROOT) -> Cgroup | None:
        """Create and configure a cgroup for one sandbox; None where cgroups are not writable."""
        name = f"{os.getpid()}-{secrets.token_hex(4)}"
        try:
            if (root / "memory").is_dir() and (root / "pids").is_dir():
                return cls._create_v1(root, name, limits)
            if (root / "cgroup.controllers").is_file():
                return cls._create_v2(root, name, limits)
        except OSError as e:
            logger.debug("cgroups unavailable, relying on rlimits: %s", e)
        return None

    @classmethod
    def _create_v1(cls, root: Path, name: str, limits: SandboxLimits) -> Cgroup:
        group = cls([])
        try:
            for controller, files in _v1_files(limits).items():
                path = root / controller / _GROUP / name
                path.mkdir(parents=True)
                group.dirs.append(path)
                _write_all(path, files, required=list(files))
        except OSError:
            group.remove()
            raise
        return group

    @classmethod
    def _create_v2(cls, root: Path, name: str, limits: SandboxLimits) -> Cgroup:
        parent = root / _GROUP
        parent.mkdir(exist_ok=True)
        (parent / "cgroup.subtree_control").write_text("+memory +pids")
        path = parent / name
        path.mkdir()
        group = cls([path])
        try:
            _write_all(path, _v2_files(limits), required=["memory.max", "pids.max"])
        except OSError:
            group.remove()
            raise
        return group

    def join(self) -> None:
        """Move the calling process into the group (called in the child before exec)."""
        pid = str(os.getpid())
        for path in self.dirs:
            (path / "cgroup.procs").write_text(pid)

    def remove(self) -> None:
        """Delete the group directories once their processes are gone.

        A killed sandbox's processes exit asynchronously: after a short wait here, directories
        still busy are left to a background thread that keeps trying for a while.
        """
        busy = [path for path in reversed(self.dirs) if not _rmdir_within(path, _QUICK_WAIT)]
        if busy:
            threading.Thread(target=_remove_later, args=(busy,), name="toolgym-cgroup-cleanup", daemon=True).start()


def _rmdir_within(path: Path, seconds: float) -> bool:
    """Try to remove an (empty) cgroup directory for up to ``seconds``; True once it is gone."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)


def _remove_later(paths: list[Path]) -> None:
    for path in paths:
        if not _rmdir_within(path, _LATE_WAIT):
            logger.warning("could not remove cgroup %s", path)


def _write_all(path: Path, files: dict[str, str], required: list[str]) -> None:
    for filename, value in files.items():
        try:
            (path / filename).write_text(value)
        except OSError:
            if filename in required:
                raise
