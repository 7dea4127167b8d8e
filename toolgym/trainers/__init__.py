"""RL trainers: rollouts over toolgym envs, engines, learner, Ray actors, algorithm plug-ins.

Names resolve lazily (no torch or ray import until used): `from toolgym.trainers import train`.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "TrainConfig": "toolgym.trainers.config",
    "load_config": "toolgym.trainers.config",
    "train": "toolgym.trainers.ray.driver",
    "TrainResult": "toolgym.trainers.ray.driver",
    "Learner": "toolgym.trainers.learner",
    "LearnerConfig": "toolgym.trainers.learner",
    "Episode": "toolgym.trainers.rollouts.episode",
    "EpisodeSpec": "toolgym.trainers.rollouts.collector",
    "RolloutCollector": "toolgym.trainers.rollouts.collector",
    "episodes_to_batch": "toolgym.trainers.rollouts.to_batch",
    "ChatFormat": "toolgym.trainers.rollouts.format",
    "SamplingParams": "toolgym.trainers.engines.base",
    "make_engine": "toolgym.trainers.engines.base",
    "RolloutBatch": "toolgym.trainers.batch",
    "build_algorithm": "toolgym.trainers.methods",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolgym.trainers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
