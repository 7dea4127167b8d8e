"""ADORA: group advantages re-weighted by whether correct rollouts are longer than wrong ones (arXiv 2602.10019)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.methods.tier_b._util import answer_score
from toolgym.trainers.rewards import response_lengths

ADORA_LAMBDA = 0.1  # weight of "temporarily disadvantageous" groups [CODE ShadeCloak/ADORA `lamda`]


def length_advantage_groups(length: Tensor, correct: Tensor, group_id: Tensor) -> Tensor:
    """True for rows of groups where max len(correct) > mean len(wrong), or with no correct row. [B] bool.

    The Length Advantage criterion of the official code: such groups are "temporarily
    advantageous samples" (TAS) and keep weight 1.
    """
    out = torch.ones_like(correct)
    for g in torch.unique(group_id):
        rows = group_id == g
        pos, neg = length[rows & correct], length[rows & ~correct]
        if pos.numel() == 0:
            continue
        mean_neg = neg.mean() if neg.numel() else torch.tensor(float("inf"))
        out[rows] = bool(pos.max() > mean_neg)
    return out


def adora_advantage(
    reward: Tensor, length: Tensor, correct: Tensor, group_id: Tensor, lam: float = ADORA_LAMBDA
) -> Tensor:
    """GRPO z-score, multiplied by λ for groups failing the length criterion. [B] -> [B]."""
    adv = grpo_outcome(reward, group_id)
    keep = length_advantage_groups(length, correct, group_id)
    return torch.where(keep, adv, lam * adv)


class ADORA(Estimator):
    """ADORA's length-advantage weighting (the LLM variant: amplify long correct reasoning)."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id"})

    def __init__(self, lam: float = ADORA_LAMBDA) -> None:
        self.lam = lam

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] -> [B, T]."""
        correct = answer_score(batch) > 0.5
        adv = adora_advantage(batch.reward.float(), response_lengths(batch), correct, batch.group_id, self.lam)
        return AdvOut(broadcast(adv, batch.mask))


ESTIMATORS.register("adora", ADORA)

register_preset(
    MethodPreset(
        name="adora",
        advantage=PluginRef("adora", {"lam": ADORA_LAMBDA}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("seq-mean-token-mean"),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="ADORA: Advantage Dynamics via Online Rollout Adaptation",
        arxiv="2602.10019",
        evidence="[CODE] ShadeCloak/ADORA LLM/verl/trainer/ppo/core_algos.py "
        "compute_grpo_outcome_advantage_length_weight (λ=0.1, max len correct > mean len wrong); "
        "ASSUMED correctness from the env's success component (the code thresholds a Logic-RL score)",
        tier="B",
    )
)
