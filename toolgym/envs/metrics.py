"""Evaluation metrics over episode results: success, pass^k, tool productivity, cost of pass, PRR, budget exhaustion."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from math import comb
from typing import Any

JsonDict = dict[str, Any]
# An episode result is a dict with at least: task_id, success (bool), tool_calls (int), cost (float),
# budget_exhausted (bool) and faults (the labelled events the episode met, as in info["faults"]).
FAULT_CATEGORIES = ("explicit_transient", "explicit_permanent", "implicit_transient", "implicit_permanent")


def success_rate(episodes: Sequence[JsonDict]) -> float | None:
    """Fraction of episodes that succeeded (None for no episodes)."""
    return _mean([1.0 if e["success"] else 0.0 for e in episodes])


def _by_task(episodes: Iterable[JsonDict]) -> dict[str, list[bool]]:
    groups: dict[str, list[bool]] = defaultdict(list)
    for episode in episodes:
        groups[str(episode["task_id"])].append(bool(episode["success"]))
    return groups


def pass_hat_k(n: int, c: int, k: int) -> float:
    """τ-bench's pass^k for one task: the chance that k samples drawn without replacement all succeed."""
    if not 0 < k <= n:
        raise ValueError(f"pass^k needs 0 < k <= n, got k={k}, n={n}")
    return comb(c, k) / comb(n, k)


def pass_at_k(n: int, c: int, k: int) -> float:
    """pass@k for one task: the chance that at least one of k samples succeeds (unbiased estimator)."""
    if not 0 < k <= n:
        raise ValueError(f"pass@k needs 0 < k <= n, got k={k}, n={n}")
    return 1.0 - comb(n - c, k) / comb(n, k)


def mean_pass_hat_k(episodes: Sequence[JsonDict], k: int) -> float | None:
    """pass^k averaged over the tasks that have at least k samples (None if none has)."""
    values = [pass_hat_k(len(s), sum(s), k) for s in _by_task(episodes).values() if len(s) >= k]
    return _mean(values)


def mean_pass_at_k(episodes: Sequence[JsonDict], k: int) -> float | None:
    """pass@k averaged over the tasks that have at least k samples (None if none has)."""
    values = [pass_at_k(len(s), sum(s), k) for s in _by_task(episodes).values() if len(s) >= k]
    return _mean(values)


def tool_calls_per_success(episodes: Sequence[JsonDict]) -> float | None:
    """All tool calls divided by the number of successes (None without a success)."""
    successes = sum(1 for e in episodes if e["success"])
    return sum(e["tool_calls"] for e in episodes) / successes if successes else None


def tool_productivity(episodes: Sequence[JsonDict]) -> float | None:
    """OTC-PO's tool productivity: successes per tool call (None when no tool was called)."""
    calls = sum(e["tool_calls"] for e in episodes)
    return sum(1 for e in episodes if e["success"]) / calls if calls else None


def cost_of_pass(episodes: Sequence[JsonDict]) -> float | None:
    """Expected money spent per success: mean cost per episode over the success rate (None at 0% success)."""
    rate = success_rate(episodes)
    if not rate:
        return None
    return float(sum(e["cost"] for e in episodes)) / len(episodes) / rate


def met_faults(episode: JsonDict) -> list[JsonDict]:
    """The faults an episode actually ran into (not merely planned at reset: step >= 1)."""
    return [f for f in episode.get("faults", []) if f.get("step", 0) >= 1]


def fault_category(event: JsonDict) -> str:
    """ToolMaze's 2×2 cell of a fault event: explicit/implicit × transient/permanent."""
    return f"{'explicit' if event['explicit'] else 'implicit'}_{'transient' if event['transient'] else 'permanent'}"


def perturbation_recovery_rate(episodes: Sequence[JsonDict], category: str | None = None) -> float | None:
    """ToolMaze's PRR: the success rate of the episodes that met a fault (of `category`, if given)."""
    perturbed = [e for e in episodes if any(category is None or fault_category(f) == category for f in met_faults(e))]
    return success_rate(perturbed)


def budget_exhaustion_rate(episodes: Sequence[JsonDict]) -> float | None:
    """Fraction of episodes cut short by an exhausted budget."""
    return _mean([1.0 if e.get("budget_exhausted") else 0.0 for e in episodes])


def summarize(episodes: Sequence[JsonDict], k: int) -> JsonDict:
    """Every metric for one set of episodes (k = samples per task for pass^k and pass@k)."""
    kinds: dict[str, int] = defaultdict(int)
    for episode in episodes:
        for event in met_faults(episode):
            kinds[event["kind"]] += 1
    return {
        "episodes": len(episodes),
        "success_rate": success_rate(episodes),
        f"pass^{k}": mean_pass_hat_k(episodes, k),
        f"pass@{k}": mean_pass_at_k(episodes, k),
        "tool_calls_per_success": tool_calls_per_success(episodes),
        "tool_productivity": tool_productivity(episodes),
        "mean_cost": _mean([e["cost"] for e in episodes]),
        "cost_of_pass": cost_of_pass(episodes),
        "perturbed_episodes": sum(1 for e in episodes if met_faults(e)),
        "prr": perturbation_recovery_rate(episodes),
        "prr_by_category": {c: perturbation_recovery_rate(episodes, c) for c in FAULT_CATEGORIES},
        "fault_kinds": dict(sorted(kinds.items())),
        "budget_exhaustion_rate": budget_exhaustion_rate(episodes),
    }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


__all__ = [
    "FAULT_CATEGORIES",
    "budget_exhaustion_rate",
    "cost_of_pass",
    "fault_category",
    "mean_pass_at_k",
    "mean_pass_hat_k",
    "met_faults",
    "pass_at_k",
    "pass_hat_k",
    "perturbation_recovery_rate",
    "success_rate",
    "summarize",
    "tool_calls_per_success",
    "tool_productivity",
]
