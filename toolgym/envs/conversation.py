"""`ConversationEnv`: a ToolEnv whose text-only actions go to a counterpart (a user) who may end the episode."""

from __future__ import annotations

from typing import Any

from toolgym.envs.core import ToolEnv
from toolgym.envs.parsing import ParsedAction

JsonDict = dict[str, Any]


class ConversationEnv(ToolEnv):
    """Subclasses answer text-only actions in `_reply(parsed)` and call `end_conversation()` to finish.

    The reply becomes the observation and a `user` message in `info["messages"]`; when the
    conversation ends the episode terminates and `_score(None)` gives the final reward components.
    `info["evaluation"]` carries whatever `_evaluation_info()` returns at the end of an episode.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._conversation_over = False
        self._reply_text: str | None = None

    def _reply(self, parsed: ParsedAction) -> str:
        """The counterpart's answer to a text-only action."""
        raise NotImplementedError

    def _evaluation_info(self) -> JsonDict | None:
        """Details of the final evaluation for `info["evaluation"]` (None: no key)."""
        return None

    def end_conversation(self) -> None:
        """Mark the conversation as over: the current step terminates the episode."""
        self._conversation_over = True

    def _on_text_only(self, parsed: ParsedAction) -> str:
        self._reply_text = self._reply(parsed)
        return self._reply_text

    def step(self, action: str) -> tuple[str, float, bool, bool, JsonDict]:
        """Like `ToolEnv.step`; also ends the episode when the counterpart ends the conversation."""
        self._conversation_over, self._reply_text = False, None
        observation, reward, terminated, truncated, info = super().step(action)
        if self._reply_text:
            message = {"role": "user", "content": self._reply_text}
            self._messages.insert(len(self._messages) - len(info["messages"]) + 1, message)
            info["messages"].insert(1, message)
        if self._conversation_over and not terminated:
            if not truncated:
                components = self._score(None)
                info["reward_components"].update(components)
                reward += float(sum(components.values()))
                self._total_reward += float(sum(components.values()))
            terminated, truncated, self._done = True, False, True
        evaluation = self._evaluation_info() if terminated or truncated else None
        if evaluation is not None:
            info["evaluation"] = evaluation
        return observation, reward, terminated, truncated, info
