"""An LLM-played user: role-flipped prompt with hidden instructions and facts, seeded and cached."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping

from toolgym.simulators.users.base import STOP_TOKEN, JsonDict, UserProfile, UserTurn, is_confirmation
from toolgym.simulators.worlds.state import canonical_hash

ChatMessages = list[dict[str, str]]
GenerateText = Callable[[ChatMessages, int], str]
PROMPT_VERSION = "user-v1"
_RULES = (
    "You are playing a customer talking to a support agent. Stay in character and never act as the agent. "
    "Write one short message at a time. Do not give away all of your instructions at once: share a piece of "
    "information only when the agent asks for it or when you need it to move forward. Never invent information "
    f"that is not in your instructions. When the agent asks you to confirm an action you want, answer 'yes'. "
    f"When your goal is met, or cannot be met, say goodbye and end your message with {STOP_TOKEN}."
)


def user_prompt(profile: UserProfile, transcript: ChatMessages) -> ChatMessages:
    """The chat messages the user model sees: its rules and hidden task, then the flipped transcript."""
    facts = "\n".join(f"- {fact.text}" for fact in profile.facts) or "- (none)"
    requests = "\n".join(f"- {r}" for r in profile.requests) or "- (none)"
    system = (
        f"{_RULES}\n\nYour goal: {profile.instructions or profile.opening}\n"
        f"What you know:\n{facts}\nFurther requests, in order, once the first is handled:\n{requests}"
    )
    flipped = [{"role": "assistant" if m["role"] == "user" else "user", "content": m["content"]} for m in transcript]
    return [{"role": "system", "content": system}, *flipped]


class LLMUser:
    """A user played by a text generator (any backend's `generate_text(messages, seed)`).

    Every reply is keyed by the prompt version, the full prompt and a per-turn seed derived from
    the episode seed; `cache` (shared between episodes) makes the same conversation replay exactly.
    """

    kind = "llm"

    def __init__(
        self,
        generate: GenerateText,
        cache: MutableMapping[str, str] | None = None,
        max_chars: int = 2000,
    ) -> None:
        self.generate = generate
        self.cache: MutableMapping[str, str] = {} if cache is None else cache
        self.max_chars = max_chars
        self.profile: UserProfile | None = None
        self.seed = 0
        self.transcript: ChatMessages = []

    def start(self, profile: UserProfile, seed: int) -> str:
        """Begin an episode: the opening is the profile's, so every episode of a task starts alike."""
        self.profile, self.seed = profile, seed
        self.transcript = [{"role": "user", "content": profile.opening}]
        return profile.opening

    def reply(self, assistant_text: str) -> UserTurn:
        """Generate (or replay from the cache) the user's answer to one assistant message."""
        if self.profile is None:
            raise RuntimeError("LLMUser.reply() called before start()")
        self.transcript.append({"role": "assistant", "content": assistant_text})
        messages = user_prompt(self.profile, self.transcript)
        turn_seed = (self.seed * 1_000_003 + len(self.transcript)) % 2**31
        text = self._generate(messages, turn_seed).strip()[: self.max_chars]
        self.transcript.append({"role": "user", "content": text})
        stop = STOP_TOKEN in text
        return UserTurn(text or "...", stop=stop, confirms=not stop and is_confirmation(text))

    def _generate(self, messages: ChatMessages, seed: int) -> str:
        key = canonical_hash({"version": PROMPT_VERSION, "messages": messages, "seed": seed})
        if key not in self.cache:
            self.cache[key] = self.generate(messages, seed)
        return self.cache[key]

    def get_state(self) -> JsonDict:
        """The profile, seed and transcript (the cache is shared and not part of the episode)."""
        profile = self.profile.model_dump() if self.profile else None
        return {"profile": profile, "seed": self.seed, "transcript": [dict(m) for m in self.transcript]}

    def set_state(self, state: JsonDict) -> None:
        """Restore `get_state` output."""
        self.profile = UserProfile.model_validate(state["profile"]) if state["profile"] else None
        self.seed = state["seed"]
        self.transcript = [dict(m) for m in state["transcript"]]
