"""Metrics against hand-computed values."""

from __future__ import annotations

import pytest

from toolgym.envs import metrics


def ep(
    task: str, success: bool, calls: int = 2, cost: float = 0.0, faults: list | None = None, exhausted: bool = False
) -> dict:
    return {
        "task_id": task,
        "success": success,
        "tool_calls": calls,
        "cost": cost,
        "faults": faults or [],
        "budget_exhausted": exhausted,
    }


def fault(explicit: bool, transient: bool, step: int = 1) -> dict:
    return {"kind": "x", "tool": "t", "step": step, "explicit": explicit, "transient": transient, "detail": {}}


def test_pass_hat_k_and_pass_at_k_by_hand() -> None:
    assert metrics.pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)  # C(2,2)/C(4,2)
    assert metrics.pass_at_k(4, 2, 2) == pytest.approx(5 / 6)  # 1 - C(2,2)/C(4,2)
    assert metrics.pass_hat_k(3, 3, 3) == 1.0 and metrics.pass_hat_k(3, 2, 3) == 0.0
    episodes = [ep("a", True), ep("a", True), ep("b", True), ep("b", False)]
    assert metrics.mean_pass_hat_k(episodes, 2) == pytest.approx(0.5)  # (1 + 0) / 2
    assert metrics.mean_pass_at_k(episodes, 2) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="0 < k <= n"):
        metrics.pass_hat_k(2, 1, 3)


def test_calls_productivity_and_cost_of_pass() -> None:
    episodes = [ep("a", True, calls=3, cost=0.3), ep("b", False, calls=5, cost=0.5), ep("c", True, calls=2, cost=0.1)]
    assert metrics.success_rate(episodes) == pytest.approx(2 / 3)
    assert metrics.tool_calls_per_success(episodes) == pytest.approx(10 / 2)
    assert metrics.tool_productivity(episodes) == pytest.approx(2 / 10)
    assert metrics.cost_of_pass(episodes) == pytest.approx((0.9 / 3) / (2 / 3))
    failing = [ep("a", False, calls=0)]
    assert metrics.tool_calls_per_success(failing) is None and metrics.tool_productivity(failing) is None
    assert metrics.cost_of_pass(failing) is None and metrics.success_rate([]) is None


def test_prr_counts_only_met_faults_and_splits_the_two_by_two() -> None:
    episodes = [
        ep("a", True, faults=[fault(True, True)]),
        ep("b", False, faults=[fault(True, False)]),
        ep("c", False, faults=[fault(False, True)]),
        ep("d", True, faults=[fault(False, False, step=0)]),  # planned at reset, never met
        ep("e", True),
    ]
    assert metrics.perturbation_recovery_rate(episodes) == pytest.approx(1 / 3)
    assert metrics.perturbation_recovery_rate(episodes, "explicit_transient") == 1.0
    assert metrics.perturbation_recovery_rate(episodes, "explicit_permanent") == 0.0
    assert metrics.perturbation_recovery_rate(episodes, "implicit_permanent") is None
    summary = metrics.summarize(episodes, 1)
    assert summary["perturbed_episodes"] == 3 and summary["fault_kinds"] == {"x": 3}


def test_budget_exhaustion_rate() -> None:
    assert (
        metrics.budget_exhaustion_rate([ep("a", False, exhausted=True), ep("b", True), ep("c", True), ep("d", False)])
        == 0.25
    )
