"""A text space that admits any Unicode string (Gymnasium's default `Text` charset does not)."""

from __future__ import annotations

from typing import Any

from gymnasium.spaces import Text


class UnicodeText(Text):
    """Any `str` up to `max_length` characters; samples stay alphanumeric."""

    def __init__(self, max_length: int = 1 << 20, *, min_length: int = 0, seed: Any = None) -> None:
        super().__init__(max_length=max_length, min_length=min_length, seed=seed)

    def contains(self, x: Any) -> bool:
        """Whether `x` is a string within the length bounds."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )
