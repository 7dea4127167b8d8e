"""Bubblewrap backend: namespaces, no network, read-only system, tmpfs home, rlimits, cgroups."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import PurePosixPath

from toolgym.simulators.sandbox._proc import (
    UID_RANGE,
    PipeChannel,
    host_python,
    make_preexec,
    random_uid,
    rlimits_for,
    runner_argv,
)
from toolgym.simulators.sandbox.base import ChannelSandbox, SandboxUnavailable
from toolgym.simulators.sandbox.cgroup import Cgroup
from toolgym.simulators.sandbox.limits import SandboxLimits
from toolgym.simulators.sandbox.seccomp import filter_fd

logger = logging.getLogger(__name__)

WORKDIR = "/work"
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Harmless files from /etc that programs commonly expect; never shadow, never the host's secrets.
_ETC_FILES = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime")
_NAMESPACES = (
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
)


def _system_binds() -> list[str]:
    args: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _ETC_FILES:
        args += ["--ro-bind-try", path, path]
    return args


def _ancestors(paths: Sequence[str]) -> list[str]:
    """Directories above ``paths`` that the sandbox creates itself (mount points and system excluded)."""
    result: list[str] = []
    for path in paths:
        for parent in reversed(PurePosixPath(path).parents):
            name = str(parent)
            if name not in ("/", "/tmp", WORKDIR, *result) and not _is_system(name):
                result.append(name)
    return result


def _is_system(path: str) -> bool:
    return any(path == d or path.startswith(d + "/") for d in _SYSTEM_DIRS)


def _tmpfs(path: str, size: int) -> list[str]:
    return ["--perms", "1777", "--size", str(size), "--tmpfs", path]


def _environment() -> list[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": WORKDIR, "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    args = ["--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args


def _drop_privileges(uid: int) -> list[str]:
    """Become an unprivileged uid (RLIMIT_NPROC does not bind uid 0) with no capabilities."""
    if os.geteuid() != 0:
        return []
    return [
        "setpriv",
        f"--reuid={uid}",
        f"--regid={uid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
    ]


class BwrapSandbox(ChannelSandbox):
    """Runs code under bubblewrap (``bwrap``).

    Each sandbox gets fresh IPC, PID, network, UTS and cgroup namespaces (so no network at all,
    loopback included), a read-only view of /usr and the interpreter's prefix only (no /etc
    secrets, no /home, no project files), tmpfs at ``/work`` (the private working directory),
    ``/tmp`` and ``/dev/shm`` sized by ``limits.disk_bytes``, a cleared environment, and rlimits. When the host
    runs as root, the code runs as a random unprivileged uid without capabilities, so
    RLIMIT_NPROC binds and sandboxes cannot touch each other's processes; a cgroup caps the
    sandbox's total memory and processes where the cgroup filesystem is writable; a seccomp
    filter refuses new user namespaces and other rarely needed kernel interfaces.

    Args:
        limits: Resource limits (defaults to :class:`SandboxLimits`).
        python: Interpreter to run inside (default: the one running toolgym).
        ro_binds: Extra host paths to expose read-only at the same path (data, models...).
        python_paths: Directories to put on the sandbox's ``sys.path``, bound read-only (e.g. a
            virtual environment's site-packages). By default the code sees the standard library
            only.
        use_cgroups: Also confine each sandbox in a cgroup when possible.
        use_seccomp: Refuse new user namespaces, keyrings, eBPF, perf, userfaultfd and io_uring
            with a seccomp filter (x86_64 and aarch64).
        bwrap: Name or path of the bubblewrap binary.
    """

    name = "bwrap"
    private_pids = True

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        python: str | None = None,
        ro_binds: Sequence[str] = (),
        python_paths: Sequence[str] = (),
        use_cgroups: bool = True,
        use_seccomp: bool = True,
        bwrap: str = "bwrap",
    ) -> None:
        super().__init__(limits)
        executable, prefixes = host_python()
        self.python = python or executable
        self.python_paths = [os.path.realpath(path) for path in python_paths]
        self._binds = [*prefixes, *ro_binds, *self.python_paths]
        self._use_cgroups = use_cgroups
        self._use_seccomp = use_seccomp
        self._bwrap = shutil.which(bwrap)
        if self._bwrap is None:
            raise SandboxUnavailable("bubblewrap is not installed (apt-get install -y bubblewrap)")

    def command(self, argv: Sequence[str], uid: int, seccomp_fd: int | None = None) -> list[str]:
        """Build the full bwrap command line that runs ``argv`` in a new sandbox."""
        assert self._bwrap is not None
        args = [self._bwrap, *_NAMESPACES, "--die-with-parent", "--new-session"]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        if os.geteuid() != 0:
            args += ["--unshare-user", "--uid", "65534", "--gid", "65534"]
        args += ["--hostname", "sandbox", *_system_binds(), "--proc", "/proc", "--dev", "/dev"]
        for path in ("/tmp", WORKDIR, "/dev/shm"):  # /dev/shm: multiprocessing's semaphores
            args += _tmpfs(path, self.limits.disk_bytes)
        for parent in _ancestors(self._binds):  # bwrap would create them 0700: unreachable
            args += ["--perms", "0755", "--dir", parent]
        for path in self._binds:  # after the tmpfs mounts, so a path under /tmp stays visible
            args += ["--ro-bind", path, path]
        args += ["--chdir", WORKDIR, *_environment(), "--"]
        return args + _drop_privileges(uid) + list(argv)

    def spawn(self) -> PipeChannel:
        """Start the REPL runner in a new bubblewrap sandbox."""
        uid = random_uid()
        cgroup = Cgroup.create(self.limits) if self._use_cgroups else None
        seccomp_fd = filter_fd() if self._use_seccomp else None
        hooks = [cgroup.join] if cgroup is not None else []
        argv = self.command(runner_argv(self.python, self.python_paths), uid, seccomp_fd)
        try:
            return PipeChannel(
                argv,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                preexec=make_preexec(rlimits_for(self.limits, shared_uid=os.geteuid() != 0), hooks),
                on_kill=cgroup.remove if cgroup is not None else None,
                pass_fds=() if seccomp_fd is None else (seccomp_fd,),
            )
        except OSError:
            if cgroup is not None:
                cgroup.remove()
            raise
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)


@functools.cache
def bwrap_works() -> bool:
    """True when bubblewrap is installed and can start a sandbox on this machine."""
    try:
        sandbox = BwrapSandbox(use_cgroups=False)
    except SandboxUnavailable:
        return False
    argv = sandbox.command([sandbox.python, "-I", "-S", "-c", "pass"], UID_RANGE[0])
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        logger.info("bubblewrap probe failed: %s", e)
        return False
    if proc.returncode != 0:
        logger.info("bubblewrap probe failed: %s", proc.stderr.decode(errors="replace").strip())
    return proc.returncode == 0
