"""Group filters (drop or request groups after rollout) and prompt samplers (choose prompts).

`GROUP_FILTERS` maps a name to a factory `(**cfg) -> GroupFilter`; `PROMPT_SAMPLERS` maps a
name to a factory `(**cfg) -> PromptSampler`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import torch

from toolgym.trainers.algorithms.registry import Registry
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.rewards import correctness


class GroupFilter(Protocol):
    """`select(batch) -> (kept batch, number of groups dropped that should be regenerated)`."""

    def select(self, batch: RolloutBatch) -> tuple[RolloutBatch, int]: ...


class PromptSampler(Protocol):
    """Chooses `n` of the candidate prompts (by `stable_key`) using the estimator state."""

    def sample(
        self,
        prompt_keys: Sequence[int],
        state: dict[str, Any],
        n: int,
        rng: np.random.Generator,
    ) -> list[int]: ...


GROUP_FILTERS: Registry[Callable[..., GroupFilter]] = Registry("group filter", autoload=("toolgym.trainers.methods",))
PROMPT_SAMPLERS: Registry[Callable[..., PromptSampler]] = Registry(
    "prompt sampler", autoload=("toolgym.trainers.methods",)
)
REGISTRY = GROUP_FILTERS


def group_metric(batch: RolloutBatch, metric: str) -> torch.Tensor:
    """Per-row metric used to judge a group: "acc" (correctness) or "reward". -> [B] float."""
    if metric == "acc":
        return correctness(batch).to(torch.float32)
    if metric == "reward":
        return batch.reward.to(torch.float32)
    if metric in batch.reward_components:
        return batch.reward_components[metric].to(torch.float32)
    raise ValueError(f"unknown group metric {metric!r}")


def varied_groups(values: torch.Tensor, group_id: torch.Tensor) -> torch.Tensor:
    """True for rows whose group's metric is not constant. [B], [B] -> [B] bool."""
    _, idx = torch.unique(group_id, return_inverse=True)
    g = int(idx.max()) + 1 if idx.numel() else 0
    hi = torch.full((g,), -torch.inf).scatter_reduce(0, idx, values, "amax")
    lo = torch.full((g,), torch.inf).scatter_reduce(0, idx, values, "amin")
    return (hi > lo)[idx]


class DynamicSampling:
    """DAPO dynamic sampling: keep groups with 0 < #correct < G [DOCS verl filter_groups].

    The caller keeps generating (up to `max_num_gen_batches`) until `n_missing` is 0; the
    kept batches are joined with `batch.concat` and trimmed to whole groups.
    """

    def __init__(self, metric: str = "acc", max_num_gen_batches: int = 10) -> None:
        self.metric, self.max_num_gen_batches = metric, max_num_gen_batches

    def select(self, batch: RolloutBatch) -> tuple[RolloutBatch, int]:
        """Rows of varied groups; the number of groups dropped."""
        keep = varied_groups(group_metric(batch, self.metric), batch.group_id)
        dropped = torch.unique(batch.group_id[~keep]).numel()
        return batch.select(torch.nonzero(keep).squeeze(1)), int(dropped)


GROUP_FILTERS.register("dynamic_sampling", DynamicSampling)
