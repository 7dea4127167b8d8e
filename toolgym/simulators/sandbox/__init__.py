"""Code sandbox: run untrusted Python in isolation, one-shot or as a persistent session.

Example::

    from toolgym.simulators.sandbox import SandboxLimits, get_backend

    sandbox = get_backend("auto", SandboxLimits(wall_time=5))  # bwrap > docker > subprocess
    print(sandbox.run("print(6 * 7)").stdout)                  # "42\\n", fresh interpreter
    with sandbox.open_session() as session:                    # variables persist
        session.run("x = 40")
        result = session.run("x + 2")                          # trailing expression is echoed
        assert result.stdout == "42\\n" and result.ok

Backends (``get_backend(name)``): ``"bwrap"`` (bubblewrap namespaces, the default where it
works), ``"docker"`` (docker SDK, when an engine answers), ``"subprocess"`` (rlimits only, no
isolation: a fallback that warns). Every backend returns :class:`ExecResult`; a call never
raises for anything the code does (errors, timeouts, crashes are in the result).
"""

from toolgym.simulators.sandbox.backends import available_backends, get_backend
from toolgym.simulators.sandbox.base import Sandbox, SandboxError, SandboxUnavailable
from toolgym.simulators.sandbox.limits import ExecResult, SandboxLimits
from toolgym.simulators.sandbox.session import InterpreterSession

__all__ = [
    "ExecResult",
    "InterpreterSession",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxUnavailable",
    "available_backends",
    "get_backend",
]
