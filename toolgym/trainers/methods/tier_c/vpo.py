"""VPO (experimental): credit by how often a rollout is best under Dirichlet-sampled reward weightings.

arXiv 2605.22817; abstract-level only: the credit formula, concentration and sample count are ASSUMED,
and several answers inside one rollout are not segmented (one answer per rollout).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.methods.tier_b._util import answer_score, format_ok, tool_call_counts
from toolgym.trainers.rewards import REGISTRY as REWARDS

VPO_ALPHA = 1.0  # Dirichlet concentration (ASSUMED: uniform over the simplex)
VPO_SAMPLES = 64  # weightings sampled per step (ASSUMED)


def argmax_credit(vectors: Tensor, group_id: Tensor, weights: Tensor) -> Tensor:
    """c_i = mean over weightings w of 1[i is the group's argmax of w·R] (ties share). [B, d], [M, d] -> [B]."""
    scores = vectors @ weights.T  # [B, M]
    credit = torch.zeros(vectors.shape[0])
    for g in torch.unique(group_id):
        rows = torch.nonzero(group_id == g).flatten()
        s = scores[rows]  # [G, M]
        best = (s >= s.max(dim=0, keepdim=True).values - 1e-9).to(torch.float32)
        credit[rows] = (best / best.sum(dim=0, keepdim=True)).mean(dim=1)
    return credit


class VPO(Estimator):
    """GroupZ of the argmax credit under w ~ Dirichlet(α·1)."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward_vector", "group_id"})

    def __init__(self, alpha: float = VPO_ALPHA, n_samples: int = VPO_SAMPLES, seed: int = 0) -> None:
        self.alpha, self.n_samples = alpha, n_samples
        self.generator = torch.Generator().manual_seed(seed)

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B, d] -> [B, T]."""
        if batch.reward_vector is None:
            raise ValueError("VPO needs batch.reward_vector (add the 'reward_vector' transform)")
        d = batch.reward_vector.shape[1]
        gamma = torch._standard_gamma(torch.full((self.n_samples, d), self.alpha), generator=self.generator)
        weights = gamma / gamma.sum(dim=1, keepdim=True)  # Dirichlet samples [M, d]
        credit = argmax_credit(batch.reward_vector.float(), batch.group_id, weights)
        return AdvOut(broadcast(grpo_outcome(credit, batch.group_id), batch.mask), aux={"vpo_credit": credit})


class RewardVector:
    """Builds `reward_vector` from named components; the defaults give (success, 1/(1+calls), format)."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward"})

    def __init__(self, keys: Sequence[str] = ("success", "efficiency", "format")) -> None:
        self.keys = tuple(keys)

    def column(self, batch: RolloutBatch, key: str) -> Tensor:
        """One component [B]."""
        if key in batch.reward_components:
            return batch.reward_components[key].to(torch.float32)
        if key == "success":
            return answer_score(batch)
        if key == "efficiency":
            return 1.0 / (1.0 + tool_call_counts(batch))
        if key == "format":
            return format_ok(batch)
        raise ValueError(f"no reward component {key!r} for the reward vector")

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward_vector = [B, d]."""
        return batch.replace(reward_vector=torch.stack([self.column(batch, k) for k in self.keys], dim=1))


ESTIMATORS.register("vpo", VPO)
REWARDS.register("reward_vector", RewardVector)

register_preset(
    MethodPreset(
        name="vpo",
        advantage=PluginRef("vpo", {"alpha": VPO_ALPHA, "n_samples": VPO_SAMPLES}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("reward_vector"),),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="Vector Policy Optimization: Training for Diversity Improves Test-Time Search",
        arxiv="2605.22817",
        evidence="[ABS]+[SEC] vector rewards, Dirichlet scalarization, set-level argmax credit; ASSUMED α=1, "
        "64 samples, credit = argmax frequency, one answer per rollout",
        tier="C",
        experimental=True,
    )
)
