"""ELPO (experimental): binary-search the first irrecoverable step by forking, hierarchical advantages, wider clip there.

arXiv 2602.09598; only the abstract was readable, so every formula and constant is ASSUMED.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RegularizerRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch, turn_index
from toolgym.trainers.losses import ppo_clip
from toolgym.trainers.methods.strategies import STRATEGIES, EpisodePlan, ForkRunner, Trace
from toolgym.trainers.regularizers import REGISTRY as REGULARIZERS
from toolgym.trainers.regularizers import Regularizer

ELPO_PROBES = 2  # continuations per probed prefix (ASSUMED)
ELPO_BUDGET = 8  # N_total re-rollouts per failed trajectory (ASSUMED)
ELPO_WIDEN = 1.0  # η: the clip range on the critical suffix is (1+η)× wider (ASSUMED)
CRITICAL_KEY = "elpo_critical_turn"


class BinarySearchTree:
    """Rollout strategy: for each failed trace, find the first irrecoverable turn by binary search.

    Keeping the first j turns and regenerating the rest is "recoverable" if any of `n_probe`
    forks at turn j succeeds; assuming monotonicity, the smallest irrecoverable j (≥ 1) makes
    turn j − 1 the critical step. Every probe rollout is kept (siblings for the branch advantage).
    The critical turn is written to `trace.meta["critical_turn"]` (−1: none found).
    """

    def __init__(self, n_probe: int = ELPO_PROBES, budget: int = ELPO_BUDGET) -> None:
        self.n_probe, self.budget = n_probe, budget

    def plan(self, plans: list[EpisodePlan]) -> list[EpisodePlan]:
        """Unchanged."""
        return plans

    def expand(self, traces: list[Trace], runner: ForkRunner) -> list[Trace]:
        """traces + every probe rollout."""
        out = list(traces)
        for trace in traces:
            if not trace.success and len(trace.turns) > 1:
                out += self.search(trace, runner)
        return out

    def search(self, trace: Trace, runner: ForkRunner) -> list[Trace]:
        """Binary search over j ∈ [1, K−1] (turns kept); returns the probes, labels trace.meta."""
        lo, hi, probes, spent = 1, len(trace.turns) - 1, [], 0
        critical = len(trace.turns) - 1  # if every probed prefix recovers, blame the last turn
        while lo <= hi and spent + self.n_probe <= self.budget:
            mid = (lo + hi) // 2
            kids = [runner.fork(trace, mid) for _ in range(self.n_probe)]
            probes += kids
            spent += self.n_probe
            if any(k.success for k in kids):
                lo = mid + 1
            else:
                critical, hi = mid - 1, mid - 1
        trace.meta["critical_turn"] = critical
        return probes


def hierarchical_advantage(
    reward: Tensor, group_id: Tensor, sample_id: Tensor, parent_id: Tensor, branch: Tensor
) -> Tensor:
    """A = A_global + A_branch: GroupZ over the group, plus z among siblings of one fork point. [B]."""
    a_global = grpo_outcome(reward, group_id)
    a_branch = torch.zeros_like(reward)
    for p, b in {(int(p), int(k)) for p, k in zip(parent_id.tolist(), branch.tolist(), strict=True) if p >= 0}:
        members = ((parent_id == p) & (branch == b)) | (sample_id == p)
        a_branch[members & (parent_id >= 0)] = grpo_outcome(
            reward[members], torch.zeros(int(members.sum()), dtype=torch.long)
        )[parent_id[members] >= 0]
    return a_global + a_branch


def critical_mask(batch: RolloutBatch) -> Tensor:
    """1 on the tokens of each row's turns ≥ its critical turn (component `elpo_critical_turn`, −1: none). [B, T]."""
    crit = batch.reward_components.get(CRITICAL_KEY)
    if crit is None:
        return torch.zeros_like(batch.mask)
    tids = turn_index(batch)
    c = crit.long().unsqueeze(1)
    return ((tids >= c) & (c >= 0) & (tids >= 0)).to(batch.mask.dtype) * batch.mask


class ELPO(Estimator):
    """Hierarchical advantages; `aux["critical_mask"]` feeds the error-localized clip regularizer."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id"})

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] -> [B, T]."""
        b = batch.batch_size
        sample = batch.sample_id if batch.sample_id is not None else torch.arange(b)
        parent = batch.parent_id if batch.parent_id is not None else torch.full((b,), -1)
        branch = batch.branch_point if batch.branch_point is not None else torch.full((b,), -1)
        adv = hierarchical_advantage(batch.reward.float(), batch.group_id, sample, parent, branch)
        return AdvOut(broadcast(adv, batch.mask), aux={"critical_mask": critical_mask(batch)})


def critical_clip_delta(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    critical_mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    widen: float = ELPO_WIDEN,
    **_: object,
) -> Tensor:
    """Wide-clip minus normal-clip PPO loss on critical tokens: added with coef 1 under the same token-mean,
    the total equals PPO-clip with a (1+η)× wider range on the critical suffix. [B, T]."""
    wide = ppo_clip(logp, old_logp, advantages, mask, clip_low * (1 + widen), clip_high * (1 + widen), None)
    base = ppo_clip(logp, old_logp, advantages, mask, clip_low, clip_high, None)
    return (wide - base) * critical_mask


ESTIMATORS.register("elpo", ELPO)
STRATEGIES.register("elpo_binary_search", BinarySearchTree)
REGULARIZERS.register(
    "elpo_critical_clip",
    Regularizer(
        critical_clip_delta,
        ("logp", "old_logp", "advantages", "mask", "critical_mask"),
        description="wider PPO clip on the critical step and its suffix",
    ),
)

register_preset(
    MethodPreset(
        name="elpo",
        advantage=PluginRef("elpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2, "clip_c": None}),
        aggregator=PluginRef("token-mean"),
        regularizers=(
            RegularizerRef("elpo_critical_clip", 1.0, {"clip_low": 0.2, "clip_high": 0.2, "widen": ELPO_WIDEN}),
        ),
        rollout=RolloutSpec(
            "group",
            8,
            {"strategy": "elpo_binary_search", "strategy_cfg": {"n_probe": ELPO_PROBES, "budget": ELPO_BUDGET}},
        ),
        hparams={"lr": 1e-6},
        paper="Learning from the Irrecoverable: ELPO for Tool-Integrated LLM Reasoning",
        arxiv="2602.09598",
        evidence="[ABS]+[SEC] binary-search tree, hierarchical advantages, error-localized clip; ASSUMED all "
        "formulas: 2 probes/prefix, budget 8, A = A_global + A_branch, clip 2× wider on the critical suffix",
        tier="C",
        experimental=True,
    )
)
