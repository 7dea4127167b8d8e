"""APO (experimental): anchored rectification — negatives inside the reference model's top-K support are
not pushed down, and a KL pull restores them towards the reference.

arXiv 2602.05717; abstract + README only: loss form, K and coefficients are ASSUMED. The pull acts on
the sampled token (the learner has no full current distribution here): on wrong responses, tokens in
the reference top-K support get k3 KL to the reference; off-support negatives get the full push.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RegularizerRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.regularizers import REGISTRY as REGULARIZERS
from toolgym.trainers.regularizers import Regularizer, kl_k3

APO_PULL = 0.1  # β, pull coefficient (ASSUMED)
APO_PUSH = 1.0  # λ, push weight on off-support negatives (ASSUMED)
APO_K = 8  # reference top-K support size the learner should store (ASSUMED)


def in_support(input_ids: Tensor, topk_ids: Tensor) -> Tensor:
    """1 where the sampled token is among the reference's top-K at that position. [B, T], [B, T, K] -> [B, T]."""
    return (topk_ids == input_ids.unsqueeze(-1)).any(dim=-1).to(torch.float32)


def anchored_weights(adv: Tensor, support: Tensor, push: float = APO_PUSH) -> Tensor:
    """Token weights: 0 for negatives in support (rectified), λ for negatives off support, 1 otherwise. [B, T]."""
    neg = adv < 0
    return torch.where(
        neg & (support > 0), torch.zeros_like(adv), torch.where(neg, torch.full_like(adv, push), torch.ones_like(adv))
    )


class APO(Estimator):
    """GroupZ with anchored token weights; aux["pull_mask"] marks in-support tokens of wrong responses."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id", "ref_topk_ids"})

    def __init__(self, push: float = APO_PUSH) -> None:
        self.push = push

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] -> [B, T]."""
        if batch.ref_topk_ids is None:
            raise ValueError("APO needs batch.ref_topk_ids (the reference model's top-K ids per position)")
        adv = broadcast(grpo_outcome(batch.reward.float(), batch.group_id), batch.mask)
        support = in_support(batch.input_ids, batch.ref_topk_ids) * batch.mask
        pull = support * (adv < 0).to(support.dtype)
        return AdvOut(adv, token_weights=anchored_weights(adv, support, self.push), aux={"pull_mask": pull})


def support_pull(logp: Tensor, ref_logp: Tensor, mask: Tensor, pull_mask: Tensor, **_: object) -> Tensor:
    """k3 KL to the reference on in-support tokens of wrong responses. [B, T]."""
    return kl_k3(logp, ref_logp) * pull_mask * mask


ESTIMATORS.register("apo", APO)
REGULARIZERS.register(
    "apo_pull",
    Regularizer(
        support_pull, ("logp", "ref_logp", "mask", "pull_mask"), description="KL pull on the ref top-K support"
    ),
)

register_preset(
    MethodPreset(
        name="apo",
        advantage=PluginRef("apo", {"push": APO_PUSH}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        regularizers=(RegularizerRef("apo_pull", APO_PULL),),
        rollout=RolloutSpec("group", 8, {"ref_topk": APO_K}),
        hparams={"lr": 1e-6},
        paper="Anchored Policy Optimization: Support-Constrained Rectification",
        arxiv="2602.05717",
        evidence="[ABS]+[SEC] push/pull on the reference top-K support; ASSUMED K=8, β=0.1, λ=1, rectification = "
        "no push on in-support negatives, pull = k3 KL on those tokens",
        tier="C",
        experimental=True,
    )
)
