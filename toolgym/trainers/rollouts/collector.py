"""Run groups of episodes in lockstep turns: one batched generate per turn, env steps concurrently."""

from __future__ import annotations

import asyncio
import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

from toolgym.trainers.engines.base import Engine, GenRequest, SamplingParams
from toolgym.trainers.rollouts.envs import EnvPool
from toolgym.trainers.rollouts.episode import Episode, EpisodeBuilder
from toolgym.trainers.rollouts.format import ChatFormat


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode to run: the reset seed (same seed, same task) and its group."""

    seed: int
    group_id: int
    options: dict[str, Any] = field(default_factory=dict)
    prompt_prefix: str = ""
    """text put before the reset observation (a rollout strategy's demonstration)"""


class RolloutCollector:
    """Turns `EpisodeSpec`s into `Episode`s with an engine and a pool of env handles."""

    def __init__(
        self, engine: Engine, tokenizer: Any, fmt: ChatFormat, pool: EnvPool, *, max_tokens: int = 512, name: str = "w0"
    ) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.fmt = fmt
        self.pool = pool
        self.max_tokens = max_tokens
        self._ids = itertools.count()
        self.name = name
        self.snapshots = False  # record env.unwrapped.get_state() before each step (local envs; for forks)

    def sampling(
        self, temperature: float, max_new_tokens: int, *, greedy: bool = False, seed: int | None = None
    ) -> SamplingParams:
        """Sampling parameters with this format's stop and forbidden ids."""
        return SamplingParams(
            temperature=temperature,
            max_new_tokens=max_new_tokens,
            greedy=greedy,
            stop_ids=(self.fmt.end_id(self.tokenizer),),
            forbidden_ids=tuple(self.fmt.forbidden_ids(self.tokenizer)),
            seed=seed,
        )

    def collect(self, specs: list[EpisodeSpec], params: SamplingParams) -> list[Episode]:
        """Run the episodes to the end (blocking)."""
        return asyncio.run(self.acollect(specs, params))

    async def acollect(self, specs: list[EpisodeSpec], params: SamplingParams) -> list[Episode]:
        """Run the episodes to the end (worker sub-episodes of a planner-worker env follow the task episodes)."""
        if not specs:
            return []
        envs = await self.pool.acquire(len(specs))
        builders = [self._builder(spec) for spec in specs]
        resets = await self.pool.reset_many(envs, [s.seed for s in specs], [dict(s.options) for s in specs])
        for builder, env, (obs, info) in zip(builders, envs, resets, strict=True):
            builder.start(builder.episode.prompt_prefix + obs)
            builder.episode.task_id = info.get("task_id")
            builder.episode.gold = _gold(env)
            builder.episode.role = info.get("role")
        slots = [EnvSlot(b) for b in builders]
        active = list(range(len(specs)))
        turn = 0
        while active:
            active = await self._turn(active, slots, envs, params, turn)
            turn += 1
        workers = [w for slot in slots for w in slot.workers]
        self.engine.release(b.episode.seq_id for b in builders + workers)
        return [b.episode for b in builders + workers]

    async def aclose(self) -> None:
        """Close the env pool."""
        await self.pool.close()

    def _builder(self, spec: EpisodeSpec) -> EpisodeBuilder:
        episode = Episode(
            seq_id=f"{self.name}-{next(self._ids)}",
            group_id=spec.group_id,
            seed=spec.seed,
            policy_version=self.engine.version,
            path="tools_off" if spec.options.get("tools") == "none" else "tools_on",
            prompt_prefix=spec.prompt_prefix,
        )
        return EpisodeBuilder(episode, self.tokenizer, self.fmt, self.max_tokens)

    async def _turn(
        self, active: list[int], slots: list[EnvSlot], envs: list[Any], params: SamplingParams, turn: int
    ) -> list[int]:
        """One assistant turn for every active episode; returns the episodes still running."""
        requests = [GenRequest(slots[i].current.episode.seq_id, slots[i].current.episode.token_ids) for i in active]
        turn_params = params if params.seed is None else _reseed(params, params.seed + turn)
        outputs = self.engine.generate(requests, turn_params)
        actions = [slots[i].current.add_model_turn(out) for i, out in zip(active, outputs, strict=True)]
        if self.snapshots:
            for i in active:
                slots[i].current.episode.states.append(envs[i].unwrapped.get_state())
        results = await self.pool.step_many([envs[i] for i in active], actions)
        for i, result in zip(active, results, strict=True):
            slots[i].record(result, self._worker_builder)
        return [i for i in active if not slots[i].task.episode.done]

    def _worker_builder(self, parent: Episode, observation: str) -> EpisodeBuilder:
        """A worker sub-episode of `parent` (a planner): its own context, the parent's group."""
        builder = self._builder(EpisodeSpec(parent.seed, parent.group_id))
        return start_worker(builder, parent, observation)


def start_worker(builder: EpisodeBuilder, parent: Episode, observation: str) -> EpisodeBuilder:
    """Make `builder` a worker sub-episode of `parent` whose prompt is `observation`."""
    builder.episode.role, builder.episode.parent_seq_id = "worker", parent.seq_id
    builder.start(observation)
    return builder


class EnvSlot:
    """The builders of one env: the task episode and, in a planner-worker env, its worker sub-episodes.

    The env says whose turn is next (`info["role"]`, `info["context"]`): "new" opens a worker context
    (the observation is its prompt), "resume" hands the worker's answer back to the planner.
    """

    def __init__(self, task: EpisodeBuilder) -> None:
        self.task = task
        self.current = task
        self.workers: list[EpisodeBuilder] = []

    def record(self, result: tuple[str, float, bool, bool, dict[str, Any]], new_worker: Any) -> None:
        """File an env step with the builder that acted, switching contexts where the env says so."""
        obs, reward, terminated, truncated, info = result
        context, ended = info.get("context"), terminated or truncated
        if self.current is not self.task and (context in ("new", "resume") or ended):
            self.current.end(reward, {"reward_components": {}, "role": "worker"}, answered=not ended)
            self.current, reward = self.task, 0.0
        if context == "new" and not ended:
            self.current = new_worker(self.task.episode, obs)
            self.workers.append(self.current)
            return
        self.current.add_env_step(obs, reward, terminated, truncated, info)
        if self.current is not self.task and self.current.episode.done:  # the worker's context is full
            self.task.episode.truncated, self.task.episode.finish_reason = True, "max_tokens"


async def afork(
    collector: RolloutCollector, parent: Episode, turn: int, prefix_ids: list[int], params: SamplingParams
) -> Episode:
    """A new episode sharing `parent`'s tokens before turn `turn` (loss mask 0), then `prefix_ids`
    (frozen, mask 0), regenerated from there on a local env restored to the parent's snapshot."""
    if len(parent.states) <= turn:
        raise ValueError(f"cannot fork at turn {turn}: the parent recorded {len(parent.states)} env snapshots")
    (env,) = await collector.pool.acquire(1)
    options = {"tools": "none"} if parent.path == "tools_off" else {}
    await collector.pool.reset_many([env], [parent.seed], [options])
    env.unwrapped.set_state(copy.deepcopy(parent.states[turn]))
    builder = collector._builder(EpisodeSpec(parent.seed, parent.group_id, options, parent.prompt_prefix))
    _copy_prefix(builder.episode, parent, turn, prefix_ids)
    first = True
    while not builder.episode.done:
        out = collector.engine.generate([GenRequest(builder.episode.seq_id, builder.episode.token_ids)], params)[0]
        action = builder.add_model_turn(out)
        if first and prefix_ids:
            action = collector.tokenizer.decode(prefix_ids, skip_special_tokens=False) + action
            builder.episode.actions[-1] = action
        first = False
        builder.episode.states.append(env.unwrapped.get_state())
        ((obs, reward, terminated, truncated, info),) = await collector.pool.step_many([env], [action])
        builder.add_env_step(obs, reward, terminated, truncated, info)
    collector.engine.release([builder.episode.seq_id])
    return builder.episode


def _copy_prefix(ep: Episode, parent: Episode, turn: int, prefix_ids: list[int]) -> None:
    start = next((t for t, k in enumerate(parent.turn_idx) if k == turn), len(parent.token_ids))
    ep.token_ids = parent.token_ids[:start] + list(prefix_ids)
    ep.loss_mask = [0] * len(ep.token_ids)
    ep.logprobs = [0.0] * len(ep.token_ids)
    ep.turn_idx = parent.turn_idx[:start] + [-1] * len(prefix_ids)
    ep.span_type = parent.span_type[:start] + parent.span_type[start : start + len(prefix_ids)]
    ep.prompt_len, ep.prompt_text, ep.task_id = parent.prompt_len, parent.prompt_text, parent.task_id
    ep.gold = parent.gold
    ep.actions, ep.rewards = list(parent.actions[:turn]), list(parent.rewards[:turn])
    ep.infos, ep.observations = list(parent.infos[:turn]), list(parent.observations[:turn])
    ep.states = list(parent.states[:turn])
    ep.parent_seq_id, ep.branch_point = parent.seq_id, len(ep.token_ids)


def _gold(env: Any) -> dict[str, Any] | None:
    """The gold actions and answer of a local env's current task (None for server sessions)."""
    task = getattr(getattr(env, "unwrapped", None), "task", None)
    if task is None:
        return None
    return {"actions": list(task.gold_actions), "answer": task.answer}


def _reseed(params: SamplingParams, seed: int) -> SamplingParams:
    from dataclasses import replace

    return replace(params, seed=seed)
