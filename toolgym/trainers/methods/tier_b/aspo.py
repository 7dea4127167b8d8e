"""ASPO: shape GRPO advantages (not rewards) towards earlier tool calls in correct rollouts (arXiv 2508.19201)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.methods.tier_b._util import answer_score, first_tool_call_position, member_z

ASPO_DELTA = -2.0  # δ, "conservative" setting of the 3P recipe [CODE-3P]; aggressive: −2.5
ASPO_K = 0.7  # k, clip of the bias relative to |A| [CODE-3P]; aggressive: 0.9


def aspo_shape(
    adv: Tensor, first_pos: Tensor, eligible: Tensor, group_id: Tensor, delta: float = ASPO_DELTA, k: float = ASPO_K
) -> Tensor:
    """Â = A + clip(δ·z, −k|A|, k|A|) on eligible rows; z = group z-score of the first-call position. [B].

    z is computed over the eligible rows of the group (ASSUMED normalization of Eq. 2); groups with
    fewer than two eligible rows or constant positions are left unchanged.
    """
    z = member_z(first_pos, group_id, eligible)
    bound = k * adv.abs()
    bias = torch.maximum(torch.minimum(delta * z, bound), -bound)
    return torch.where(eligible, adv + bias, adv)


class ASPO(Estimator):
    """GroupZ followed by the ASPO advantage-shaping transform; rewards are untouched."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id", "span_type"})

    def __init__(self, delta: float = ASPO_DELTA, k: float = ASPO_K) -> None:
        self.delta, self.k = delta, k

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] -> [B, T]."""
        adv = grpo_outcome(batch.reward.float(), batch.group_id)
        first = first_tool_call_position(batch)
        eligible = (answer_score(batch) > 0.5) & (first >= 0)
        shaped = aspo_shape(adv, first, eligible, batch.group_id, self.delta, self.k)
        return AdvOut(broadcast(shaped, batch.mask))


ESTIMATORS.register("aspo", ASPO)

register_preset(
    MethodPreset(
        name="aspo",
        advantage=PluginRef("aspo", {"delta": ASPO_DELTA, "k": ASPO_K}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="Understanding Tool-Integrated Reasoning (ASPO)",
        arxiv="2508.19201",
        evidence="[CODE-3P] clipped bias rule, δ=−2.0, k=0.7 (conservative); [ABS] idea; "
        "ASSUMED z over eligible rows of the group, position counted in model tokens",
        tier="B",
    )
)
