"""User simulators: a scripted user that follows the task's script, and an LLM user (seeded, cached)."""

from __future__ import annotations

from typing import Any

from toolgym.simulators.users.base import (
    STOP_TOKEN,
    Fact,
    UserProfile,
    UserSimulator,
    UserTurn,
    asks_confirmation,
    is_confirmation,
)
from toolgym.simulators.users.llm import GenerateText, LLMUser, user_prompt
from toolgym.simulators.users.scripted import ScriptedUser

USER_KINDS = ("scripted", "llm", "none")


def make_user(
    kind: str | UserSimulator | None,
    generate: GenerateText | None = None,
    *,
    backend: Any = None,
    cache: Any = None,
) -> UserSimulator | None:
    """Build a user simulator: "scripted", "llm", "none"/None (solo mode), or pass one through.

    An LLM user talks through `generate(messages, seed)` when given, else through the simulated-API
    backends' cached `generate_text` with `backend` (any `make_backend` spec: "offline" by default,
    "openai", "transformers:<dir>", …) and `cache` (a `SimCache` or its config: record/replay).
    """
    if kind is None or kind == "none":
        return None
    if not isinstance(kind, str):
        return kind
    if kind == "scripted":
        return ScriptedUser()
    if kind == "llm":
        return LLMUser(generate if generate is not None else backend_generator(backend, cache))
    raise ValueError(f"user must be one of {USER_KINDS} or a UserSimulator, got {kind!r}")


def backend_generator(backend: Any = None, cache: Any = None) -> GenerateText:
    """A `GenerateText` over a simulator backend, recorded in (or replayed from) a `SimCache`."""
    from toolgym.simulators.simulated import SimCache, generate_text, make_backend

    engine, store = make_backend(backend), SimCache.from_config(cache)

    def generate(messages: list[dict[str, str]], seed: int) -> str:
        return generate_text(engine, list(messages), seed, cache=store)

    return generate


__all__ = [
    "STOP_TOKEN",
    "USER_KINDS",
    "Fact",
    "GenerateText",
    "LLMUser",
    "ScriptedUser",
    "UserProfile",
    "UserSimulator",
    "UserTurn",
    "asks_confirmation",
    "backend_generator",
    "is_confirmation",
    "make_user",
    "user_prompt",
]
