"""`generate_text`: one cached, seeded chat completion from any simulator backend (for user simulators)."""

from __future__ import annotations

import os
import threading
from typing import Any

from toolgym.simulators.simulated.backends import Backend, make_backend
from toolgym.simulators.simulated.cache import SimCache, cache_key
from toolgym.simulators.simulated.values import canonical_json

JsonDict = dict[str, Any]
TEXT_PROMPT_VERSION = "text-v1"
_BACKENDS: dict[str, Backend] = {}
_LOCK = threading.Lock()
_ENV_KEYS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TOOLGYM_SIM_MODEL")


def _backend(spec: Any) -> Backend:
    """A backend per distinct spec, built once: a transformers model loads once, an HTTP pool is reused."""
    if isinstance(spec, Backend) or not isinstance(spec, (str, dict, type(None))):
        return make_backend(spec)
    key = canonical_json([spec, [os.environ.get(name) for name in _ENV_KEYS]])
    with _LOCK:
        if key not in _BACKENDS:
            _BACKENDS[key] = make_backend(spec)
        return _BACKENDS[key]


def generate_text(backend: Any, messages: list[JsonDict], seed: int, *, cache: SimCache | None = None) -> str:
    """The backend's reply to `messages` (OpenAI chat format) under `seed`. A stable API: user
    simulators and other free-text generators build on it.

    `backend` is anything `make_backend` accepts; specs (None, a string, a dict) are built once per
    process and reused, so a transformers model loads once and an HTTP connection pool is shared.
    The cache key is (messages, backend name, `TEXT_PROMPT_VERSION`, seed). With a cache in record mode the first reply for
    (messages, backend, seed) is stored and replayed afterwards; in replay mode a miss raises
    `ReplayMiss`. Backend failures raise `BackendError`. The offline backend answers with a short
    neutral sentence chosen by seed.
    """
    engine = _backend(backend)
    key = cache_key(kind="text", messages=messages, backend=engine.name, prompt=TEXT_PROMPT_VERSION, seed=seed)
    if cache is not None:
        hit = cache.lookup(key)
        if hit is not None:
            return str(hit[0])
    text = engine.chat(messages, seed=seed)
    if cache is not None:
        cache.store(key, "text", text, {"backend": engine.name})
    return text
