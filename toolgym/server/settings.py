"""Server settings, read from `TOOLGYM_*` environment variables when the app is built."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

PREFIX = "TOOLGYM_"
DEFAULT_DATABASE_URL = "sqlite:///./toolgym.db"


@dataclass(frozen=True)
class Settings:
    """Everything the server can be configured with; each field maps to `TOOLGYM_<FIELD>`.

    `api_keys` is a comma-separated list of bearer keys; `env_modules` a comma-separated list of
    modules imported at start-up that register extra env ids (they add to `ENV_IDS`).
    """

    database_url: str = DEFAULT_DATABASE_URL
    api_keys: tuple[str, ...] = ()
    max_sessions: int = 4096
    session_ttl_s: float = 3600.0
    sweep_interval_s: float = 30.0
    step_timeout_s: float = 60.0
    max_action_chars: int = 256 * 1024
    max_request_bytes: int = 1024 * 1024
    max_batch: int = 1024
    worker_threads: int = 8
    env_modules: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from `TOOLGYM_*` variables (unset ones keep their defaults)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in fields(cls):
            raw = environ.get(PREFIX + field.name.upper())
            if raw is not None and raw.strip() != "":
                values[field.name] = _convert(field.name, str(field.type), raw.strip())
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with some fields changed."""
        return Settings(**{**self.__dict__, **changes})


def _convert(name: str, type_name: str, raw: str) -> Any:
    try:
        if type_name.startswith("tuple"):
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        if type_name == "int":
            return int(raw)
        if type_name == "float":
            return float(raw)
    except ValueError:
        raise ValueError(f"{PREFIX}{name.upper()} must be a {type_name}, got {raw!r}") from None
    return raw
