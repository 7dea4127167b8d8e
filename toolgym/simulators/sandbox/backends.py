"""Choosing a sandbox backend by name: bwrap, docker, subprocess, or auto (best that works)."""

from __future__ import annotations

import logging
from typing import Any

from toolgym.simulators.sandbox.base import ChannelSandbox, SandboxUnavailable
from toolgym.simulators.sandbox.limits import SandboxLimits

logger = logging.getLogger(__name__)

BACKENDS = ("bwrap", "docker", "subprocess")


def backend_works(name: str) -> bool:
    """True when backend ``name`` can start sandboxes on this machine (probed once, cached)."""
    if name == "bwrap":
        from toolgym.simulators.sandbox.bwrap import bwrap_works

        return bwrap_works()
    if name == "docker":
        from toolgym.simulators.sandbox.docker import docker_works

        return docker_works()
    if name == "subprocess":
        return True
    raise ValueError(f"unknown sandbox backend {name!r}; choose one of {('auto', *BACKENDS)}")


def available_backends() -> list[str]:
    """Names of the backends that work here, most isolated first."""
    return [name for name in BACKENDS if backend_works(name)]


def get_backend(name: str = "auto", limits: SandboxLimits | None = None, **options: Any) -> ChannelSandbox:
    """Return a sandbox of backend ``name`` ("auto", "bwrap", "docker" or "subprocess").

    "auto" picks bubblewrap where it works, else Docker when an engine answers, else the
    subprocess fallback (which warns that it does not isolate). ``options`` go to the backend's
    constructor (e.g. ``image=`` for docker, ``ro_binds=`` for bwrap).

    Raises:
        ValueError: ``name`` is not a backend.
        SandboxUnavailable: the named backend does not work on this machine.
    """
    if name == "auto":
        name = next(n for n in BACKENDS if backend_works(n))
        logger.info("sandbox backend: %s", name)
    elif not backend_works(name):
        raise SandboxUnavailable(f"the {name!r} sandbox backend does not work on this machine")
    return _construct(name, limits, options)


def _construct(name: str, limits: SandboxLimits | None, options: dict[str, Any]) -> ChannelSandbox:
    if name == "bwrap":
        from toolgym.simulators.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(limits, **options)
    if name == "docker":
        from toolgym.simulators.sandbox.docker import DockerSandbox

        return DockerSandbox(limits, **options)
    from toolgym.simulators.sandbox.local import SubprocessSandbox

    return SubprocessSandbox(limits, **options)
