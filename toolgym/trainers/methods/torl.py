"""ToRL (2503.23383): GRPO from a base model with a code interpreter and a ±1 reward.

Evidence [CODE] GAIR-NLP/ToRL `scripts/torl_1.5b.sh`, `verl/utils/reward_score/math_verifier.py`,
`verl/workers/reward_manager/naive.py`; the tool-call budget C is [PRIOR].
"""

from __future__ import annotations

from typing import ClassVar

import torch

from toolgym.trainers import rewards
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch

EXEC_ERROR_PENALTY = -0.5  # optional; the paper reports it did not help [CODE + PRIOR]


def execution_failed(batch: RolloutBatch) -> torch.Tensor:
    """True for rows with a failed tool call (`tool_calls[i][j].exec_ok` False). -> [B] bool."""
    calls = batch.tool_calls or [[] for _ in range(batch.batch_size)]
    failed = [any(not c.exec_ok for c in row) for row in calls]
    return torch.tensor(failed, dtype=torch.bool, device=batch.reward.device)


class TorlReward:
    """+1 correct, −1 incorrect or no answer; optionally + exec_error_penalty when code failed.

    How the penalty combines with ±1 is not in the retrieved code: it is added [PRIOR].
    """

    requires: ClassVar[frozenset[str]] = frozenset({"reward"})

    def __init__(self, exec_error_penalty: float | None = None, threshold: float = 0.5) -> None:
        self.penalty, self.threshold = exec_error_penalty, threshold

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] <- ±1 (+ penalty)."""
        reward = torch.where(rewards.correctness(batch, self.threshold), 1.0, -1.0).to(torch.float32)
        if self.penalty is not None:
            reward = reward + self.penalty * execution_failed(batch).float()
        comps = {**batch.reward_components, "torl": reward}
        return batch.replace(reward=reward, correct=rewards.correctness(batch, self.threshold), reward_components=comps)


rewards.REGISTRY.register("torl_reward", TorlReward)

register_preset(
    MethodPreset(
        name="torl",
        advantage=PluginRef("grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("torl_reward", {"exec_error_penalty": None}),),
        rollout=RolloutSpec("group", 16, {"max_tool_calls": 1}),
        hparams={"lr": 1e-6, "temperature": 1.0, "max_response_length": 3072, "prompt_batch": 128, "mini_batch": 1024},
        paper="ToRL: Scaling Tool-Integrated RL",
        arxiv="2503.23383",
        evidence="[CODE] reward ±1, exec penalty −0.5 (off), n 16, lr 1e-6, temp 1.0, KL 0, "
        "entropy 0; [PRIOR] tool budget C (max_tool_calls=1 assumed), verl clip 0.2",
        tier="A",
    )
)
