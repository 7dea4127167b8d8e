"""EAPO: tool-free rollouts in each group, difficulty-aware tool penalty, confidence token weights (arXiv 2606.02132).

Only the abstract was readable: every formula below is ASSUMED and named as such.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import Path, RolloutBatch
from toolgym.trainers.methods.strategies import STRATEGIES, EpisodePlan, ForkRunner, Trace
from toolgym.trainers.methods.tier_b._util import answer_score, tool_call_counts
from toolgym.trainers.rewards import REGISTRY as REWARDS

EAPO_N_TOOLS_OFF = 2  # tool-free rollouts per group of 8 (ASSUMED)
EAPO_PENALTY = 0.1  # λ, tool-call penalty per call on a fully easy query (ASSUMED)
EAPO_ALPHA = 1.0  # α, strength of the confidence re-weighting (ASSUMED)


class ToolsOffMix:
    """Rollout strategy: the last `n_off` episodes of each group reset with `{"tools": "none"}`."""

    def __init__(self, n_off: int = EAPO_N_TOOLS_OFF) -> None:
        if n_off < 0:
            raise ValueError("n_off must be >= 0")
        self.n_off = n_off

    def plan(self, plans: list[EpisodePlan]) -> list[EpisodePlan]:
        """Switch tools off for the last n_off plans of every group."""
        out, seen = [], {}
        per_group = {g: sum(p.group_id == g for p in plans) for g in {p.group_id for p in plans}}
        for p in plans:
            seen[p.group_id] = seen.get(p.group_id, 0) + 1
            off = seen[p.group_id] > per_group[p.group_id] - self.n_off
            out.append(
                EpisodePlan(p.seed, p.group_id, {**p.options, "tools": "none"}, p.prompt_prefix, "tools_off")
                if off
                else p
            )
        return out

    def expand(self, traces: list[Trace], runner: ForkRunner) -> list[Trace]:
        """Nothing added."""
        return traces


def group_ease(correct: Tensor, tools_off: Tensor, group_id: Tensor) -> Tensor:
    """How easy each row's query is: tool-free accuracy in its group, else the group accuracy. [B] -> [B]."""
    ease = torch.zeros(correct.shape[0])
    for g in torch.unique(group_id):
        rows = group_id == g
        off = rows & tools_off
        pool = off if bool(off.any()) else rows
        ease[rows] = correct[pool].float().mean()
    return ease


def difficulty_penalty(correct: Tensor, calls: Tensor, tools_off: Tensor, group_id: Tensor, lam: float) -> Tensor:
    """−λ·ease·m for tools-on rows: calls cost most where the model solves the query without tools. [B]."""
    ease = group_ease(correct, tools_off, group_id)
    return torch.where(tools_off, torch.zeros_like(calls), -lam * ease * calls)


class DifficultyAwarePenalty:
    """reward += −λ·ease·m (component `eapo_tool_penalty`)."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id", "num_tool_calls", "path"})

    def __init__(self, lam: float = EAPO_PENALTY) -> None:
        self.lam = lam

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] -> reward + penalty [B]."""
        off = _tools_off(batch)
        pen = difficulty_penalty(answer_score(batch) > 0.5, tool_call_counts(batch), off, batch.group_id, self.lam)
        comps = {**batch.reward_components, "eapo_tool_penalty": pen}
        return batch.replace(reward=batch.reward.float() + pen, reward_components=comps)


def _tools_off(batch: RolloutBatch) -> Tensor:
    if batch.path is None:
        return torch.zeros(batch.batch_size, dtype=torch.bool)
    return batch.path.long() == int(Path.TOOLS_OFF)


def confidence_weights(old_logp: Tensor, mask: Tensor, alpha: float = EAPO_ALPHA) -> Tensor:
    """w_t ∝ 1 + α·(1 − π_old(o_t)), rescaled to mean 1 over model tokens: less weight on confident tokens. [B, T]."""
    w = (1.0 + alpha * (1.0 - torch.exp(old_logp))) * mask
    return w * mask.sum() / w.sum().clamp(min=1e-12)


class EAPO(Estimator):
    """GroupZ over all rollouts (tools on and off) with confidence-aware token weights."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id"})

    def __init__(self, alpha: float = EAPO_ALPHA) -> None:
        self.alpha = alpha

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] -> [B, T] advantages and token weights."""
        adv = broadcast(grpo_outcome(batch.reward.float(), batch.group_id), batch.mask)
        old = batch.old_logprobs if batch.old_logprobs is not None else batch.rollout_logprobs
        weights = None if old is None else confidence_weights(old, batch.mask, self.alpha)
        return AdvOut(adv, token_weights=weights)


STRATEGIES.register("tools_off_mix", ToolsOffMix)
REWARDS.register("eapo_tool_penalty", DifficultyAwarePenalty)
ESTIMATORS.register("eapo", EAPO)

register_preset(
    MethodPreset(
        name="eapo",
        advantage=PluginRef("eapo", {"alpha": EAPO_ALPHA}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("eapo_tool_penalty", {"lam": EAPO_PENALTY}),),
        rollout=RolloutSpec("group", 8, {"strategy": "tools_off_mix", "strategy_cfg": {"n_off": EAPO_N_TOOLS_OFF}}),
        hparams={"lr": 1e-6},
        paper="Learning When Not to Act: Mitigating Tool Abuse in Agentic RL (EAPO)",
        arxiv="2606.02132",
        evidence="[ABS] three components; ASSUMED 2 of 8 rollouts tool-free, penalty −0.1·ease·calls "
        "(ease = tool-free accuracy), weights 1+(1−p) normalized to mean 1",
        tier="B",
    )
)
