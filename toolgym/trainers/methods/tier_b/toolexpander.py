"""ToolExpander: swap hopeless prompts for few-shot demonstrations; +0.01 for self-exemplifying thinking (arXiv 2510.07737)."""

from __future__ import annotations

import re
from typing import ClassVar

import torch

from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.methods.strategies import STRATEGIES, EpisodePlan, ForkRunner, Trace
from toolgym.trainers.methods.tier_b._util import answer_score
from toolgym.trainers.rewards import REGISTRY as REWARDS
from toolgym.trainers.samplers import GROUP_FILTERS

TOOLEXPANDER_BONUS = 0.01  # self-exemplifying reward [ABS]
TOOLEXPANDER_N = 10  # rollouts per prompt used to judge "hard" (0 of 10 correct) [ABS]
EXEMPLIFY = re.compile(r"(?i)\b(for example|for instance|example\s*\d*\s*:|e\.g\.)")


def self_exemplifies(text: str) -> bool:
    """Whether the model wrote its own worked example ("for example", "Example 1:", "e.g.")."""
    return EXEMPLIFY.search(text) is not None


class SelfExemplifyBonus:
    """reward += 0.01 when the response contains a self-generated example (component `exemplify`)."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "response_text"})

    def __init__(self, bonus: float = TOOLEXPANDER_BONUS) -> None:
        self.bonus = bonus

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] += bonus·1[exemplifies]."""
        texts = batch.response_text or [""] * batch.batch_size
        hit = torch.tensor([float(self_exemplifies(t)) for t in texts])
        comps = {**batch.reward_components, "exemplify": hit * self.bonus}
        return batch.replace(reward=batch.reward.float() + hit * self.bonus, reward_components=comps)


class HardSampleSwap:
    """Group filter: drops groups with no correct rollout and remembers their prompt keys as hard.

    The rollout side then re-poses a hard prompt with a demonstration (`DemonstrationStrategy`);
    the dropped groups are reported as missing so that the batch is refilled.
    """

    def __init__(self) -> None:
        self.hard: set[int] = set()

    def select(self, batch: RolloutBatch) -> tuple[RolloutBatch, int]:
        """(batch without all-wrong groups, number of groups dropped)."""
        ok = answer_score(batch) > 0.5
        keep = torch.zeros(batch.batch_size, dtype=torch.bool)
        dropped = 0
        for g in torch.unique(batch.group_id):
            rows = batch.group_id == g
            if bool(ok[rows].any()):
                keep |= rows
            else:
                dropped += 1
                if batch.prompt_key is not None:
                    self.hard.update(batch.prompt_key[rows].tolist())
        return batch.select(torch.nonzero(keep).flatten()), dropped


class DemonstrationStrategy:
    """Rollout strategy: prompts of plans whose seed is marked hard get a worked demonstration prefix.

    `demos` are solved transcripts (text); `mark_hard(seed)` is called by the trainer with the
    seeds of groups `HardSampleSwap` dropped. Successful traces are added to the pool by `expand`.
    """

    def __init__(self, max_demos: int = 8) -> None:
        self.max_demos = max_demos
        self.demos: list[str] = []
        self.hard_seeds: set[int] = set()

    def mark_hard(self, seed: int) -> None:
        """Pose this task with a demonstration from now on."""
        self.hard_seeds.add(seed)

    def plan(self, plans: list[EpisodePlan]) -> list[EpisodePlan]:
        """Prefix a demonstration to hard plans (when the pool has one)."""
        if not self.demos:
            return plans
        demo = f"Example of a solved task:\n{self.demos[-1]}\n\nNow your task:\n"
        return [
            EpisodePlan(p.seed, p.group_id, p.options, demo + p.prompt_prefix, p.path)
            if p.seed in self.hard_seeds
            else p
            for p in plans
        ]

    def expand(self, traces: list[Trace], runner: ForkRunner) -> list[Trace]:
        """Add the first successful trace of the batch to the demonstration pool."""
        for t in traces:
            if t.success and not t.plan.prompt_prefix:
                self.demos = (self.demos + [demonstration_text(t)])[-self.max_demos :]
                break
        return traces


def demonstration_text(trace: Trace) -> str:
    """A transcript of a solved trace: the task, each action and each tool response."""
    lines = [f"Task: {trace.prompt}"]
    for t in trace.turns:
        lines.append(f"Assistant: {t.action}")
        if t.observation:
            lines.append(f"Tool: {t.observation}")
    return "\n".join(lines)


REWARDS.register("self_exemplify_bonus", SelfExemplifyBonus)
GROUP_FILTERS.register("hard_sample_swap", HardSampleSwap)
STRATEGIES.register("demonstrations", DemonstrationStrategy)

register_preset(
    MethodPreset(
        name="toolexpander",
        advantage=PluginRef("grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.28}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("self_exemplify_bonus", {"bonus": TOOLEXPANDER_BONUS}),),
        group_filter=PluginRef("hard_sample_swap"),
        rollout=RolloutSpec("group", TOOLEXPANDER_N, {"strategy": "demonstrations"}),
        hparams={"lr": 1e-6, "lr_schedule": "exponential", "lr_gamma": 0.99},
        paper="ToolExpander: Extending the Frontiers of Tool-Using RL to Weak LLMs",
        arxiv="2510.07737",
        evidence="[ABS] hard sample = 0/10 correct, +0.01 bonus, no KL, adjusted clip, exponential LR decay; "
        "ASSUMED clip 0.2/0.28, lr γ=0.99 per step, regex detection of self-examples",
        tier="B",
    )
)
