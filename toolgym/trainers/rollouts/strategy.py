"""A method's rollout side in `toolgym train`: its strategy plans each group; unsupported kinds fail fast."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolgym.trainers.rollouts.collector import EpisodeSpec
from toolgym.trainers.rollouts.episode import Episode

UNSUPPORTED_KINDS = {
    "per_turn": "its rollouts make each assistant turn a sample of its own (Flow-GRPO), "
    "which the Ray rollout workers do not produce",
    "planner_worker": "it runs worker sub-episodes for every planner tool call (MATPO), "
    "which the Ray rollout workers do not run",
    "offline": "it trains on fixed offline trajectories (StepTool), while `toolgym train` samples online rollouts",
}
UNSUPPORTED_STRATEGIES = {
    "axpo_resample": "AXPO resamples from prefixes of earlier turns through env forks, "
    "which the Ray rollout workers do not record",
    "elpo_binary_search": "ELPO's binary search forks episodes at earlier turns through env snapshots, "
    "which the Ray rollout workers do not record",
}


class UnsupportedRollout(ValueError):
    """The method needs rollouts `toolgym train` cannot produce."""


def check_supported(preset: Any, group_size: int) -> None:
    """Raise `UnsupportedRollout` naming the reason when `toolgym train` cannot sample for `preset`."""
    kind = preset.rollout.kind
    if kind in UNSUPPORTED_KINDS:
        raise UnsupportedRollout(
            f"method {preset.name!r} (rollout kind {kind!r}) cannot be trained by `toolgym train`: "
            f"{UNSUPPORTED_KINDS[kind]}"
        )
    if kind == "single_stream" and group_size != 1:
        raise UnsupportedRollout(
            f"method {preset.name!r} samples one rollout per prompt (rollout kind 'single_stream'): "
            f"set rollout.group_size=1 (got {group_size})"
        )
    strategy = dict(preset.rollout.options).get("strategy", "plain")
    if strategy in UNSUPPORTED_STRATEGIES:
        raise UnsupportedRollout(
            f"method {preset.name!r} (rollout strategy {strategy!r}) cannot be trained by `toolgym train`: "
            f"{UNSUPPORTED_STRATEGIES[strategy]}"
        )


def approximations(preset: Any) -> list[str]:
    """What of the method's sampling side `toolgym train` does not do (said at the start of a run)."""
    notes = []
    if preset.prompt_sampler is not None:
        notes.append(
            f"method {preset.name!r}: prompt sampler {preset.prompt_sampler.name!r} is not applied; "
            "training tasks are drawn uniformly from the env's seeds"
        )
    if preset.group_filter is not None:
        notes.append(
            f"method {preset.name!r}: groups dropped by {preset.group_filter.name!r} are not regenerated; "
            "the step trains on the groups kept"
        )
    return notes


class _NoForks:
    """The runner handed to `expand` here: plan-only strategies never fork."""

    def fork(self, parent: Any, turn: int, prefix: str = "") -> Any:
        raise UnsupportedRollout("this rollout strategy forks episodes, which `toolgym train` does not support")


class GroupPlanner:
    """Turns each step's groups into `EpisodeSpec`s through the method's strategy (`plan` / `expand` hooks).

    EAPO's tools-off mix and AKBE's dual path reset some rollouts of each group with
    `{"tools": "none"}`; ToolExpander prefixes a demonstration to tasks no rollout solved.
    """

    def __init__(self, preset: Any, group_size: int) -> None:
        check_supported(preset, group_size)
        self.name = preset.name
        self.notes = approximations(preset)
        self.strategy = _make_strategy(preset, group_size)
        self.tools_off = getattr(self.strategy, "n_off", 0)
        if self.tools_off >= group_size:
            raise UnsupportedRollout(
                f"method {preset.name!r} runs {self.tools_off} tool-free rollouts per group: "
                f"rollout.group_size ({group_size}) must be larger"
            )

    def group(self, seed: int, group_id: int, n: int) -> list[EpisodeSpec]:
        """The `n` rollouts of one group, as the strategy plans them."""
        from toolgym.trainers.methods.strategies import EpisodePlan

        plans = self.strategy.plan([EpisodePlan(seed=seed, group_id=group_id) for _ in range(n)])
        return [EpisodeSpec(p.seed, p.group_id, dict(p.options), p.prompt_prefix) for p in plans]

    def observe(self, episodes: Sequence[Episode]) -> None:
        """After a step's rollouts: marks unsolved tasks hard and lets the strategy see the traces."""
        mark_hard = getattr(self.strategy, "mark_hard", None)
        if mark_hard is not None:
            for seed in _unsolved_seeds(episodes):
                mark_hard(seed)
        self.strategy.expand([_trace(ep) for ep in episodes], _NoForks())


def _make_strategy(preset: Any, group_size: int) -> Any:
    from toolgym.trainers.methods.strategies import make_strategy
    from toolgym.trainers.methods.tier_b.eapo import ToolsOffMix

    options = dict(preset.rollout.options)
    if preset.rollout.kind == "dual_path":  # n with tools + n_tools_off without, at the config's group size
        share = float(options.get("n_tools_off", 0)) / max(preset.rollout.n, 1)
        return ToolsOffMix(n_off=max(1, min(group_size - 1, round(group_size * share))))
    return make_strategy(options)


def _unsolved_seeds(episodes: Sequence[Episode]) -> set[int]:
    solved: dict[int, bool] = {}
    for ep in episodes:
        ok = ep.reward_components.get("success", 0.0) > 0
        solved[ep.seed] = solved.get(ep.seed, False) or ok
    return {seed for seed, ok in solved.items() if not ok}


def _trace(ep: Episode) -> Any:
    """A text-level view of an episode (no env snapshots: it cannot be forked)."""
    from toolgym.trainers.methods.strategies import EpisodePlan, Trace, TurnRecord

    plan = EpisodePlan(ep.seed, ep.group_id, {"tools": "none"} if ep.path == "tools_off" else {}, ep.prompt_prefix)
    plan.path = ep.path
    turns = [
        TurnRecord({}, action, obs, float(reward), info)
        for action, obs, reward, info in zip(ep.actions, ep.observations, ep.rewards, ep.infos, strict=False)
    ]
    return Trace(plan, ep.prompt_text, 0, turns, ep.terminated, ep.truncated)
