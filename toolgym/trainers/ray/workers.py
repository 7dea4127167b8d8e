"""The actors' classes, plain Python (wrapped with `ray.remote` only in `launcher`): rollout worker and learner."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from toolgym.trainers.config import AlgorithmConfig, EnvConfig, OptimConfig, RolloutConfig
from toolgym.trainers.rollouts.collector import EpisodeSpec
from toolgym.trainers.rollouts.episode import Episode
from toolgym.trainers.rollouts.format import ChatFormat


def chat_format(name: str) -> ChatFormat:
    """The chat format of a config name."""
    if name == "tiny":
        from toolgym.trainers.tiny import TINY_FORMAT

        return TINY_FORMAT
    return ChatFormat()


class RolloutWorker:
    """Holds an engine and an env pool (HTTP sessions or local envs); returns episodes."""

    def __init__(
        self, index: int, model_path: str, fmt: str, env: EnvConfig, rollout: RolloutConfig, threads: int = 1
    ) -> None:
        import torch

        from toolgym.trainers.engines import make_engine
        from toolgym.trainers.rollouts.collector import RolloutCollector
        from toolgym.trainers.rollouts.envs import make_env_pool
        from toolgym.trainers.tiny.tokenizer import load_tokenizer

        torch.set_num_threads(threads)
        self.index = index
        self.tokenizer = load_tokenizer(model_path)
        kwargs = dict(rollout.engine_kwargs)
        if rollout.engine == "transformers":
            kwargs.setdefault("device", rollout.device)
        self.engine = make_engine(rollout.engine, model_path, **kwargs)
        pool = make_env_pool(env.id, env.server_url, env.kwargs, env.api_key)
        self.collector = RolloutCollector(
            self.engine, self.tokenizer, chat_format(fmt), pool, max_tokens=rollout.max_tokens, name=f"w{index}"
        )
        self.loop = asyncio.new_event_loop()  # one loop for the worker's life: HTTP clients stay valid

    def rollout(
        self,
        specs: list[EpisodeSpec],
        temperature: float,
        max_new_tokens: int,
        *,
        greedy: bool = False,
        seed: int | None = None,
        expand: dict[str, Any] | None = None,
    ) -> tuple[list[Episode], float]:
        """Run the episodes; returns them and the seconds it took.

        `expand`: a fork strategy's options (AXPO): env snapshots are recorded and each group gets
        the forks the strategy's `expand` asks for, run here on the engine and a local env.
        """
        from toolgym.trainers.rollouts.strategy import collect_planned

        params = self.collector.sampling(temperature, max_new_tokens, greedy=greedy, seed=seed)
        start = time.perf_counter()
        episodes = collect_planned(self.collector, specs, params, expand, self.loop.run_until_complete)
        return episodes, time.perf_counter() - start

    def update_weights(self, state_dict: Mapping[str, Any], version: int) -> int:
        """Weight sync from the learner; returns the engine's new version."""
        self.engine.update_weights(state_dict, version)
        return self.engine.version

    def close(self) -> None:
        """Close env sessions."""
        self.loop.run_until_complete(self.collector.aclose())


class LearnerWorker:
    """Holds the learner (policy, optimizer, algorithm state)."""

    def __init__(
        self,
        model_path: str,
        fmt: str,
        algorithm: AlgorithmConfig,
        optim: OptimConfig,
        temperature: float,
        threads: int = 1,
        reward_component: str | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        from toolgym.trainers.learner import Learner, LearnerConfig
        from toolgym.trainers.methods import build_algorithm
        from toolgym.trainers.tiny.tokenizer import load_tokenizer

        torch.set_num_threads(threads)
        self.tokenizer = load_tokenizer(model_path)
        model = AutoModelForCausalLM.from_pretrained(model_path)
        config = LearnerConfig(
            lr=optim.lr,
            max_grad_norm=optim.max_grad_norm,
            temperature=temperature,
            micro_batch_size=optim.micro_batch_size,
            drop_zero_advantage=optim.drop_zero_advantage,
            recompute_old_logprobs=optim.recompute_old_logprobs,
            device=optim.device,
            forbidden_ids=tuple(chat_format(fmt).forbidden_ids(self.tokenizer)),
        )
        self.learner = Learner(model, build_algorithm(algorithm.name, algorithm.overrides), config)
        self.reward_component = reward_component

    def step(self, episodes: list[Episode]) -> dict[str, float]:
        """One RL update on the episodes; returns `losses/…` and `perf/…` metrics."""
        from toolgym.trainers.rollouts.to_batch import episodes_to_batch

        start = time.perf_counter()
        batch = episodes_to_batch(episodes, self.tokenizer.pad_token_id, reward_key=self.reward_component)
        metrics = self.learner.rl_step(batch)
        metrics["perf/learner_step_s"] = time.perf_counter() - start
        return metrics

    def sample_prompts(self, prompt_keys: list[int], n: int, seed: int) -> list[int]:
        """Indices of the `n` prompts to roll out next, by the method's prompt sampler and its current state."""
        import numpy as np

        rng = np.random.default_rng(seed)
        return self.learner.algorithm.sample_prompts(prompt_keys, self.learner.algo_state, n, rng)

    def state_dict(self) -> dict[str, Any]:
        """Current policy weights (CPU tensors)."""
        return self.learner.state_dict()

    @property
    def version(self) -> int:
        """Number of optimizer steps taken."""
        return self.learner.version

    def get_version(self) -> int:
        """Number of optimizer steps taken (callable through Ray)."""
        return self.learner.version

    def save(self, path: str, extra: dict[str, Any]) -> str:
        """Checkpoint: model, tokenizer, optimizer, algorithm state."""
        return str(self.learner.save(path, self.tokenizer, extra))

    def load(self, path: str) -> dict[str, Any]:
        """Restore a checkpoint; returns its extra data."""
        return self.learner.load(path)
