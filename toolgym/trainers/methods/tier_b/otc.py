"""OTC-PO (OTC-GRPO and OTC-PPO): a tool-call-count reward multiplied into correctness (arXiv 2504.14870)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.methods.tier_b._util import answer_score, tool_call_counts
from toolgym.trainers.rewards import REGISTRY as REWARDS

OTC_ALPHA = 1.0  # α, scale of the final reward [CODE-3P]; paper value unverified (ASSUMED)
OTC_C = 1.0  # c, smoothing of the n=0 branch [CODE-3P]; paper value unverified (ASSUMED)


def otc_mapping(m: Tensor, n: Tensor) -> Tensor:
    """f(m, n) = 0 if m=n=0; m if n=0; 2nm/(m+n) otherwise. [B], [B] -> [B]."""
    harmonic = 2 * n * m / (m + n).clamp(min=1e-12)
    return torch.where(n == 0, m, harmonic)


def otc_tool_reward(m: Tensor, n: Tensor, c: float = OTC_C) -> Tensor:
    """r_tool: 1 if m=n=0; cos(mπ/(2m+c)) if n=0; sin(f(m,n)π/(2n)) otherwise. [B] -> [B].

    Peaks at m = n (the optimal number of calls) and falls towards 0 as m → 0 or m → ∞.
    """
    f = otc_mapping(m, n)
    no_n = torch.cos(m * math.pi / (2 * m + c))
    with_n = torch.sin(f * math.pi / (2 * n.clamp(min=1e-12)))
    return torch.where(n == 0, no_n, with_n)


def group_min_calls(m: Tensor, correct: Tensor, group_id: Tensor) -> Tensor:
    """n per row: the fewest calls among the correct rollouts of its group; 0 if none is correct. [B]."""
    n = torch.zeros_like(m)
    for g in torch.unique(group_id):
        rows = group_id == g
        ok = rows & correct
        if bool(ok.any()):
            n[rows] = m[ok].min()
    return n


class OTCReward:
    """r = α · r_tool(m, n) · r_φ, with r_φ the correctness (wrong answers get 0).

    mode "grpo": n = the group's fewest calls among correct rollouts (OTC-GRPO), optionally the
    running minimum over earlier steps of the same prompt (`track_history`, the paper's running
    estimate [PRIOR]); mode "ppo": n unknown, the cos branch (OTC-PPO).
    """

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "num_tool_calls"})

    def __init__(
        self, mode: str = "grpo", alpha: float = OTC_ALPHA, c: float = OTC_C, track_history: bool = False
    ) -> None:
        if mode not in ("grpo", "ppo"):
            raise ValueError(f"OTC mode must be 'grpo' or 'ppo', got {mode!r}")
        self.mode, self.alpha, self.c, self.track_history = mode, alpha, c, track_history
        self.best: dict[int, float] = {}  # prompt_key -> fewest calls seen in a correct rollout

    def optimal_calls(self, batch: RolloutBatch, m: Tensor, correct: Tensor) -> Tensor:
        """n per row. [B]."""
        if self.mode == "ppo":
            return torch.zeros_like(m)
        n = group_min_calls(m, correct, batch.group_id)
        if self.track_history and batch.prompt_key is not None:
            n = self._with_history(batch.prompt_key.tolist(), n, correct, m)
        return n

    def _with_history(self, keys: list[int], n: Tensor, correct: Tensor, m: Tensor) -> Tensor:
        out = n.clone()
        for i, key in enumerate(keys):
            if bool(correct[i]):
                self.best[key] = min(self.best.get(key, math.inf), float(m[i]))
            if key in self.best:
                out[i] = self.best[key] if n[i] == 0 else min(float(n[i]), self.best[key])
        return out

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] -> α·r_tool·correct [B]; components `otc_tool` and `correct` are recorded."""
        m = tool_call_counts(batch)
        correct_f = answer_score(batch)
        n = self.optimal_calls(batch, m, correct_f > 0.5)
        r_tool = otc_tool_reward(m, n, self.c)
        comps = {**batch.reward_components, "otc_tool": r_tool, "correct": correct_f}
        return batch.replace(reward=self.alpha * r_tool * correct_f, reward_components=comps)


REWARDS.register("otc", OTCReward)

_OTC_COMMON: dict[str, Any] = {
    "paper": "OTC: Optimal Tool Calls via Reinforcement Learning",
    "arxiv": "2504.14870",
    "tier": "B",
}

register_preset(
    MethodPreset(
        name="otc_grpo",
        advantage=PluginRef("grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("otc", {"mode": "grpo", "alpha": OTC_ALPHA, "c": OTC_C}),),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        evidence="[CODE-3P] r_tool and n=min calls among correct; [SEC] OTC-PPO form; "
        "ASSUMED α=1, c=1 (3P defaults), PPO-clip 0.2, token-mean",
        notes="reward only; n from the group (set track_history for the running estimate)",
        **_OTC_COMMON,
    )
)

register_preset(
    MethodPreset(
        name="otc_ppo",
        advantage=PluginRef("gae", {"gamma": 1.0, "lam": 1.0}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("otc", {"mode": "ppo", "alpha": OTC_ALPHA, "c": OTC_C}),),
        rollout=RolloutSpec("group", 1),
        hparams={"lr": 1e-6, "critic_lr": 1e-5},
        evidence="[SEC] cos(mπ/(2m+c)) with n unknown; ASSUMED α=1, c=1, GAE γ=λ=1 (needs a critic)",
        notes="PPO with a value head: the learner must fill batch.values",
        **_OTC_COMMON,
    )
)
