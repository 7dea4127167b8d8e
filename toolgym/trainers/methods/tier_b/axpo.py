"""AXPO: resample tool calls from the frozen thinking prefix of all-wrong tool-using subgroups (arXiv 2605.28774)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.methods.strategies import STRATEGIES, EpisodePlan, ForkRunner, Trace

AXPO_N_RESAMPLE = 4  # resamples per selected prefix: not retrieved (ASSUMED)
AXPO_N_PREFIXES = 1  # prefixes resampled per all-wrong subgroup: not retrieved (ASSUMED)
TOOL_CALL_TAG = "<tool_call>"


def thinking_prefix(action: str) -> str:
    """The "tool-think" text of an action: everything before its first `<tool_call>` (all of it if none)."""
    cut = action.find(TOOL_CALL_TAG)
    return action if cut < 0 else action[:cut]


def all_wrong_tool_subgroup(group: list[Trace]) -> list[Trace]:
    """The group's tool-using rollouts if there are some and none succeeded, else []."""
    users = [t for t in group if t.num_tool_calls > 0]
    return users if users and not any(t.success for t in users) else []


def turn_uncertainty(trace: Trace, turn: int) -> float:
    """The runner's recorded uncertainty of a turn (`info["uncertainty"]`: the policy's `last_uncertainty`), else 0."""
    return float(trace.turns[turn].info.get("uncertainty", 0.0))


class AXPOResample:
    """Rollout strategy: for each all-wrong tool subgroup, fork the most uncertain prefixes at their
    first tool-call turn and regenerate the call and its continuation `n_resample` times.

    The prefix kept frozen is the question, earlier turns, and the thinking text before the call.
    """

    def __init__(self, n_resample: int = AXPO_N_RESAMPLE, n_prefixes: int = AXPO_N_PREFIXES) -> None:
        self.n_resample, self.n_prefixes = n_resample, n_prefixes

    def plan(self, plans: list[EpisodePlan]) -> list[EpisodePlan]:
        """Unchanged."""
        return plans

    def prefixes(self, subgroup: list[Trace]) -> list[tuple[Trace, int]]:
        """(trace, first tool-call turn) pairs, most uncertain first, at most n_prefixes."""
        cands = [(t, t.tool_call_turns()[0]) for t in subgroup]
        cands.sort(key=lambda tk: -turn_uncertainty(*tk))
        return cands[: self.n_prefixes]

    def expand(self, traces: list[Trace], runner: ForkRunner) -> list[Trace]:
        """traces + the resamples (parent_id/branch_turn set)."""
        out = list(traces)
        for gid in sorted({t.plan.group_id for t in traces}):
            group = [t for t in traces if t.plan.group_id == gid]
            for parent, turn in self.prefixes(all_wrong_tool_subgroup(group)):
                prefix = thinking_prefix(parent.turns[turn].action)
                out += [runner.fork(parent, turn, prefix) for _ in range(self.n_resample)]
        return out


def axpo_advantage(reward: Tensor, group_id: Tensor, sample_id: Tensor, parent_id: Tensor) -> Tensor:
    """Originals: GroupZ over the original rollouts; resamples: z over {parent} ∪ its resamples. [B]."""
    original = parent_id < 0
    adv = torch.zeros_like(reward)
    if bool(original.any()):
        adv[original] = grpo_outcome(reward[original], group_id[original])
    for p in torch.unique(parent_id[~original]).tolist():
        members = (parent_id == p) | (sample_id == p)
        z = grpo_outcome(reward[members], torch.zeros(int(members.sum()), dtype=torch.long))
        adv[members & ~original] = z[(parent_id[members] >= 0)]
    return adv


def after_branch_mask(mask: Tensor, branch_point: Tensor | None) -> Tensor:
    """The loss mask with tokens before each row's branch point removed (shared prefixes train once). [B, T]."""
    if branch_point is None:
        return mask
    pos = torch.arange(mask.shape[1]).unsqueeze(0)  # [1, T]
    start = branch_point.clamp(min=0).unsqueeze(1)  # [B, 1]
    return mask * (pos >= start).to(mask.dtype)


class AXPO(Estimator):
    """Per-subgroup GroupZ: resamples are compared with their parent and siblings only (ASSUMED)."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id", "sample_id", "parent_id"})

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] -> [B, T]."""
        sample = batch.sample_id if batch.sample_id is not None else torch.arange(batch.batch_size)
        parent = batch.parent_id if batch.parent_id is not None else torch.full_like(sample, -1)
        adv = axpo_advantage(batch.reward.float(), batch.group_id, sample, parent)
        return AdvOut(broadcast(adv, after_branch_mask(batch.mask, batch.branch_point)))


STRATEGIES.register("axpo_resample", AXPOResample)
ESTIMATORS.register("axpo", AXPO)

register_preset(
    MethodPreset(
        name="axpo",
        advantage=PluginRef("axpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec(
            "group",
            8,
            {
                "strategy": "axpo_resample",
                "strategy_cfg": {"n_resample": AXPO_N_RESAMPLE, "n_prefixes": AXPO_N_PREFIXES},
            },
        ),
        hparams={"lr": 1e-6},
        paper="Agent Explorative Policy Optimization for Multimodal Agentic Reasoning (AXPO)",
        arxiv="2605.28774",
        evidence="[ABS]+project page: prefix-frozen resampling of all-wrong tool subgroups; ASSUMED 4 resamples of "
        "1 prefix per subgroup, uncertainty = the policy's recorded −mean logprob of the tool-call turn, resamples z-scored with their parent",
        tier="B",
    )
)
