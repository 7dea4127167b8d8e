"""Fixtures for the Tier B/C method tests: small hand-made batches, a tiny model, a scripted Calculator policy."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
import torch

from toolgym.trainers.batch import RolloutBatch


def make_batch(rewards: Sequence[float], groups: Sequence[int], t: int = 4, **fields: Any) -> RolloutBatch:
    """B rows of T tokens, all trainable except position 0; extra fields as given."""
    b = len(rewards)
    mask = torch.ones(b, t)
    mask[:, 0] = 0
    return RolloutBatch(
        input_ids=torch.zeros(b, t, dtype=torch.long),
        attention_mask=torch.ones(b, t),
        loss_mask=mask,
        reward=torch.tensor(rewards, dtype=torch.float32),
        group_id=torch.tensor(groups, dtype=torch.long),
        **fields,
    )


@pytest.fixture
def batch_factory():
    """`make_batch` as a fixture."""
    return make_batch


_EXPR = re.compile(r"[\d(][\d\s()+\-*]*\d\)?")


def expression_of(prompt: str) -> str:
    """The arithmetic expression in a Calculator prompt."""
    text = prompt.rsplit("\n", 1)[-1]
    return max(_EXPR.findall(text), key=len).strip()


class ScriptedCalculatorPolicy:
    """Calls the calculator (a wrong expression for the first `n_wrong` calls and the calls numbered in
    `wrong_calls`), then answers with the tool's result; `direct=True` answers without tools."""

    def __init__(self, n_wrong: int = 0, direct: bool = False, wrong_calls: set[int] | None = None) -> None:
        self.n_wrong, self.direct, self.calls = n_wrong, direct, 0
        self.wrong_calls = wrong_calls or set()

    def __call__(self, prompt: str, history: Sequence[tuple[str, str]], prefix: str) -> str:
        expr = expression_of(prompt)
        if self.direct:
            return f"{prefix}<answer>{eval(expr)}</answer>"  # noqa: S307 — test arithmetic only
        if not history:
            self.calls += 1
            bad = " + 1" if self.calls <= self.n_wrong or self.calls in self.wrong_calls else ""
            call = '{"name": "calculator", "arguments": {"expression": "' + expr + bad + '"}}'
            return f"{prefix or 'I will compute it.'}<tool_call>{call}</tool_call>"
        value = re.search(r"-?\d+", history[-1][1])
        return f"<answer>{value.group(0) if value else 0}</answer>"


@pytest.fixture(name="ScriptedCalculatorPolicy")
def scripted_calculator_policy() -> type[ScriptedCalculatorPolicy]:
    """The scripted policy class (instantiate with n_wrong / direct)."""
    return ScriptedCalculatorPolicy
