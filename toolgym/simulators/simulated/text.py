"""`generate_text`: one cached, seeded chat completion from any simulator backend (for user simulators)."""

from __future__ import annotations

from typing import Any

from toolgym.simulators.simulated.backends import make_backend
from toolgym.simulators.simulated.cache import SimCache, cache_key

JsonDict = dict[str, Any]
TEXT_PROMPT_VERSION = "text-v1"


def generate_text(backend: Any, messages: list[JsonDict], seed: int, *, cache: SimCache | None = None) -> str:
    """The backend's reply to `messages` (OpenAI chat format) under `seed`.

    `backend` is anything `make_backend` accepts. With a cache in record mode the first reply for
    (messages, backend, seed) is stored and replayed afterwards; in replay mode a miss raises
    `ReplayMiss`. Backend failures raise `BackendError`. The offline backend answers with a short
    neutral sentence chosen by seed.
    """
    engine = make_backend(backend)
    key = cache_key(kind="text", messages=messages, backend=engine.name, prompt=TEXT_PROMPT_VERSION, seed=seed)
    if cache is not None:
        hit = cache.lookup(key)
        if hit is not None:
            return str(hit[0])
    text = engine.chat(messages, seed=seed)
    if cache is not None:
        cache.store(key, "text", text, {"backend": engine.name})
    return text
