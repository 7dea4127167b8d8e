"""Offline trajectories (StepTool): episodes sampled once from the starting policy, then drawn from each step."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolgym.trainers.rollouts.episode import Episode

DEFAULT_POOL_STEPS = 4
"""an offline pool holds this many steps' worth of episodes unless told otherwise"""


class OfflinePool:
    """A fixed set of episodes; each step trains on a seeded draw of them (without replacement within a step).

    StepTool trains PPO on trajectories the SFT model produced once (arXiv 2410.07745, [CODE]
    `step_ppotrainer.py`), with π_old recomputed by the learner at each update, as TRL's PPO step does.
    """

    def __init__(self, episodes: Sequence[Episode], seed: int = 0) -> None:
        if not episodes:
            raise ValueError("an offline pool needs at least one episode")
        self.episodes = list(episodes)
        self.seed = seed

    def __len__(self) -> int:
        return len(self.episodes)

    def draw(self, step: int, n: int) -> list[Episode]:
        """`n` episodes for `step` (the same step always draws the same ones); all of them if `n` >= the pool."""
        if n >= len(self.episodes):
            return list(self.episodes)
        picks = np.random.default_rng([self.seed, step]).choice(len(self.episodes), size=n, replace=False)
        return [self.episodes[int(i)] for i in sorted(picks)]


def pool_seeds(first_seed: int, size: int, seed: int) -> list[int]:
    """The task seeds the pool's episodes are sampled on (disjoint from eval seeds when `first_seed` is)."""
    rng = np.random.default_rng([seed, 0x0FF1])
    return [first_seed + int(s) for s in rng.integers(0, 2**30, size=size)]
