"""HDPO (Metis): decoupled accuracy and conditional tool-efficiency advantages (arXiv 2604.08545)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.methods.tier_b._util import answer_score, format_ok, member_z, tool_call_counts

HDPO_W_ANS = 0.9  # R_acc = 0.9·R_ans + 0.1·R_fmt [SEC]
HDPO_W_FMT = 0.1  # [SEC]
HDPO_W_EFF = 1.0  # w, weight of the efficiency channel: not retrieved (ASSUMED 1.0)


def hdpo_rewards(r_ans: Tensor, r_fmt: Tensor, calls: Tensor) -> tuple[Tensor, Tensor]:
    """(R_acc, R_tool): R_acc = 0.9·R_ans + 0.1·R_fmt; R_tool = 1/(T+1) if correct else 0. [B] -> [B], [B]."""
    r_acc = HDPO_W_ANS * r_ans + HDPO_W_FMT * r_fmt
    r_tool = torch.where(r_ans > 0.5, 1.0 / (calls + 1.0), torch.zeros_like(calls))
    return r_acc, r_tool


def hdpo_advantage(
    r_ans: Tensor, r_fmt: Tensor, calls: Tensor, group_id: Tensor, w_eff: float = HDPO_W_EFF
) -> tuple[Tensor, Tensor, Tensor]:
    """A = A_acc + w·A_eff; A_acc over all G rollouts, A_eff only over the correct ones. [B] -> 3×[B].

    A_eff is 0 outside the correct set and when fewer than two rollouts are correct (inferred).
    """
    r_acc, r_tool = hdpo_rewards(r_ans, r_fmt, calls)
    a_acc = grpo_outcome(r_acc, group_id)
    a_eff = member_z(r_tool, group_id, r_ans > 0.5)
    return a_acc + w_eff * a_eff, a_acc, a_eff


class HDPO(Estimator):
    """Two channels combined linearly in one clipped loss (the summary's "at the loss level")."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id", "num_tool_calls"})

    def __init__(self, w_eff: float = HDPO_W_EFF) -> None:
        self.w_eff = w_eff

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] rewards/calls -> [B, T] advantages; channel values in aux."""
        adv, a_acc, a_eff = hdpo_advantage(
            answer_score(batch), format_ok(batch), tool_call_counts(batch), batch.group_id, self.w_eff
        )
        return AdvOut(broadcast(adv, batch.mask), aux={"a_acc": a_acc.tolist(), "a_eff": a_eff.tolist()})


ESTIMATORS.register("hdpo", HDPO)

register_preset(
    MethodPreset(
        name="hdpo",
        advantage=PluginRef("hdpo", {"w_eff": HDPO_W_EFF}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="Act Wisely: Meta-Cognitive Tool Use in Agentic Multimodal Models (HDPO)",
        arxiv="2604.08545",
        evidence="[SEC] rewards 0.9/0.1 and 1/(T+1), correct-only normalization; [ABS] decoupling; "
        "ASSUMED w=1, A_eff=0 when ≤1 correct, PPO-clip 0.2, token-mean",
        tier="B",
    )
)
