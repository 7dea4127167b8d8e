"""Namespaced metrics of a batch of episodes (`rollout/…`, `tools/…`) and the success rate."""

from __future__ import annotations

from collections.abc import Sequence

from toolgym.trainers.rollouts.episode import Episode


def is_success(episode: Episode, key: str = "success") -> bool:
    """The env's `success` reward component when it reports one, else a positive return."""
    components = episode.reward_components
    return components[key] > 0 if key in components else episode.reward > 0


def task_episodes(episodes: Sequence[Episode]) -> list[Episode]:
    """The episodes that are about a task: all but worker sub-episodes (their planner is scored)."""
    return [ep for ep in episodes if ep.role != "worker"]


def success_rate(episodes: Sequence[Episode]) -> float:
    """Fraction of successful task episodes."""
    tasks = task_episodes(episodes)
    return sum(is_success(ep) for ep in tasks) / max(len(tasks), 1)


def _mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def rollout_metrics(episodes: Sequence[Episode], seconds: float) -> dict[str, float]:
    """Rewards, lengths, throughput and tool use of one batch."""
    model_tokens = sum(ep.num_model_tokens for ep in episodes)  # every role's tokens count for throughput
    workers = len(episodes) - len(task_episodes(episodes))
    episodes = task_episodes(episodes)
    calls = [call for ep in episodes for call in ep.tool_calls]
    return {
        "rollout/worker_episodes": float(workers),
        "rollout/reward_mean": _mean([ep.reward for ep in episodes]),
        "rollout/success_rate": success_rate(episodes),
        "rollout/episodes": float(len(episodes)),
        "rollout/turns_mean": _mean([ep.num_turns for ep in episodes]),
        "rollout/model_tokens_mean": _mean([ep.num_model_tokens for ep in episodes]),
        "rollout/episode_tokens_mean": _mean([len(ep.token_ids) for ep in episodes]),
        "rollout/truncated_fraction": _mean([float(ep.truncated) for ep in episodes]),
        "rollout/tools_off_fraction": _mean([float(ep.path == "tools_off") for ep in episodes]),
        "rollout/tokens_per_s": model_tokens / seconds if seconds > 0 else 0.0,
        "tools/calls_per_episode": len(calls) / max(len(episodes), 1),
        "tools/error_rate": _mean([float(not call.get("ok", call.get("error") is None)) for call in calls]),
        "tools/used_fraction": _mean([float(bool(ep.tool_calls)) for ep in episodes]),
    }
