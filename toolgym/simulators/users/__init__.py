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
    kind: str | UserSimulator | None, generate: GenerateText | None = None, **kwargs: Any
) -> UserSimulator | None:
    """Build a user simulator: "scripted", "llm" (needs `generate`), "none"/None (solo mode), or pass one through."""
    if kind is None or kind == "none":
        return None
    if not isinstance(kind, str):
        return kind
    if kind == "scripted":
        return ScriptedUser()
    if kind == "llm":
        if generate is None:
            raise ValueError("user='llm' needs a text generator: pass user_generate=<callable(messages, seed) -> str>")
        return LLMUser(generate, **kwargs)
    raise ValueError(f"user must be one of {USER_KINDS} or a UserSimulator, got {kind!r}")


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
    "is_confirmation",
    "make_user",
    "user_prompt",
]
