"""Start (or join) Ray and place the actors: rollout workers and one learner."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from toolgym.trainers._deps import require
from toolgym.trainers.config import RayConfig, TrainConfig
from toolgym.trainers.ray.workers import LearnerWorker, RolloutWorker

RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
# Ray starts workers at niceness 15 by default: on a shared CPU that starves the actors doing the work.
LOCAL_RAY_ENV = {"RAY_worker_niceness": "0"}


def init_ray(cfg: RayConfig, threads: int = 1) -> bool:
    """Join `cfg.address`, or start a local Ray bound to loopback. Returns whether we started it."""
    ray = require("ray")
    for key, value in {**RAY_ENV, **LOCAL_RAY_ENV}.items():
        os.environ.setdefault(key, value)
    if ray.is_initialized():
        return False
    runtime_env = {"env_vars": {"OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false", **RAY_ENV}}
    if cfg.address:
        ray.init(address=cfg.address, runtime_env=runtime_env, log_to_driver=False)
        return False
    ray.init(
        num_cpus=cfg.num_cpus,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        runtime_env=runtime_env,
        log_to_driver=False,
    )
    return True


@dataclass
class Actors:
    """Handles of a run's actors."""

    workers: list[Any]
    learner: Any


def launch(cfg: TrainConfig, model_path: str) -> Actors:
    """Create the rollout workers and the learner (all load `model_path`)."""
    ray = require("ray")
    worker_cls = ray.remote(RolloutWorker).options(num_cpus=cfg.ray.worker_cpus, num_gpus=cfg.ray.worker_gpus)
    learner_cls = ray.remote(LearnerWorker).options(num_cpus=cfg.ray.learner_cpus, num_gpus=cfg.ray.learner_gpus)
    workers = [
        worker_cls.remote(i, model_path, cfg.model.format, cfg.env, cfg.rollout, cfg.threads)
        for i in range(cfg.rollout.workers)
    ]
    learner = learner_cls.remote(
        model_path,
        cfg.model.format,
        cfg.algorithm,
        cfg.optim,
        cfg.rollout.temperature,
        cfg.threads,
        cfg.rollout.reward_component,
    )
    return Actors(workers, learner)


def shutdown(actors: Actors | None, started: bool) -> None:
    """Close env sessions, then stop Ray if this process started it."""
    ray = require("ray")
    if actors is not None:
        try:
            ray.get([w.close.remote() for w in actors.workers], timeout=30)
        except Exception:  # noqa: BLE001 - best effort: the server also expires idle sessions
            pass
        for handle in [*actors.workers, actors.learner]:
            ray.kill(handle)
    if started:
        ray.shutdown()
