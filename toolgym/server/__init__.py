"""The HTTP env server: `create_app(settings)` hosts registered envs as persisted sessions."""

from __future__ import annotations

from typing import Any

from toolgym.server.settings import Settings

__all__ = ["Settings", "create_app"]


def __getattr__(name: str) -> Any:
    """Import the FastAPI app lazily, so a missing extra fails with a message that names it."""
    if name != "create_app":
        raise AttributeError(name)
    try:
        from toolgym.server.app import create_app
    except ImportError as exc:
        raise ImportError(f"the toolgym server needs its extra: pip install 'toolgym[server]' ({exc})") from exc
    return create_app
