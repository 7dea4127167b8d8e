"""The user-simulator contract: a hidden profile, one reply per assistant message, and a stop signal."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

JsonDict = dict[str, Any]
STOP_TOKEN = "###STOP###"
_CONFIRM_REQUEST = re.compile(r"\b(confirm|proceed|go ahead)\b", re.IGNORECASE)
_YES = re.compile(r"^\W*(yes|yeah|yep|sure|correct|confirmed|please do|go ahead)\b", re.IGNORECASE)


class Fact(BaseModel):
    """Something only the user knows, given when the assistant's message asks about one of `keywords`."""

    model_config = ConfigDict(extra="forbid")

    keywords: list[str]
    text: str


class UserProfile(BaseModel):
    """What a simulated user wants and knows; the agent sees only what the user says."""

    model_config = ConfigDict(extra="forbid")

    opening: str
    instructions: str = ""
    facts: list[Fact] = Field(default_factory=list)
    requests: list[str] = Field(default_factory=list)
    closing: str = "That's all I needed, thank you."
    confirm: bool = True

    def disclosed(self) -> str:
        """The opening followed by every fact and request: the whole task for solo (user-less) mode."""
        return " ".join([self.opening, *(f.text for f in self.facts), *self.requests])


@dataclass(frozen=True)
class UserTurn:
    """One user reply: its text, whether it ends the conversation, whether it is an explicit yes."""

    text: str
    stop: bool = False
    confirms: bool = False


def asks_confirmation(text: str) -> bool:
    """True when an assistant message asks the user to confirm an action."""
    return bool(_CONFIRM_REQUEST.search(text))


def is_confirmation(text: str) -> bool:
    """True when a user message is an explicit yes."""
    return bool(_YES.match(text))


class UserSimulator(Protocol):
    """Plays the user of one episode at a time."""

    kind: str

    def start(self, profile: UserProfile, seed: int) -> str:
        """Begin an episode; return the user's opening message."""
        ...

    def reply(self, assistant_text: str) -> UserTurn:
        """Answer one assistant message."""
        ...

    def get_state(self) -> JsonDict:
        """JSON-serializable state for snapshot and fork."""
        ...

    def set_state(self, state: JsonDict) -> None:
        """Restore `get_state` output."""
        ...
