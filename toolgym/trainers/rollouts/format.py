"""How env text becomes model context: chat markers, span types, and the markers the sampler may not emit."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from toolgym.trainers.batch import SpanType as Span

_TAGGED = (
    (re.compile(r"<tool_call>.*?(</tool_call>|$)", re.S), Span.TOOL_CALL),
    (re.compile(r"<answer>.*?(</answer>|$)", re.S), Span.ANSWER),
)


@dataclass(frozen=True)
class ChatFormat:
    """Markers around each message; the model writes assistant turns ending with `end_of_turn`."""

    user: str = "<|im_start|>user\n"
    assistant: str = "<|im_start|>assistant\n"
    tool: str = "<|im_start|>tool\n"
    end_of_turn: str = "<|im_end|>"
    separator: str = ""

    def prompt(self, observation: str) -> str:
        """Text before the first assistant turn."""
        return f"{self.user}{observation}{self.separator}{self.assistant}"

    def observation(self, observation: str) -> str:
        """Text the environment adds after an assistant turn (tool results or a user reply)."""
        return f"{self.separator}{self.tool}{observation}{self.separator}{self.assistant}"

    def forbidden_ids(self, tokenizer: Any) -> list[int]:
        """Ids the sampler must never emit: user/tool markers and padding (no forged tool results)."""
        texts = [self.user, self.tool, "<tool_response>", "</tool_response>", tokenizer.pad_token]
        ids = {tokenizer.convert_tokens_to_ids(t) for t in texts if t}
        return sorted(i for i in ids if i is not None and i != tokenizer.unk_token_id)

    def end_id(self, tokenizer: Any) -> int:
        """The token id that ends an assistant turn."""
        token_id = tokenizer.convert_tokens_to_ids(self.end_of_turn)
        if token_id is None or token_id == tokenizer.unk_token_id:
            raise ValueError(f"end_of_turn {self.end_of_turn!r} is not a single token of this tokenizer")
        return int(token_id)


def classify_turn(pieces: list[str]) -> list[Span]:
    """Span per generated token, from the decoded text of each token (tool call, answer, else reasoning)."""
    text = "".join(pieces)
    char_span = [Span.REASON] * len(text)
    for pattern, span in _TAGGED:
        for match in pattern.finditer(text):
            char_span[match.start() : match.end()] = [span] * (match.end() - match.start())
    spans, offset = [], 0
    for piece in pieces:
        spans.append(char_span[offset] if piece and offset < len(text) else Span.REASON)
        offset += len(piece)
    return spans
