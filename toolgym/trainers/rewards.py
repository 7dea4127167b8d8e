"""Reward transforms: pure maps RolloutBatch -> RolloutBatch that edit the rewards (methods.md §5).

A transform returns a new batch (via `batch.replace`) and never mutates its input. The registry
maps a name to a factory `(**cfg) -> RewardTransform`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Protocol

import torch
from torch import Tensor

from toolgym.trainers.algorithms.registry import Registry
from toolgym.trainers.batch import RolloutBatch


class RewardTransform(Protocol):
    """`transform(batch) -> batch` editing reward / reward_components / turn or token rewards."""

    requires: ClassVar[frozenset[str]]

    def __call__(self, batch: RolloutBatch) -> RolloutBatch: ...


REGISTRY: Registry[Callable[..., RewardTransform]] = Registry(
    "reward transform", autoload=("toolgym.trainers.methods",)
)


def correctness(batch: RolloutBatch, threshold: float = 0.5) -> Tensor:
    """`batch.correct` if set, else reward ≥ threshold. -> [B] bool."""
    if batch.correct is not None:
        return batch.correct.bool()
    return batch.reward >= threshold


def response_lengths(batch: RolloutBatch) -> Tensor:
    """`batch.resp_len` if set, else the number of model tokens. -> [B] float."""
    if batch.resp_len is not None:
        return batch.resp_len.to(torch.float32)
    return batch.num_model_tokens()


def overlong_penalty(length: Tensor, max_len: int, buffer_len: int, penalty_factor: float = 1.0) -> Tensor:
    """DAPO soft overlong punishment. [B] -> [B].

    0 if |y| ≤ L_max − L_buf; ((L_max − L_buf) − |y|)/L_buf·factor inside the buffer; −factor
    beyond L_max [DOCS DAPO; CODE verl dapo reward manager: min(−exceed/L_buf·factor, 0)].
    """
    expected = max_len - buffer_len
    pen = torch.clamp(-(length - expected) / buffer_len * penalty_factor, max=0.0)
    return torch.clamp(pen, min=-penalty_factor)


class OverlongShaping:
    """Adds the DAPO overlong penalty to `reward` (and records it as a component)."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward"})

    def __init__(self, max_len: int, buffer_len: int, penalty_factor: float = 1.0) -> None:
        if not 0 < buffer_len <= max_len:
            raise ValueError("need 0 < buffer_len <= max_len")
        self.max_len, self.buffer_len, self.factor = max_len, buffer_len, penalty_factor

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] += penalty [B]."""
        pen = overlong_penalty(response_lengths(batch), self.max_len, self.buffer_len, self.factor)
        comps = {**batch.reward_components, "overlong": pen}
        return batch.replace(reward=batch.reward.float() + pen, reward_components=comps)


class SignedCorrectness:
    """R = +1 if correct else −1 (DAPO [PRIOR], ToRL [CODE] `correctness_score_default`)."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward"})

    def __init__(self, threshold: float = 0.5) -> None:
        self.threshold = threshold

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] -> ±1 [B]; `correct` keeps the correctness used (later shaping may move R)."""
        ok = correctness(batch, self.threshold)
        reward = torch.where(ok, 1.0, -1.0).to(torch.float32)
        return batch.replace(reward=reward, correct=ok, reward_components={**batch.reward_components})


class OverlongFilter:
    """DAPO's overlong filtering: truncated samples leave the loss (loss mask zeroed) [DOCS]."""

    requires: ClassVar[frozenset[str]] = frozenset({"truncated"})

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """loss_mask [B, T] <- 0 on rows with truncated = True."""
        if batch.truncated is None:
            raise ValueError("overlong filtering needs batch.truncated")
        keep = (~batch.truncated.bool()).to(batch.loss_mask.dtype).unsqueeze(1)
        return batch.replace(loss_mask=batch.loss_mask * keep)


REGISTRY.register("overlong_shaping", OverlongShaping)
REGISTRY.register("overlong_filter", OverlongFilter)
REGISTRY.register("signed_correctness", SignedCorrectness)
