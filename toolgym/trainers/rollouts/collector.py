"""Run groups of episodes in lockstep turns: one batched generate per turn, env steps concurrently."""

from __future__ import annotations

import asyncio
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
        """Run the episodes to the end."""
        envs = await self.pool.acquire(len(specs))
        builders = [self._builder(spec) for spec in specs]
        resets = await self.pool.reset_many(envs, [s.seed for s in specs], [dict(s.options) for s in specs])
        for builder, (obs, info) in zip(builders, resets, strict=True):
            builder.start(builder.episode.prompt_prefix + obs)
            builder.episode.task_id = info.get("task_id")
        active = list(range(len(specs)))
        turn = 0
        while active:
            active = await self._turn(active, builders, envs, params, turn)
            turn += 1
        self.engine.release(b.episode.seq_id for b in builders)
        return [b.episode for b in builders]

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
        self, active: list[int], builders: list[EpisodeBuilder], envs: list[Any], params: SamplingParams, turn: int
    ) -> list[int]:
        """One assistant turn for every active episode; returns the episodes still running."""
        requests = [GenRequest(builders[i].episode.seq_id, builders[i].episode.token_ids) for i in active]
        turn_params = params if params.seed is None else _reseed(params, params.seed + turn)
        outputs = self.engine.generate(requests, turn_params)
        actions = [builders[i].add_model_turn(out) for i, out in zip(active, outputs, strict=True)]
        results = await self.pool.step_many([envs[i] for i in active], actions)
        for i, (obs, reward, terminated, truncated, info) in zip(active, results, strict=True):
            builders[i].add_env_step(obs, reward, terminated, truncated, info)
        return [i for i in active if not builders[i].episode.done]


def _reseed(params: SamplingParams, seed: int) -> SamplingParams:
    from dataclasses import replace

    return replace(params, seed=seed)
