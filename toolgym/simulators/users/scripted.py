"""A deterministic user that answers from its profile: facts on request, then its requests, then goodbye."""

from __future__ import annotations

import re

from toolgym.simulators.users.base import STOP_TOKEN, JsonDict, UserProfile, UserTurn, asks_confirmation

_WORD = re.compile(r"[a-z0-9]+")
_MORE = re.compile(r"\b(anything else|something else|any other)\b", re.IGNORECASE)
CONFIRM_TEXT = "Yes, please go ahead."
UNKNOWN_TEXT = "Sorry, I don't know that."
DECLINE_TEXT = "No, please don't do that."


class ScriptedUser:
    """Follows the task's user script; the same assistant messages always get the same replies.

    Rules, in order: an assistant message that contains every word of one of a fact's keywords (in
    any order, case-insensitive) gets those facts; one that
    asks for confirmation gets an explicit yes (or no when the profile says so); any other question,
    unless it offers more help ("anything else?"), gets "I don't know"; otherwise the user brings up
    the next scripted request, and when none is left ends the conversation.
    """

    kind = "scripted"

    def __init__(self) -> None:
        self.profile: UserProfile | None = None
        self.next_request = 0

    def start(self, profile: UserProfile, seed: int) -> str:
        """Begin an episode (the seed is unused: the script is deterministic)."""
        self.profile, self.next_request = profile, 0
        return profile.opening

    def reply(self, assistant_text: str) -> UserTurn:
        """The scripted answer to one assistant message."""
        profile = self._require_profile()
        words = set(_WORD.findall(assistant_text.lower()))
        facts = [f.text for f in profile.facts if any(set(_WORD.findall(k.lower())) <= words for k in f.keywords)]
        if facts:
            return UserTurn(" ".join(dict.fromkeys(facts)))
        if asks_confirmation(assistant_text):
            return UserTurn(CONFIRM_TEXT, confirms=True) if profile.confirm else UserTurn(DECLINE_TEXT)
        if "?" in assistant_text and not _MORE.search(assistant_text):
            return UserTurn(UNKNOWN_TEXT)
        if self.next_request < len(profile.requests):
            self.next_request += 1
            return UserTurn(profile.requests[self.next_request - 1])
        return UserTurn(f"{profile.closing} {STOP_TOKEN}", stop=True)

    def get_state(self) -> JsonDict:
        """Position in the script."""
        return {"profile": self.profile.model_dump() if self.profile else None, "next_request": self.next_request}

    def set_state(self, state: JsonDict) -> None:
        """Restore a position in the script."""
        self.profile = UserProfile.model_validate(state["profile"]) if state["profile"] else None
        self.next_request = state["next_request"]

    def _require_profile(self) -> UserProfile:
        if self.profile is None:
            raise RuntimeError("ScriptedUser.reply() called before start()")
        return self.profile
