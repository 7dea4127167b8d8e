"""API keys: who a request belongs to."""

from __future__ import annotations

import hashlib

from toolgym.server.errors import ApiError
from toolgym.server.settings import Settings


def owner_of(settings: Settings, authorization: str | None) -> str:
    """The owner id of a request: a digest of its API key ("" when the server has no keys)."""
    if not settings.api_keys:
        return ""
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or key.strip() not in settings.api_keys:
        raise ApiError(401, "unauthorized", "a valid API key is required: send 'Authorization: Bearer <key>'")
    return hashlib.sha256(key.strip().encode()).hexdigest()[:32]
