"""A method's rollout side in `toolgym train`: its strategy plans each group; unsupported kinds fail fast."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolgym.trainers.rollouts.collector import EpisodeSpec
from toolgym.trainers.rollouts.episode import Episode

UNSUPPORTED_KINDS: dict[str, str] = {}
UNSUPPORTED_STRATEGIES: dict[str, str] = {}
FORK_STRATEGIES = frozenset({"axpo_resample", "elpo_binary_search"})  # run by the rollout workers on local envs
APPLIED_OPTIONS = frozenset({"strategy", "strategy_cfg", "n_tools_off", "hidden_pool", "ref_topk", "worker_tool"})
ELPO_CRITICAL = "elpo_critical_turn"  # the reward component ELPO's estimator reads (-1: no critical turn)


class UnsupportedRollout(ValueError):
    """The method needs rollouts `toolgym train` cannot produce."""


PLANNER_WORKER_ENV = "toolgym/PlannerWorker-v0"


def check_supported(preset: Any, group_size: int, local_envs: bool = True, env: Any = None) -> None:
    """Raise `UnsupportedRollout` naming the reason when `toolgym train` cannot sample for `preset`.

    `env`: the run's `EnvConfig` (id and kwargs), checked against methods that need a kind of env.
    """
    kind = preset.rollout.kind
    if kind == "planner_worker" and env is not None:
        _check_planner_worker_env(preset, env)
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
    if strategy in FORK_STRATEGIES and not local_envs:
        raise UnsupportedRollout(
            f"method {preset.name!r} (rollout strategy {strategy!r}) forks episodes from env snapshots: "
            "`toolgym train` does this with local envs only (leave env.server_url unset)"
        )
    if not local_envs and "gold" in _reward_inputs(preset):
        raise UnsupportedRollout(
            f"method {preset.name!r} scores rollouts against the task's gold actions, which a toolgym server "
            "does not reveal: train it with local envs (leave env.server_url unset)"
        )
    if strategy in UNSUPPORTED_STRATEGIES:
        raise UnsupportedRollout(
            f"method {preset.name!r} (rollout strategy {strategy!r}) cannot be trained by `toolgym train`: "
            f"{UNSUPPORTED_STRATEGIES[strategy]}"
        )


def _check_planner_worker_env(preset: Any, env: Any) -> None:
    """MATPO's worker sub-episodes come from the planner-worker env, with the preset's worker tool."""
    if env.id != PLANNER_WORKER_ENV:
        raise UnsupportedRollout(
            f"method {preset.name!r} runs worker sub-episodes for the planner's worker calls: set "
            f"env.id={PLANNER_WORKER_ENV} (env.kwargs.env_id names the env the agents work in; got env.id={env.id})"
        )
    tool = dict(preset.rollout.options).get("worker_tool", "worker")
    if dict(env.kwargs).get("worker_tool", "worker") != tool:
        raise UnsupportedRollout(f"method {preset.name!r} expects the worker tool {tool!r}: set env.kwargs.worker_tool")


def _reward_inputs(preset: Any) -> set[str]:
    """Batch fields the preset's reward transforms read."""
    from toolgym.trainers.rewards import REGISTRY

    fields: set[str] = set()
    for ref in preset.reward_transforms:
        fields |= set(getattr(REGISTRY.get(ref.name), "requires", ()))
    return fields


def approximations(preset: Any) -> list[str]:
    """What of the method's sampling side `toolgym train` does not do (said at the start of a run)."""
    notes = []
    ignored = {k: v for k, v in dict(preset.rollout.options).items() if k not in APPLIED_OPTIONS}
    if ignored:
        notes.append(
            f"method {preset.name!r}: rollout option(s) {ignored} are not applied by `toolgym train` "
            "(set the env / rollout config to match)"
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

    def __init__(self, preset: Any, group_size: int, local_envs: bool = True, env: Any = None) -> None:
        check_supported(preset, group_size, local_envs, env)
        self.name = preset.name
        options = dict(preset.rollout.options)
        self.fork_options = options if options.get("strategy") in FORK_STRATEGIES else None
        """the strategy options the rollout workers expand each group with (forks), else None"""
        self.notes = approximations(preset)
        self.prompt_sampler = preset.prompt_sampler is not None
        """the method chooses its tasks with a prompt sampler (the driver asks the learner, which holds its state)"""
        self.offline = preset.rollout.kind == "offline"
        """the method trains on a fixed pool of episodes sampled once from the starting policy (StepTool)"""
        self._group_filter = preset.group_filter
        self.strategy = _make_strategy(preset, group_size)
        self.tools_off = getattr(self.strategy, "n_off", 0)
        if self.tools_off >= group_size:
            raise UnsupportedRollout(
                f"method {preset.name!r} runs {self.tools_off} tool-free rollouts per group: "
                f"rollout.group_size ({group_size}) must be larger"
            )

    def group_filter(self) -> Any:
        """The method's group filter (DAPO's dynamic sampling), built; None if it has none."""
        if self._group_filter is None:
            return None
        from toolgym.trainers.samplers import GROUP_FILTERS

        return GROUP_FILTERS.get(self._group_filter.name)(**self._group_filter.cfg)

    def group(self, seed: int, group_id: int, n: int) -> list[EpisodeSpec]:
        """The `n` rollouts of one group, as the strategy plans them."""
        from toolgym.trainers.methods.strategies import EpisodePlan

        plans = self.strategy.plan([EpisodePlan(seed=seed, group_id=group_id) for _ in range(n)])
        return [EpisodeSpec(p.seed, p.group_id, dict(p.options), p.prompt_prefix) for p in plans]

    def observe(self, episodes: Sequence[Episode]) -> None:
        """After a step's rollouts: marks unsolved tasks hard and lets the strategy see the traces."""
        if self.fork_options is not None:
            return  # the workers expanded every group already
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


def _trace(ep: Episode, sample_id: int = 0) -> Any:
    """A text-level view of an episode: its snapshots (if recorded) and each turn's uncertainty
    (−mean log-prob of the turn's sampled tokens, what AXPO ranks prefixes by)."""
    from toolgym.trainers.methods.strategies import EpisodePlan, Trace, TurnRecord

    plan = EpisodePlan(ep.seed, ep.group_id, {"tools": "none"} if ep.path == "tools_off" else {}, ep.prompt_prefix)
    plan.path = ep.path
    states = ep.states + [{}] * (len(ep.actions) - len(ep.states))
    turns = [
        TurnRecord(state, action, obs, float(reward), {**info, "uncertainty": _uncertainty(ep, k)})
        for k, (state, action, obs, reward, info) in enumerate(
            zip(states, ep.actions, ep.observations, ep.rewards, ep.infos, strict=False)
        )
    ]
    return Trace(plan, ep.prompt_text, sample_id, turns, ep.terminated, ep.truncated, meta={"episode": ep})


def _uncertainty(ep: Episode, turn: int) -> float:
    logps = [lp for lp, k, m in zip(ep.logprobs, ep.turn_idx, ep.loss_mask, strict=False) if k == turn and m]
    return -sum(logps) / len(logps) if logps else 0.0


class EngineForks:
    """The fork runner the rollout workers hand to `expand`: forks run on the engine and a local env."""

    def __init__(self, collector: Any, params: Any, run: Any) -> None:
        self.collector, self.params, self.run = collector, params, run
        self.forked = 0

    def fork(self, parent: Any, turn: int, prefix: str = "") -> Any:
        """The parent's episode up to `turn` (plus the frozen `prefix` of that turn's action), regenerated."""
        from toolgym.trainers.rollouts.collector import afork

        episode: Episode = parent.meta["episode"]
        prefix_ids = _prefix_ids(self.collector.tokenizer, episode, turn, prefix)
        child = self.run(afork(self.collector, episode, turn, prefix_ids, self.params))
        self.forked += 1
        trace = _trace(child, -1 - self.forked)
        trace.parent_id, trace.branch_turn, trace.branch_prefix = parent.sample_id, turn, prefix
        return trace


def _prefix_ids(tokenizer: Any, ep: Episode, turn: int, prefix: str) -> list[int]:
    """The parent's own sampled tokens that spell `prefix` at the start of turn `turn` (else `prefix` encoded)."""
    ids = [t for t, k in zip(ep.token_ids, ep.turn_idx, strict=True) if k == turn]
    text = ""
    for n, token in enumerate(ids):
        if text == prefix:
            return ids[:n]
        text += tokenizer.decode([token], skip_special_tokens=False)
    return list(tokenizer.encode(prefix, add_special_tokens=False)) if prefix else []


def expand_groups(options: dict[str, Any], episodes: list[Episode], forks: EngineForks) -> list[Episode]:
    """The worker side of a fork strategy: each group's episodes plus the forks `expand` adds."""
    from toolgym.trainers.methods.strategies import make_strategy

    strategy: Any = make_strategy(options)
    out: list[Episode] = []
    for gid in dict.fromkeys(ep.group_id for ep in episodes):
        group = [ep for ep in episodes if ep.group_id == gid]
        traces = strategy.expand([_trace(ep, i) for i, ep in enumerate(group)], forks)
        if options.get("strategy") == "elpo_binary_search":
            for t in traces:
                t.meta["episode"].labels[ELPO_CRITICAL] = float(t.meta.get("critical_turn", -1))
        out += [t.meta["episode"] for t in traces]
    return out


def collect_planned(
    collector: Any, specs: list[Any], params: Any, fork_options: dict[str, Any] | None, run: Any
) -> list[Episode]:
    """Roll out `specs` (`run` drives a coroutine to its end); with a fork strategy's options (AXPO, ELPO)
    env snapshots are recorded and each group gets the forks the strategy's `expand` asks for."""
    collector.snapshots = fork_options is not None
    episodes: list[Episode] = run(collector.acollect(specs, params))
    if fork_options is not None:
        episodes = expand_groups(fork_options, episodes, EngineForks(collector, params, run))
    return episodes
