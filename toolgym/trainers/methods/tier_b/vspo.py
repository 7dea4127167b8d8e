"""VSPO with progressive reward shaping: staged rewards, value-based group replacement, smooth clipping (arXiv 2512.07478).

Only the abstract was readable: stage boundaries, the task-value metric and the smoothing are ASSUMED.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.losses import REGISTRY as LOSSES
from toolgym.trainers.losses import token_log_ratio
from toolgym.trainers.methods.tier_b._util import answer_score, format_ok, tool_call_counts
from toolgym.trainers.rewards import REGISTRY as REWARDS
from toolgym.trainers.samplers import GROUP_FILTERS, PROMPT_SAMPLERS, group_metric, varied_groups

PRS_STAGES = (20, 60)  # steps ending stage 1 (format) and stage 2 (format + correctness) (ASSUMED)
VSPO_EPS = 0.05  # floor of the task value, so unseen prompts stay sampleable (ASSUMED, as SPO's 0.05)
VSPO_CLIP = 0.2  # ε of the smooth clip (ASSUMED)
STATE_KEY = "vspo_value"


def prs_reward(stage: int, r_fmt: Tensor, used_tool: Tensor, r_ans: Tensor) -> Tensor:
    """Stage 1: well-formed tool use; stage 2: 0.2·format + 0.8·answer; stage 3: the answer only. [B]."""
    if stage == 1:
        return r_fmt * used_tool
    if stage == 2:
        return 0.2 * r_fmt + 0.8 * r_ans
    return r_ans


class ProgressiveRewardShaping:
    """Replaces `reward` by the current stage's reward; the stage follows `batch.meta["step"]` (or its own count)."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward"})

    def __init__(self, stages: Sequence[int] = PRS_STAGES) -> None:
        self.stages = tuple(stages)
        self.calls = 0

    def stage(self, step: int) -> int:
        """1, 2 or 3 for training step `step`."""
        return 1 + sum(step >= s for s in self.stages)

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] -> staged reward [B]."""
        step = int(batch.meta.get("step", self.calls))
        self.calls += 1
        used = (tool_call_counts(batch) > 0).to(torch.float32)
        r = prs_reward(self.stage(step), format_ok(batch), used, answer_score(batch))
        comps = {**batch.reward_components, "prs_stage": torch.full_like(r, float(self.stage(step)))}
        return batch.replace(reward=r, reward_components=comps)


def task_value(successes: float, trials: float, eps: float = VSPO_EPS) -> float:
    """v = p̂(1 − p̂) + ε with p̂ = (s + ½)/(n + 1): difficulty × uncertainty, highest at p̂ = ½."""
    p = (successes + 0.5) / (trials + 1.0)
    return p * (1.0 - p) + eps


class VSPOTracker(Estimator):
    """GroupZ advantages; keeps per-prompt (successes, trials) in `state["vspo_value"]` for the sampler."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id", "prompt_key"})
    stateful: ClassVar[bool] = True

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] -> [B, T]."""
        return AdvOut(broadcast(grpo_outcome(batch.reward.float(), batch.group_id), batch.mask))

    def update_state(
        self, batch: RolloutBatch, state: dict[str, Any], post_update_logprobs: Any = None, logprob_fn: Any = None
    ) -> None:
        """Add this batch's outcomes to the per-prompt counts."""
        if batch.prompt_key is None:
            return
        table = state.setdefault(STATE_KEY, {})
        for key, ok in zip(batch.prompt_key.tolist(), (answer_score(batch) > 0.5).tolist(), strict=True):
            s, n = table.get(key, (0.0, 0.0))
            table[key] = (s + float(ok), n + 1.0)


class ValueSampler:
    """Prompt sampler: draws prompts with probability ∝ task value (replacements for dropped groups)."""

    def __init__(self, eps: float = VSPO_EPS) -> None:
        self.eps = eps

    def sample(self, prompt_keys: Sequence[int], state: dict[str, Any], n: int, rng: np.random.Generator) -> list[int]:
        """Indices into prompt_keys."""
        table = state.get(STATE_KEY, {})
        w = np.array([task_value(*table.get(k, (0.0, 0.0)), eps=self.eps) for k in prompt_keys])
        return rng.choice(len(prompt_keys), size=n, replace=n > len(prompt_keys), p=w / w.sum()).tolist()


class ZeroValueFilter:
    """Group filter: drops zero-advantage groups (constant reward); the sampler replaces them."""

    def select(self, batch: RolloutBatch) -> tuple[RolloutBatch, int]:
        """(kept rows, groups dropped)."""
        keep = varied_groups(group_metric(batch, "reward"), batch.group_id)
        dropped = torch.unique(batch.group_id[~keep]).numel()
        return batch.select(torch.nonzero(keep).flatten()), int(dropped)


def smooth_clip(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, clip: float = VSPO_CLIP, **_: object
) -> Tensor:
    """ℓ = −A·(1 + ε·tanh((r − 1)/ε)): equals −rA near r = 1 and saturates smoothly at 1 ± ε. [B, T]."""
    ratio = torch.exp(token_log_ratio(logp, old_logp))
    return -advantages * (1.0 + clip * torch.tanh((ratio - 1.0) / clip)) * mask


REWARDS.register("prs", ProgressiveRewardShaping)
ESTIMATORS.register("vspo", VSPOTracker)
PROMPT_SAMPLERS.register("vspo_value", ValueSampler)
GROUP_FILTERS.register("zero_value_filter", ZeroValueFilter)
LOSSES.register("vspo_smooth_clip", smooth_clip)

register_preset(
    MethodPreset(
        name="vspo",
        advantage=PluginRef("vspo"),
        loss=PluginRef("vspo_smooth_clip", {"clip": VSPO_CLIP}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("prs", {"stages": PRS_STAGES}),),
        group_filter=PluginRef("zero_value_filter"),
        prompt_sampler=PluginRef("vspo_value", {"eps": VSPO_EPS}),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="Progressive Reward Shaping and Value-based Sampling Policy Optimization (VSPO)",
        arxiv="2512.07478",
        evidence="[ABS] PRS stages, value-based replacement of zero-advantage groups, value-smoothing clip; ASSUMED "
        "stages at steps 20/60, v = p̂(1−p̂)+0.05, tanh smooth clip ε=0.2, answer score instead of BLEU/judge",
        tier="B",
    )
)
