"""Group filters (drop or request groups after rollout) and prompt samplers (choose prompts).

`GROUP_FILTERS` maps a name to a factory `(**cfg) -> GroupFilter`; `PROMPT_SAMPLERS` maps a
name to a factory `(**cfg) -> PromptSampler`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import torch

from toolgym.trainers.algorithms.registry import Registry
from toolgym.trainers.batch import RolloutBatch, concat
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
    hi = torch.full((g,), -torch.inf, device=values.device).scatter_reduce(0, idx, values, "amax")
    lo = torch.full((g,), torch.inf, device=values.device).scatter_reduce(0, idx, values, "amin")
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


def first_groups(batch: RolloutBatch, n: int) -> RolloutBatch:
    """The rows of the first `n` groups, in order of first appearance."""
    order: list[int] = []
    for g in batch.group_id.tolist():
        if g not in order:
            order.append(g)
    wanted = torch.tensor(order[:n], dtype=batch.group_id.dtype, device=batch.group_id.device)
    keep = torch.isin(batch.group_id, wanted)
    return batch.select(torch.nonzero(keep).squeeze(1))


def _renumber(batch: RolloutBatch, offset: int) -> tuple[RolloutBatch, int]:
    # dense group ids offset..offset+G-1, so groups of different generation batches never merge
    _, dense = torch.unique(batch.group_id, return_inverse=True)
    groups = int(dense.max()) + 1 if dense.numel() else 0
    return batch.replace(group_id=dense + offset), offset + groups


def collect_groups(
    batches: Iterable[RolloutBatch],
    group_filter: GroupFilter | None,
    target_groups: int,
    max_num_gen_batches: int = 10,
) -> tuple[RolloutBatch | None, int]:
    """DAPO's dynamic-sampling loop: draw generation batches lazily, keep the groups the filter
    keeps, stop once `target_groups` are kept or `max_num_gen_batches` were drawn.

    Returns (the first `target_groups` kept groups, or all kept if fewer; None if none) and the
    number of batches drawn. Group ids are renumbered densely across batches.
    """
    kept: list[RolloutBatch] = []
    offset = drawn = n_kept = 0
    for batch in batches:
        drawn += 1
        if group_filter is not None:
            batch, _ = group_filter.select(batch)
        if batch.batch_size:
            batch, offset = _renumber(batch, offset)
            kept.append(batch)
            n_kept = offset
        if n_kept >= target_groups or drawn >= max_num_gen_batches:
            break
    if not kept:
        return None, drawn
    return first_groups(concat(kept), target_groups), drawn
