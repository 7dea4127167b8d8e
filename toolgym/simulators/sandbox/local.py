"""Subprocess fallback backend: rlimits and a private directory only, NOT an isolation boundary."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from toolgym.simulators.sandbox._proc import (
    PipeChannel,
    host_python,
    make_preexec,
    random_uid,
    rlimits_for,
    runner_argv,
)
from toolgym.simulators.sandbox.base import ChannelSandbox
from toolgym.simulators.sandbox.limits import SandboxLimits

logger = logging.getLogger(__name__)

_SYSTEM_BIN_DIRS = ("/usr/local/bin", "/usr/bin", "/bin")
UNSAFE_MESSAGE = (
    "toolgym sandbox: using the 'subprocess' backend, which applies rlimits and a private "
    "working directory but does NOT isolate the file system or the network. Install "
    "bubblewrap (apt-get install -y bubblewrap) or run a Docker engine for real isolation."
)


class SubprocessSandbox(ChannelSandbox):
    """Runs code in a plain child process with rlimits, a cleared environment and a temp dir.

    When the host runs as root, the child drops to a fresh unprivileged uid (as on bwrap), so
    RLIMIT_NPROC binds (it never binds root) and sandboxes cannot signal or read one another. If
    other users cannot reach the host's interpreter (e.g. a pyenv under ``/root``), a system
    interpreter of the same Python version is used instead. Use only where
    neither bubblewrap nor Docker is available: constructing one emits a ``RuntimeWarning``.

    Args:
        limits: Resource limits (defaults to :class:`SandboxLimits`).
        python_paths: Directories to put on the code's ``sys.path`` (standard library only by
            default).
        warn: Emit the warning that this backend does not isolate.
    """

    name = "subprocess"

    def __init__(
        self, limits: SandboxLimits | None = None, *, python_paths: Sequence[str] = (), warn: bool = True
    ) -> None:
        super().__init__(limits)
        self.python_paths = [os.path.realpath(path) for path in python_paths]
        if warn:
            warnings.warn(UNSAFE_MESSAGE, RuntimeWarning, stacklevel=2)
            logger.warning(UNSAFE_MESSAGE)
        self.python = host_python()[0]
        #: Drop to an unprivileged uid (so RLIMIT_NPROC binds) when root and others can run Python.
        self.drop_privileges = False
        if os.geteuid() == 0:
            self.python, self.drop_privileges = _interpreter_for_others(self.python)
            if not self.drop_privileges:
                logger.warning("no interpreter that other users can run: sandboxed code runs as root")

    def spawn(self) -> PipeChannel:
        """Start the REPL runner in a child process with rlimits and a fresh working dir."""
        root = tempfile.mkdtemp(prefix="toolgym-sandbox-")
        workdir, tmpdir = os.path.join(root, "work"), os.path.join(root, "tmp")
        uid = random_uid() if self.drop_privileges else None
        if uid is not None:
            os.chmod(root, 0o711)  # the sandbox may traverse to its own directories, not list them
        for path in (workdir, tmpdir):
            os.mkdir(path, 0o700)
            if uid is not None:
                os.chown(path, uid, uid)
        hooks: list[Callable[[], None]] = [functools.partial(_become, uid)] if uid is not None else []
        env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": tmpdir, "LANG": "C.UTF-8"}
        try:
            return PipeChannel(
                runner_argv(self.python, self.python_paths),
                env=env,
                cwd=workdir,
                preexec=make_preexec(rlimits_for(self.limits, shared_uid=uid is None and os.geteuid() != 0), hooks),
                on_kill=lambda: shutil.rmtree(root, ignore_errors=True),
            )
        except OSError:
            shutil.rmtree(root, ignore_errors=True)
            raise


def _interpreter_for_others(preferred: str) -> tuple[str, bool]:
    """Return ``(python, True)`` for an interpreter of this Python version that others can run."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [preferred, *(os.path.join(d, version) for d in _SYSTEM_BIN_DIRS)]
    for candidate in candidates:
        if os.path.isfile(candidate) and _others_can_run(candidate):
            return os.path.realpath(candidate), True
    return preferred, False


def _others_can_run(executable: str) -> bool:
    """True when a uid other than the owner may traverse to and execute ``executable``."""
    path = Path(os.path.realpath(executable))
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


def _become(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
