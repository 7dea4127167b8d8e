"""SFT warm start on oracle trajectories (the task's gold actions), stopped by a validation check."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolgym.trainers.engines.base import GenOutput
from toolgym.trainers.rollouts.episode import Episode, EpisodeBuilder
from toolgym.trainers.rollouts.format import ChatFormat
from toolgym.trainers.rollouts.to_batch import episodes_to_batch

logger = logging.getLogger(__name__)


def oracle_episode(env: Any, seed: int, tokenizer: Any, fmt: ChatFormat, max_tokens: int = 512) -> list[Episode]:
    """Play the task's gold actions in `env`, recorded exactly as a rollout would be: the task episode,
    then any worker sub-episodes a planner-worker env opened."""
    from toolgym.trainers.rollouts.collector import EnvSlot, start_worker

    def new_builder(name: str) -> EpisodeBuilder:
        return EpisodeBuilder(Episode(seq_id=name, group_id=seed, seed=seed), tokenizer, fmt, max_tokens)

    slot = EnvSlot(new_builder(f"oracle-{seed}"))
    obs, info = env.reset(seed=seed)
    slot.task.start(obs)
    slot.task.episode.role = info.get("role")
    end_id = fmt.end_id(tokenizer)
    for action in env.unwrapped.task.gold_actions:
        ids = list(tokenizer.encode(action, add_special_tokens=False)) + [end_id]
        slot.current.add_model_turn(GenOutput(ids, [0.0] * len(ids)))
        worker_name = f"oracle-{seed}-w{len(slot.workers)}"
        slot.record(env.step(action), lambda parent, o, n=worker_name: start_worker(new_builder(n), parent, o))
        if slot.task.episode.done:
            break
    return [slot.task.episode, *(w.episode for w in slot.workers)]


def oracle_episodes(
    env_id: str,
    seeds: Sequence[int],
    tokenizer: Any,
    fmt: ChatFormat,
    env_kwargs: Mapping[str, Any] | None = None,
    max_tokens: int = 512,
) -> list[Episode]:
    """Oracle episodes for every seed (local env made with `env_kwargs`), worker sub-episodes included."""
    import gymnasium as gym

    import toolgym  # noqa: F401

    env = gym.make(env_id, **dict(env_kwargs or {}))
    try:
        return [episode for s in seeds for episode in oracle_episode(env, int(s), tokenizer, fmt, max_tokens)]
    finally:
        env.close()


@dataclass
class SFTResult:
    """How the warm start went: steps taken and (step, validation success) checks."""

    steps: int
    checks: list[tuple[int, float]] = field(default_factory=list)

    @property
    def final_success(self) -> float:
        """Validation success at the last check."""
        return self.checks[-1][1] if self.checks else 0.0


def warm_start(
    learner: Any,
    tokenizer: Any,
    fmt: ChatFormat,
    validate: Callable[[], float],
    *,
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    max_tokens: int = 512,
    batch_size: int = 64,
    target: float = 0.3,
    check_every: int = 5,
    max_steps: int = 600,
    check_below_loss: float = 1.0,
    seed: int = 0,
    data_seed_offset: int = 10_000_000,
) -> SFTResult:
    """SFT on fresh oracle batches until `validate()` (greedy success) reaches `target`.

    Validation is skipped while the training loss is above `check_below_loss` (the model cannot solve
    anything yet, and greedy decoding of an untrained model writes long, slow episodes).
    """
    rng = np.random.default_rng(seed)
    result = SFTResult(steps=0)
    for step in range(1, max_steps + 1):
        seeds = rng.integers(data_seed_offset, 2**31 - 1, size=batch_size)
        episodes = oracle_episodes(env_id, seeds, tokenizer, fmt, env_kwargs, max_tokens)
        batch = episodes_to_batch(episodes, tokenizer.pad_token_id)
        metrics = learner.sft_step(batch)
        result.steps = step
        if step % (10 * check_every) == 0:
            logger.info("sft step %d loss %.3f", step, metrics["sft/loss"])
        if step % check_every == 0 and metrics["sft/loss"] < check_below_loss:
            success = validate()
            result.checks.append((step, success))
            logger.info("sft step %d loss %.3f validation success %.3f", step, metrics["sft/loss"], success)
            if success >= target:
                break
    return result
