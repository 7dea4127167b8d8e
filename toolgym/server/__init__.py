"""The HTTP env server: `create_app(settings)` hosts registered envs as persisted sessions."""

from toolgym.server.app import create_app
from toolgym.server.settings import Settings

__all__ = ["Settings", "create_app"]
