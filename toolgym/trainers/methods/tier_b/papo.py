"""PAPO: outcome advantage over all rollouts plus process (rubric) advantage over correct ones (arXiv 2603.26535)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.methods.tier_b._util import answer_score, format_ok, member_z, tool_call_counts
from toolgym.trainers.rewards import REGISTRY as REWARDS

PAPO_LAMBDA = 1.0  # weight of A_proc: not retrieved (ASSUMED 1.0)
PROCESS_KEY = "process"


def papo_advantage(r_out: Tensor, r_proc: Tensor, group_id: Tensor, lam: float = PAPO_LAMBDA) -> Tensor:
    """A = A_out + λ·A_proc: A_out z-scored over all G, A_proc over correct responses only (0 else). [B]."""
    a_out = grpo_outcome(r_out, group_id)
    a_proc = member_z(r_proc, group_id, r_out > 0.5)
    return a_out + lam * a_proc


def rule_rubric(batch: RolloutBatch) -> Tensor:
    """A rule-based process rubric in [0, 1] for tool episodes: the mean of three checks. -> [B].

    Checks: the calls were well formed; every call executed; at least one tool call preceded the
    answer when tools were available. It stands in for the paper's LLM rubric judge offline.
    """
    fmt = format_ok(batch)
    calls = tool_call_counts(batch)
    exec_ok = torch.ones(batch.batch_size)
    for i, rec in enumerate(batch.tool_calls or []):
        if rec:
            exec_ok[i] = sum(1.0 for c in rec if c.exec_ok) / len(rec)
    used = (calls > 0).to(torch.float32)
    return (fmt + exec_ok + used) / 3.0


class RubricScore:
    """Writes `reward_components["process"]` from the rule rubric unless the env/judge already set it."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward"})

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward_components[process] = rubric [B]."""
        if PROCESS_KEY in batch.reward_components:
            return batch
        return batch.replace(reward_components={**batch.reward_components, PROCESS_KEY: rule_rubric(batch)})


class PAPO(Estimator):
    """Decoupled normalization: the binary ORM cannot swamp the PRM, and wrong answers get no PRM credit."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id"})

    def __init__(self, lam: float = PAPO_LAMBDA, process_key: str = PROCESS_KEY) -> None:
        self.lam, self.process_key = lam, process_key

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] -> [B, T]."""
        proc = batch.reward_components.get(self.process_key)
        if proc is None:
            raise ValueError(f"PAPO needs reward_components[{self.process_key!r}] (add the 'rubric' transform)")
        adv = papo_advantage(answer_score(batch), proc.to(torch.float32), batch.group_id, self.lam)
        return AdvOut(broadcast(adv, batch.mask))


REWARDS.register("rubric", RubricScore)
ESTIMATORS.register("papo", PAPO)

register_preset(
    MethodPreset(
        name="papo",
        advantage=PluginRef("papo", {"lam": PAPO_LAMBDA}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("rubric"),),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="Stabilizing Rubric Integration Training via Decoupled Advantage Normalization (PAPO)",
        arxiv="2603.26535",
        evidence="[ABS] normalization sets (all vs correct-only); ASSUMED λ=1, A_proc=0 for wrong answers, "
        "rule rubric instead of the LLM judge, PPO-clip 0.2, token-mean",
        tier="B",
    )
)
