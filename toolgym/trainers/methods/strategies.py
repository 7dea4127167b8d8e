"""Rollout strategies: the method-side hooks a rollout loop calls before and after a group runs (methods.md §5).

A strategy sees text-level traces that carry an env snapshot (`env.unwrapped.get_state()`) taken
before every step, so it can fork an episode at any turn with `set_state`. The rollout loop calls:

1. `plans = strategy.plan(plans)` before running a group: it may edit per-episode reset options
   (EAPO: `{"tools": "none"}` for some rollouts; ToolExpander: a demonstration prefix);
2. runs every plan with `ForkRunner.run` (or its own engine-backed runner that records the same
   snapshots), giving `Trace`s;
3. `traces = strategy.expand(traces, runner)` after the group: it may add rollouts forked from
   earlier turns (AXPO resamples, ELPO's binary search); each added trace has `parent_id` and
   `branch_turn` set, and only its turns from `branch_turn` on are the policy's new tokens.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolgym.trainers.algorithms.registry import Registry

JsonDict = dict[str, Any]


@dataclass
class EpisodePlan:
    """One episode to run: reset seed and options, its group, and text put before the task."""

    seed: int
    group_id: int
    options: JsonDict = field(default_factory=dict)
    prompt_prefix: str = ""
    path: str = "tools_on"  # "tools_off" when options["tools"] == "none"


@dataclass
class TurnRecord:
    """One assistant turn: the env state before it, the action, and what the env answered."""

    state_before: JsonDict
    action: str
    observation: str
    reward: float
    info: JsonDict


@dataclass
class Trace:
    """A text-level episode with per-turn snapshots (enough to fork it at any turn)."""

    plan: EpisodePlan
    prompt: str
    sample_id: int
    turns: list[TurnRecord] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    parent_id: int = -1
    branch_turn: int = -1  # first turn generated after the fork (-1: not a fork)
    branch_prefix: str = ""  # forced start of the branch turn's action (AXPO's frozen thinking)
    meta: JsonDict = field(default_factory=dict)  # strategy labels, e.g. ELPO's critical turn

    @property
    def reward(self) -> float:
        """Sum of step rewards."""
        return float(sum(t.reward for t in self.turns))

    @property
    def success(self) -> bool:
        """Whether any step reported `reward_components["success"] > 0`."""
        return any(float((t.info.get("reward_components") or {}).get("success", 0.0)) > 0 for t in self.turns)

    @property
    def num_tool_calls(self) -> int:
        """Parsed tool calls over the episode."""
        return sum(len(t.info.get("tool_calls") or []) for t in self.turns)

    def tool_call_turns(self) -> list[int]:
        """Indices of the turns that made at least one tool call."""
        return [k for k, t in enumerate(self.turns) if t.info.get("tool_calls")]

    @property
    def done(self) -> bool:
        """Whether the episode ended."""
        return self.terminated or self.truncated


class TextPolicy(Protocol):
    """Writes the next assistant action: `policy(prompt, history, prefix) -> action` (starting with prefix)."""

    def __call__(self, prompt: str, history: Sequence[tuple[str, str]], prefix: str) -> str: ...


class ForkRunner:
    """Runs and forks episodes of a local env with a text policy, snapshotting before every step."""

    def __init__(self, env_factory: Callable[[], Any], policy: TextPolicy, max_turns: int = 8) -> None:
        self.env = env_factory()
        self.policy = policy
        self.max_turns = max_turns
        self._ids = itertools.count()

    def run(self, plan: EpisodePlan) -> Trace:
        """Run `plan` to the end."""
        obs, _ = self.env.reset(seed=plan.seed, options=plan.options or None)
        trace = Trace(plan=plan, prompt=plan.prompt_prefix + obs, sample_id=next(self._ids))
        task = getattr(self.env.unwrapped, "task", None)
        if task is not None:
            trace.meta["gold"] = {"actions": list(task.gold_actions), "answer": task.answer}
        return self._continue(trace, "")

    def fork(self, parent: Trace, turn: int, prefix: str = "") -> Trace:
        """A new trace sharing `parent`'s turns before `turn`, regenerated from there (action starts with prefix)."""
        if not 0 <= turn < len(parent.turns):
            raise ValueError(f"cannot fork at turn {turn}: the parent has {len(parent.turns)} turns")
        self.env.reset(seed=parent.plan.seed, options=parent.plan.options or None)
        self.env.unwrapped.set_state(copy.deepcopy(parent.turns[turn].state_before))
        child = Trace(
            plan=parent.plan,
            prompt=parent.prompt,
            sample_id=next(self._ids),
            turns=[dataclasses.replace(t) for t in parent.turns[:turn]],
            parent_id=parent.sample_id,
            branch_turn=turn,
            branch_prefix=prefix,
        )
        return self._continue(child, prefix)

    def _continue(self, trace: Trace, prefix: str) -> Trace:
        while not trace.done and len(trace.turns) < self.max_turns:
            history = [(t.action, t.observation) for t in trace.turns]
            action = self.policy(trace.prompt, history, prefix)
            prefix = ""
            state = self.env.unwrapped.get_state()
            obs, reward, terminated, truncated, info = self.env.step(action)
            uncertainty = getattr(self.policy, "last_uncertainty", None)  # e.g. −mean logprob of the turn
            if uncertainty is not None:
                info = {**info, "uncertainty": float(uncertainty)}
            trace.turns.append(TurnRecord(state, action, obs, float(reward), info))
            trace.terminated, trace.truncated = bool(terminated), bool(truncated)
        if not trace.done:
            trace.truncated = True
        return trace


class RolloutStrategy(Protocol):
    """`plan` edits episodes before a group runs; `expand` adds forked rollouts after it."""

    def plan(self, plans: list[EpisodePlan]) -> list[EpisodePlan]: ...

    def expand(self, traces: list[Trace], runner: ForkRunner) -> list[Trace]: ...


class PlainGroup:
    """The default strategy: runs the plans as given, adds nothing."""

    def plan(self, plans: list[EpisodePlan]) -> list[EpisodePlan]:
        """Unchanged."""
        return plans

    def expand(self, traces: list[Trace], runner: ForkRunner) -> list[Trace]:
        """Unchanged."""
        return traces


STRATEGIES: Registry[Callable[..., RolloutStrategy]] = Registry(
    "rollout strategy", autoload=("toolgym.trainers.methods",)
)
STRATEGIES.register("plain", PlainGroup)


def make_strategy(options: JsonDict) -> RolloutStrategy:
    """The strategy named by a preset's `rollout.options["strategy"]` (with `strategy_cfg`), else plain."""
    name = options.get("strategy", "plain")
    return STRATEGIES.get(name)(**dict(options.get("strategy_cfg", {})))


def run_group(runner: ForkRunner, strategy: RolloutStrategy, seed: int, group_id: int, n: int) -> list[Trace]:
    """Plan, run and expand one group of `n` rollouts of the task at `seed` — the whole hook protocol."""
    plans = strategy.plan([EpisodePlan(seed=seed, group_id=group_id) for _ in range(n)])
    traces = [runner.run(p) for p in plans]
    return strategy.expand(traces, runner)
