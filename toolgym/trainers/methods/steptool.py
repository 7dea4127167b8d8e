"""StepTool (2410.07745): PPO with a critic on step-grained rewards for tool use.

Evidence [CODE] yuyq18/StepTool `src/steptool/step_ppotrainer.py`, `step_ppo.py`,
`src/reward/annotation_with_gpt.py`, README; paper reward form [PRIOR].
Step labels come from a judge (GPT-4 in the paper) or from rules; both arrive here as
`TurnReward.components` or are derived from `tool_calls` / `correct`.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor

from toolgym.trainers import rewards
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch, ToolCallRecord, TurnReward, turn_index

SUCC, CONTRIB, SOLVED = "succeed_tool_calling", "contribution_to_final_answer", "final_answer_status"


def step_reward(succ: float, contribution: float, alpha: float = 1.0) -> float:
    """r_t = α·SuccCall_t + Contribution_t for an intermediate step [PRIOR]."""
    return alpha * succ + contribution


def rule_success(calls: list[ToolCallRecord], turn: int) -> float:
    """1 if the turn made tool calls and all executed, else 0 (the rule-based label)."""
    mine = [c for c in calls if c.turn == turn]
    return float(bool(mine) and all(c.exec_ok for c in mine))


def sequence_step_rewards(
    n_turns: int,
    labels: dict[int, dict[str, float]],
    calls: list[ToolCallRecord],
    solved: float,
    alpha: float = 1.0,
    weighting: str = "none",
) -> list[float]:
    """Rewards of turns 0..n−1: intermediate steps α·succ + contribution, last step IsSolved.

    weighting="code" multiplies score k by (n − k − 1) as the StepTool code does (unexplained
    there; it zeroes the final step) — off by default.
    """
    out = []
    for k in range(n_turns):
        lab = labels.get(k, {})
        if k == n_turns - 1:
            out.append(float(lab.get(SOLVED, solved)))
            continue
        succ = lab.get(SUCC, rule_success(calls, k))
        out.append(step_reward(succ, lab.get(CONTRIB, 0.0), alpha))
    if weighting == "code":
        out = [r * (n_turns - k - 1) for k, r in enumerate(out)]
    elif weighting != "none":
        raise ValueError("weighting must be 'none' or 'code'")
    return out


def place_on_turn_ends(values: list[list[float]], tid: Tensor) -> Tensor:
    """Put turn k's value on the last token of turn k. tid [B, T] -> [B, T]."""
    out = torch.zeros(tid.shape, dtype=torch.float32, device=tid.device)
    pos = torch.arange(tid.shape[1], device=tid.device)
    for i, row in enumerate(values):
        for k, v in enumerate(row):
            hits = pos[tid[i] == k]
            if hits.numel():
                out[i, hits.max()] = v
    return out


class StepRewards:
    """token_rewards <- step rewards at each step's last token; turn_rewards filled too."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward"})

    def __init__(self, alpha: float = 1.0, weighting: str = "none") -> None:
        self.alpha, self.weighting = alpha, weighting

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """[B] labels -> [B, T] dense rewards."""
        tid = turn_index(batch)
        solved = rewards.correctness(batch).float().tolist()
        calls = batch.tool_calls or [[] for _ in range(batch.batch_size)]
        given = batch.turn_rewards or [[] for _ in range(batch.batch_size)]
        values = []
        for i in range(batch.batch_size):
            n = int(tid[i].max()) + 1
            labels = {tr.turn: tr.components for tr in given[i]}
            values.append(sequence_step_rewards(n, labels, calls[i], solved[i], self.alpha, self.weighting))
        turns = [[TurnReward(k, r) for k, r in enumerate(row)] for row in values]
        return batch.replace(token_rewards=place_on_turn_ends(values, tid), turn_rewards=turns)


rewards.REGISTRY.register("steptool_rewards", StepRewards)

register_preset(
    MethodPreset(
        name="steptool",
        advantage=PluginRef("gae", {"gamma": 0.99, "lam": 0.95, "kl_coef": 0.2}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2, "clip_c": None}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("steptool_rewards", {"alpha": 1.0, "weighting": "none"}),),
        rollout=RolloutSpec("offline", 1),
        hparams={"lr": 1e-5, "lora_alpha": 16, "critic_lr": 1e-5, "value_clip": 0.2},
        paper="StepTool: Enhancing Multi-Step Tool Usage in LLMs via Step-Grained RL",
        arxiv="2410.07745",
        evidence="[CODE] PPO + value head, step score at each step's last token, KL in reward, "
        "γ 0.99, lr 1e-5; [PRIOR] r = α·succ + contribution (α=1 assumed), λ 0.95 and "
        "kl_coef 0.2 (TRL PPO defaults), clip 0.2",
        tier="A",
    )
)
