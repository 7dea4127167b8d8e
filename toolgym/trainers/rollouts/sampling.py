"""Which tasks a step rolls out (fresh seeds, or a prompt sampler's picks from a pool) and which groups it keeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolgym.trainers.rollouts.episode import Episode

POOL_FOR_SAMPLERS = 1024  # tasks a prompt sampler chooses from when `rollout.prompt_pool` is 0


class TaskPool:
    """A fixed pool of training seeds and the prompt key (`stable_key` of the prompt) of each task seen.

    A prompt sampler (SPO's priorities, VSPO's values) ranks tasks by their keys; a task not rolled
    out yet has no key, and gets a key of its own that no prompt hashes to (the sampler's prior).
    """

    def __init__(self, first_seed: int, size: int) -> None:
        self.seeds = list(range(first_seed, first_seed + size))
        self.keys: dict[int, int] = {}

    def candidate_keys(self) -> list[int]:
        """One key per pool seed, in pool order."""
        return [self.keys.get(seed, -1 - seed) for seed in self.seeds]

    def observe(self, episodes: Sequence[Episode]) -> None:
        """Learn the prompt key of every task rolled out."""
        from toolgym.trainers.batch import stable_key

        for episode in episodes:
            if episode.role != "worker":
                self.keys[episode.seed] = stable_key(episode.prompt_text)


def pool_size(configured: int, has_sampler: bool) -> int:
    """The pool a run draws from: the configured size, else `POOL_FOR_SAMPLERS` for prompt samplers, else 0."""
    return configured or (POOL_FOR_SAMPLERS if has_sampler else 0)


def kept_groups(group_filter: Any, episodes: Sequence[Episode], reward_key: str | None) -> list[Episode]:
    """The episodes of the groups `group_filter` keeps (DAPO's dynamic sampling: groups with varied outcomes)."""
    from toolgym.trainers.rollouts.to_batch import episodes_to_batch

    if group_filter is None or not episodes:
        return list(episodes)
    kept, _ = group_filter.select(episodes_to_batch(episodes, 0, reward_key=reward_key))
    groups = set(kept.group_id.tolist())
    return [ep for ep in episodes if ep.group_id in groups]


def first_groups(episodes: Sequence[Episode], n: int) -> list[Episode]:
    """The episodes of the first `n` groups, in order of first appearance."""
    order = list(dict.fromkeys(ep.group_id for ep in episodes))[:n]
    wanted = set(order)
    return [ep for ep in episodes if ep.group_id in wanted]


def group_count(episodes: Sequence[Episode]) -> int:
    """Distinct groups among the episodes."""
    return len({ep.group_id for ep in episodes})
