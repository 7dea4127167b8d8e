"""GTPO: turn-level rewards, normalized discounted turn returns as advantages, code-similarity shaping (arXiv 2511.14846)."""

from __future__ import annotations

import difflib
from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import GROUP_STD_EPS, AdvOut, Estimator, group_stats
from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch, turn_index
from toolgym.trainers.methods.tier_b._util import answer_score, turn_values_to_tokens, turns_per_sequence
from toolgym.trainers.rewards import REGISTRY as REWARDS

GTPO_GAMMA = 0.9  # γ: not retrieved; MatchTIR's value (ASSUMED)
GTPO_SHAPING_SCALE = 0.5  # bound of the shaping reward, below the success reward 1 (ASSUMED)


def turn_reward_matrix(batch: RolloutBatch, turn_ids: Tensor) -> Tensor:
    """r[i, k]: `turn_rewards` entries plus the outcome reward on the last turn. -> [B, K]."""
    k_max = int(turns_per_sequence(turn_ids).max()) if batch.batch_size else 0
    r = torch.zeros(batch.batch_size, max(k_max, 1))
    for i, turns in enumerate(batch.turn_rewards or []):
        for tr in turns:
            if 0 <= tr.turn < r.shape[1]:
                r[i, tr.turn] += tr.reward
    last = (turns_per_sequence(turn_ids) - 1).clamp(min=0)
    r[torch.arange(batch.batch_size), last] += batch.reward.float()
    return r


def turn_returns(r: Tensor, n_turns: Tensor, gamma: float = GTPO_GAMMA) -> Tensor:
    """G[i, k] = Σ_{j ≥ k} γ^{j−k} r[i, j] over the row's turns (0 beyond them). [B, K] -> [B, K]."""
    out = torch.zeros_like(r)
    running = torch.zeros(r.shape[0])
    for k in reversed(range(r.shape[1])):
        valid = k < n_turns
        running = torch.where(valid, r[:, k] + gamma * running, torch.zeros_like(running))
        out[:, k] = running
    return out


def same_turn_z(returns: Tensor, n_turns: Tensor, group_id: Tensor, eps: float = GROUP_STD_EPS) -> Tensor:
    """z-score of G[:, k] over the rollouts of the group that have a turn k (ASSUMED set). [B, K]."""
    out = torch.zeros_like(returns)
    for k in range(returns.shape[1]):
        member = (k < n_turns).to(returns.dtype)
        mean, std, count = group_stats(returns[:, k], group_id, weights=member)
        z = (returns[:, k] - mean) / (std + eps)
        out[:, k] = torch.where((member > 0) & (count > 1), z, torch.zeros_like(z))
    return out


class GTPO(Estimator):
    """Turn-return advantages: every token of turn k gets the normalized return of turn k."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id", "turn_idx"})

    def __init__(self, gamma: float = GTPO_GAMMA) -> None:
        self.gamma = gamma

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] outcome + turn rewards -> [B, T]."""
        tids = turn_index(batch)
        n_turns = turns_per_sequence(tids)
        returns = turn_returns(turn_reward_matrix(batch, tids), n_turns, self.gamma)
        adv_turn = same_turn_z(returns, n_turns, batch.group_id)
        return AdvOut(turn_values_to_tokens(adv_turn, tids) * batch.mask)


def tool_code(batch: RolloutBatch, i: int) -> str:
    """The code a rollout sent to tools: its calls' arguments, concatenated."""
    calls = batch.tool_calls[i] if batch.tool_calls else []
    return "\n".join(str(sorted(c.arguments.items())) for c in calls)


class CodeSimilarityShaping:
    """Failed rollouts earn σ·max similarity of their tool code to a successful sibling's (< success).

    The abstract's "self-supervised shaping from generated code"; the formula is a hypothesis (ASSUMED):
    difflib ratio of the concatenated call arguments, σ = 0.5.
    """

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id", "tool_calls"})

    def __init__(self, scale: float = GTPO_SHAPING_SCALE) -> None:
        self.scale = scale

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] += shaping [B] on failed rows."""
        ok = answer_score(batch) > 0.5
        bonus = torch.zeros(batch.batch_size)
        codes = [tool_code(batch, i) for i in range(batch.batch_size)]
        for i in torch.nonzero(~ok).flatten().tolist():
            peers = [j for j in range(batch.batch_size) if ok[j] and batch.group_id[j] == batch.group_id[i]]
            sims = [difflib.SequenceMatcher(None, codes[i], codes[j]).ratio() for j in peers if codes[i]]
            bonus[i] = self.scale * max(sims, default=0.0)
        comps = {**batch.reward_components, "gtpo_shaping": bonus}
        return batch.replace(reward=batch.reward.float() + bonus, reward_components=comps)


ESTIMATORS.register("gtpo", GTPO)
REWARDS.register("gtpo_code_shaping", CodeSimilarityShaping)

register_preset(
    MethodPreset(
        name="gtpo",
        advantage=PluginRef("gtpo", {"gamma": GTPO_GAMMA}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("gtpo_code_shaping", {"scale": GTPO_SHAPING_SCALE}),),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="Empowering Multi-Turn Tool-Integrated Reasoning with Group Turn Policy Optimization (GTPO)",
        arxiv="2511.14846",
        evidence="[ABS]+[SEC] turn rewards, normalized discounted returns, code-based shaping; ASSUMED γ=0.9, "
        "normalization over the group at the same turn index, difflib shaping σ=0.5",
        tier="B",
    )
)
