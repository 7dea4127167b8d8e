"""AWPO: outcome advantage plus a variance-gated, difficulty-weighted, clipped reasoning advantage (arXiv 2512.19126).

Only the abstract and summaries were readable: the gate, weight and clip functions are ASSUMED.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, group_stats, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch, SpanType
from toolgym.trainers.methods.tier_b._util import answer_score
from toolgym.trainers.rewards import REGISTRY as REWARDS

AWPO_SIGMA_MAX = 0.5  # std of a fair 0/1 outcome: the gate closes at this outcome spread (ASSUMED)
AWPO_CLIP = 0.5  # bound of the reasoning term, keeps the outcome objective primary (ASSUMED)
AWPO_REF_LEN = 32  # reasoning tokens that earn the full rule-based reasoning score (ASSUMED)
REASONING_KEY = "reasoning"


def variance_gate(outcome: Tensor, group_id: Tensor, sigma_max: float = AWPO_SIGMA_MAX) -> Tensor:
    """g = clamp(1 − std_G(R_out)/σ_max, 0, 1): open when the outcome signal vanishes. [B] -> [B]."""
    _, std, _ = group_stats(outcome, group_id)
    return (1.0 - std / sigma_max).clamp(0.0, 1.0)


def difficulty_weight(correct: Tensor, group_id: Tensor) -> Tensor:
    """w = 1 − group accuracy: harder queries lean more on the reasoning reward. [B] -> [B]."""
    acc, _, _ = group_stats(correct.to(torch.float32), group_id)
    return 1.0 - acc


def awpo_advantage(
    r_out: Tensor, r_reason: Tensor, group_id: Tensor, sigma_max: float = AWPO_SIGMA_MAX, clip: float = AWPO_CLIP
) -> Tensor:
    """A = A_out + clip(g·w·A_reason, −c, c). [B] -> [B]."""
    a_out = grpo_outcome(r_out, group_id)
    a_reason = grpo_outcome(r_reason, group_id)
    g = variance_gate(r_out, group_id, sigma_max)
    w = difficulty_weight(r_out > 0.5, group_id)
    return a_out + (g * w * a_reason).clamp(-clip, clip)


def rule_reasoning_score(batch: RolloutBatch, ref_len: int = AWPO_REF_LEN) -> Tensor:
    """An offline stand-in for the reasoning judge: min(1, reasoning tokens / ref_len). -> [B]."""
    if batch.span_type is None:
        return torch.zeros(batch.batch_size)
    reason = (batch.span_type.long() == int(SpanType.REASON)).to(torch.float32) * batch.mask
    return (reason.sum(dim=1) / ref_len).clamp(max=1.0)


class ReasoningScore:
    """Writes `reward_components["reasoning"]` from the rule score unless a judge already set it."""

    requires: ClassVar[frozenset[str]] = frozenset({"span_type"})

    def __init__(self, ref_len: int = AWPO_REF_LEN) -> None:
        self.ref_len = ref_len

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward_components[reasoning] = score [B]."""
        if REASONING_KEY in batch.reward_components:
            return batch
        score = rule_reasoning_score(batch, self.ref_len)
        return batch.replace(reward_components={**batch.reward_components, REASONING_KEY: score})


class AWPO(Estimator):
    """Two channels: outcome (all rows) and reasoning, gated by outcome variance and weighted by difficulty."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id"})

    def __init__(self, sigma_max: float = AWPO_SIGMA_MAX, clip: float = AWPO_CLIP) -> None:
        self.sigma_max, self.clip = sigma_max, clip

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] -> [B, T]."""
        reason = batch.reward_components.get(REASONING_KEY)
        if reason is None:
            raise ValueError("AWPO needs reward_components['reasoning'] (add the 'reasoning_score' transform)")
        adv = awpo_advantage(answer_score(batch), reason.to(torch.float32), batch.group_id, self.sigma_max, self.clip)
        return AdvOut(broadcast(adv, batch.mask))


REWARDS.register("reasoning_score", ReasoningScore)
ESTIMATORS.register("awpo", AWPO)

register_preset(
    MethodPreset(
        name="awpo",
        advantage=PluginRef("awpo", {"sigma_max": AWPO_SIGMA_MAX, "clip": AWPO_CLIP}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("reasoning_score", {"ref_len": AWPO_REF_LEN}),),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="AWPO: Enhancing Tool-Use of LLMs through Explicit Integration of Reasoning Rewards",
        arxiv="2512.19126",
        evidence="[ABS]+[SEC] A_out + g·w·A_reason with variance gate, difficulty weight, tailored clip; ASSUMED "
        "g = 1 − std/0.5, w = 1 − acc, clip ±0.5, rule reasoning score instead of the judge",
        tier="B",
    )
)
