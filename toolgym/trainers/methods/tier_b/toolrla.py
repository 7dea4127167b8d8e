"""ToolRLA: multiplicative reward over format, tool selection and parameters, with a compliance penalty (arXiv 2603.01620)."""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch, ToolCallRecord
from toolgym.trainers.methods.tier_b._util import answer_score, format_ok
from toolgym.trainers.rewards import REGISTRY as REWARDS

TOOLRLA_W_ANS = 1.0  # weight of the final-answer score in toolgym's answer tasks (ASSUMED)
TOOLRLA_W_EFF = 0.1  # weight of invocation efficiency (ASSUMED)
TOOLRLA_LAMBDA_C = 1.0  # compliance penalty, large enough to dominate (ASSUMED)
VIOLATION_PREFIXES = ("violation", "minefield", "compliance")


def selection_score(calls: list[ToolCallRecord], gold: list[dict[str, Any]]) -> float:
    """R_sel: share of gold tool names the agent called (multiset overlap / |gold|); 1 if no gold call."""
    if not gold:
        return 1.0
    want, got = Counter(g["name"] for g in gold), Counter(c.name for c in calls)
    return sum((want & got).values()) / sum(want.values())


def parameter_score(calls: list[ToolCallRecord], gold: list[dict[str, Any]]) -> float:
    """R_param: per gold call, the best share of its arguments a same-name call matched; mean over gold."""
    if not gold:
        return 1.0
    scores = []
    for g in gold:
        args = g.get("arguments", {})
        same = [c for c in calls if c.name == g["name"]]
        match = [sum(c.arguments.get(k) == v for k, v in args.items()) / max(len(args), 1) for c in same]
        scores.append(max(match, default=0.0))
    return sum(scores) / len(scores)


def efficiency_score(n_calls: int, n_gold: int) -> float:
    """R_eff = min(1, n_gold/m) for m > 0 calls; 1 when no call was needed or made, else 0."""
    if n_calls == 0:
        return 1.0 if n_gold == 0 else 0.0
    return min(1.0, max(n_gold, 1) / n_calls)


def violations(batch: RolloutBatch) -> Tensor:
    """1 where a compliance-type reward component (`violation*`, `minefield*`, `compliance*`) is negative. [B]."""
    out = torch.zeros(batch.batch_size)
    for name, value in batch.reward_components.items():
        if name.startswith(VIOLATION_PREFIXES):
            out = torch.maximum(out, (value.to(torch.float32) < 0).to(torch.float32))
    return out


def toolrla_reward(
    r_fmt: Tensor,
    r_sel: Tensor,
    r_param: Tensor,
    r_ans: Tensor,
    r_eff: Tensor,
    viol: Tensor,
    w_ans: float = TOOLRLA_W_ANS,
    w_eff: float = TOOLRLA_W_EFF,
    lam_c: float = TOOLRLA_LAMBDA_C,
) -> Tensor:
    """R = R_fmt·(R_sel·R_param) + w_ans·R_fmt·R_ans + w_eff·R_eff − λ_c·1[violation]. [B] -> [B].

    Parameter credit counts only when the tool choice is right (multiplicative), and nothing counts
    without valid format.
    """
    return r_fmt * (r_sel * r_param) + w_ans * r_fmt * r_ans + w_eff * r_eff - lam_c * viol


class ToolRLAReward:
    """Replaces `reward` with the ToolRLA decomposition (components recorded); gold calls from `batch.gold`."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "tool_calls"})

    def __init__(self, w_ans: float = TOOLRLA_W_ANS, w_eff: float = TOOLRLA_W_EFF, lam_c: float = TOOLRLA_LAMBDA_C):
        self.w_ans, self.w_eff, self.lam_c = w_ans, w_eff, lam_c

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] -> ToolRLA reward [B]."""
        sel, par, eff = (torch.zeros(batch.batch_size) for _ in range(3))
        for i in range(batch.batch_size):
            calls = batch.tool_calls[i] if batch.tool_calls else []
            gold = _gold_calls(batch, i)
            sel[i], par[i] = selection_score(calls, gold), parameter_score(calls, gold)
            eff[i] = efficiency_score(len(calls), len(gold))
        fmt, ans, viol = format_ok(batch), answer_score(batch), violations(batch)
        reward = toolrla_reward(fmt, sel, par, ans, eff, viol, self.w_ans, self.w_eff, self.lam_c)
        comps = {
            **batch.reward_components,
            "rla_format": fmt,
            "rla_selection": sel,
            "rla_params": par,
            "rla_efficiency": eff,
            "rla_violation": viol,
            "success": ans,
        }
        return batch.replace(reward=reward, reward_components=comps)


def _gold_calls(batch: RolloutBatch, i: int) -> list[dict[str, Any]]:
    gold = batch.gold[i] if batch.gold else None
    return list(gold.get("calls", [])) if isinstance(gold, dict) else []


REWARDS.register("toolrla", ToolRLAReward)

register_preset(
    MethodPreset(
        name="toolrla",
        advantage=PluginRef("grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("toolrla"),),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="ToolRLA: multiplicative reward decomposition for tool agents",
        arxiv="2603.01620",
        evidence="[ABS] four dimensions, multiplicative correctness, dominant compliance penalty; ASSUMED "
        "w_ans=1 (toolgym answer tasks), w_eff=0.1, λ_c=1, selection/param/efficiency definitions; "
        "GRPO stage only (the SFT and DPO stages are not part of this preset)",
        tier="B",
    )
)
