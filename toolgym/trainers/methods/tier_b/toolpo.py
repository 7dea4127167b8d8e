"""ToolPO (DeepAgent): outcome advantage on every token plus tool-call advantage on tool-call tokens (arXiv 2510.21618)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch, ToolCallRecord
from toolgym.trainers.methods.tier_b._util import answer_score, tool_span_mask

TOOLPO_LAMBDA1 = 1.0  # λ1, weight of Σ_t c_t: not retrieved (ASSUMED)
TOOLPO_LAMBDA2 = 0.0  # λ2, weight of R_fold: toolgym envs have no memory folding (ASSUMED 0)


def _canonical(name: str, arguments: Any) -> str:
    return json.dumps({"name": name, "arguments": arguments}, sort_keys=True)


def call_correct(call: ToolCallRecord, gold_calls: list[dict[str, Any]] | None) -> float:
    """c_t: the record's label if set; else exact match with a gold call; else whether it executed."""
    if call.correct is not None:
        return float(call.correct)
    if gold_calls:
        wanted = {_canonical(g["name"], g.get("arguments", {})) for g in gold_calls}
        return float(_canonical(call.name, call.arguments) in wanted)
    return float(call.exec_ok)


def action_rewards(batch: RolloutBatch, lam1: float = TOOLPO_LAMBDA1, lam2: float = TOOLPO_LAMBDA2) -> Tensor:
    """R_action = λ1·Σ_t c_t + λ2·R_fold per sequence (R_fold from reward_components["fold"]). -> [B]."""
    out = torch.zeros(batch.batch_size)
    for i, calls in enumerate(batch.tool_calls or []):
        gold = batch.gold[i].get("calls") if batch.gold and isinstance(batch.gold[i], dict) else None
        out[i] = sum(call_correct(c, gold) for c in calls)
    fold = batch.reward_components.get("fold", torch.zeros(batch.batch_size)).to(torch.float32)
    return lam1 * out + lam2 * fold


class ToolPO(Estimator):
    """A_t = A_succ + M_t·A_action; M_t = 1 on tool-call tokens; both channels group z-scored."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id", "tool_calls", "span_type"})

    def __init__(self, lam1: float = TOOLPO_LAMBDA1, lam2: float = TOOLPO_LAMBDA2) -> None:
        self.lam1, self.lam2 = lam1, lam2

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] rewards -> [B, T] advantages."""
        a_succ = grpo_outcome(answer_score(batch), batch.group_id)
        a_action = grpo_outcome(action_rewards(batch, self.lam1, self.lam2), batch.group_id)
        spans = tool_span_mask(batch)  # [B, T]
        adv = broadcast(a_succ, batch.mask) + spans * a_action.unsqueeze(1)
        return AdvOut(adv, aux={"tool_span_mask": spans})


ESTIMATORS.register("toolpo", ToolPO)

register_preset(
    MethodPreset(
        name="toolpo",
        advantage=PluginRef("toolpo", {"lam1": TOOLPO_LAMBDA1, "lam2": TOOLPO_LAMBDA2}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec("group", 8, {"env_id": "toolgym/SimulatedAPI-v0"}),
        hparams={"lr": 1e-6},
        paper="DeepAgent: A General Reasoning Agent with Scalable Toolsets (ToolPO)",
        arxiv="2510.21618",
        evidence="[SEC] A_succ + M·A_action on tool-call spans; ASSUMED λ1=1, λ2=0 (no folding), "
        "c_t = gold match else exec_ok, z-score per channel, PPO-clip 0.2",
        notes="train against LLM-simulated APIs, as the paper does: toolgym/SimulatedAPI-v0 answers calls "
        "with the simulated-API pipeline (schema-driven offline backend, or an LLM endpoint)",
        tier="B",
    )
)
