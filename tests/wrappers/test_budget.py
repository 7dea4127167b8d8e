"""Budgets: every env accepts them, the tracker shows them, prices/tokens/time are charged, exhaustion truncates."""

from __future__ import annotations

import gymnasium as gym
import pytest
from wrapper_helpers import TOOL_ENV_IDS, PricedEnv, call

from toolgym.envs.wrappers import BudgetWrapper
from toolgym.simulators.budget import BudgetConfig, count_tokens


@pytest.mark.parametrize("env_id", TOOL_ENV_IDS)
def test_every_env_accepts_a_budget_and_shows_the_tracker(env_id: str) -> None:
    env = gym.make(env_id, budget={"calls": 4, "tokens": 10_000})
    obs, info = env.reset(seed=3)
    assert "[budget] calls 4 of 4 left" in obs
    assert info["budget"]["calls"] == {"limit": 4.0, "used": 0.0, "remaining": 4.0}
    name = info["tools"][0]["function"]["name"]
    obs, _, _, _, info = env.step(call(name))
    assert info["budget"]["calls"]["used"] == 1.0
    assert "[budget] calls 3 of 4 left" in obs
    assert info["budget"]["tokens"]["used"] == count_tokens(call(name))


@pytest.mark.parametrize("env_id", TOOL_ENV_IDS)
def test_tracker_can_be_switched_off(env_id: str) -> None:
    env = gym.make(env_id, budget={"calls": 4, "tracker": False})
    obs, info = env.reset(seed=3)
    assert "[budget]" not in obs
    obs, _, _, _, info = env.step("thinking")
    assert "[budget]" not in obs and info["budget"]["calls"]["remaining"] == 4.0


def test_calls_budget_refuses_and_truncates_with_a_clear_message() -> None:
    env = PricedEnv(budget={"calls": 1})
    env.reset(seed=0)
    obs, _, term, trunc, info = env.step(call("lookup", key="k"))
    assert not term and not trunc and info["budget"]["calls"]["remaining"] == 0.0
    obs, reward, term, trunc, info = env.step(call("lookup", key="k"))
    assert trunc and not term
    assert info["tool_calls"][0]["error_kind"] == "budget_exhausted"
    assert "Budget exhausted (calls budget exhausted" in obs
    assert info["reward_components"]["success"] == 0.0  # scored at truncation
    assert info["budget"]["calls"]["used"] == 1.0  # the refused call is not charged


def test_answer_after_spending_the_last_call_still_counts() -> None:
    env = PricedEnv(budget={"calls": 2})
    env.reset(seed=0)
    env.step(call("lookup", key="k"))
    env.step(call("premium", key="k"))
    _, reward, term, trunc, _ = env.step("<answer>value-of-k</answer>")
    assert term and not trunc and reward == 1.0


def test_prices_and_latencies_come_from_annotations() -> None:
    env = PricedEnv(budget={"cost": 10.0, "time": 100.0})
    env.reset(seed=0)
    _, _, _, _, info = env.step(call("lookup", key="k") + call("premium", key="k"))
    assert [r["cost"] for r in info["tool_calls"]] == [0.1, 0.5]
    assert info["budget"]["cost"]["used"] == pytest.approx(0.6)
    assert info["budget"]["time"]["used"] == pytest.approx(7.0)
    assert info["budget"]["time"]["remaining"] == pytest.approx(93.0)


def test_price_table_overrides_annotations() -> None:
    env = PricedEnv(budget={"cost": 1.0, "prices": {"premium": 0.75}, "latencies": {"lookup": 1.5}})
    env.reset(seed=0)
    _, _, _, _, info = env.step(call("premium", key="k") + call("lookup", key="k"))
    assert [r["cost"] for r in info["tool_calls"]] == [0.75, 0.1]
    assert info["budget"]["time"]["used"] == pytest.approx(6.5)


def test_cost_budget_refuses_a_call_it_cannot_pay_for() -> None:
    env = PricedEnv(budget={"cost": 0.55})
    env.reset(seed=0)
    _, _, _, trunc, info = env.step(call("premium", key="k"))
    assert not trunc
    obs, _, _, trunc, info = env.step(call("premium", key="k"))
    assert trunc and "cost budget exhausted" in obs
    assert info["budget"]["cost"]["used"] == pytest.approx(0.5)


def test_scheduled_price_change_is_an_event_and_is_charged() -> None:
    env = PricedEnv(budget={"price_changes": [{"step": 2, "tool": "lookup", "price": 0.3}]})
    env.reset(seed=0)
    _, _, _, _, info = env.step(call("lookup", key="k"))
    assert info["budget"]["events"] == [] and info["tool_calls"][0]["cost"] == 0.1
    obs, _, _, _, info = env.step(call("lookup", key="k"))
    assert info["budget"]["events"][0] | {"old": 0.1} == {
        "kind": "price_change",
        "tool": "lookup",
        "step": 2,
        "old": 0.1,
        "new": 0.3,
        "source": "schedule",
    }
    assert info["tool_calls"][0]["cost"] == 0.3
    assert info["budget"]["cost"]["used"] == pytest.approx(0.4)
    assert "cost used $0.4" in obs  # no cost limit: the tracker shows what was spent


def test_token_budget_counts_the_actions_and_truncates() -> None:
    long_action = "thinking " * 30
    env = PricedEnv(budget={"tokens": 50})
    env.reset(seed=0)
    _, _, _, trunc, info = env.step(long_action)
    assert not trunc and info["budget"]["tokens"]["used"] == 30
    obs, _, _, trunc, info = env.step(long_action + call("lookup", key="k"))
    assert trunc and "tokens budget exhausted" in obs
    assert info["tool_calls"][0]["error_kind"] == "budget_exhausted"  # over budget: the call does not run


def test_time_budget_uses_the_virtual_clock() -> None:
    env = PricedEnv(budget={"time": 6.0})
    env.reset(seed=0)
    _, _, _, trunc, info = env.step(call("premium", key="k"))
    assert not trunc and info["budget"]["time"]["remaining"] == pytest.approx(1.0)
    obs, _, _, trunc, _ = env.step(call("lookup", key="k"))
    assert trunc and "time budget exhausted" in obs


def test_wrapper_form_matches_the_keyword() -> None:
    by_kwarg = gym.make("toolgym/Calendar-v0", budget={"calls": 2, "cost": 3.0})
    wrapped = BudgetWrapper(gym.make("toolgym/Calendar-v0"), calls=2, cost=3.0)
    results = []
    for env in (by_kwarg, wrapped):
        obs, _ = env.reset(seed=5)
        steps = [env.step(a) for a in env.unwrapped.task.gold_actions[:3]]
        results.append((obs, [(s[0], s[2], s[3], s[4]["budget"]) for s in steps]))
    assert results[0] == results[1]


def test_budget_survives_fork_exactly() -> None:
    env = PricedEnv(budget={"calls": 3, "cost": 2.0, "tokens": 200, "time": 50.0})
    env.reset(seed=0)
    env.step(call("lookup", key="k"))
    snapshot = env.get_state()
    first = [env.step(a) for a in (call("premium", key="k"), call("premium", key="k"), call("lookup", key="k"))]
    env.set_state(snapshot)
    second = [env.step(a) for a in (call("premium", key="k"), call("premium", key="k"), call("lookup", key="k"))]
    assert first == second
    assert first[-1][3]  # the third call in the branch exhausts the call budget


@pytest.mark.parametrize(
    "config, message",
    [
        ({"calls": -1}, "non-negative"),
        ({"money": 3}, "unknown budget keys"),
        ({"prices": {"x": "cheap"}}, "non-negative number"),
        ({"price_changes": [{"step": 0, "tool": "x", "price": 1}]}, "step must be an int >= 1"),
    ],
)
def test_bad_budget_config_is_a_clear_error(config: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BudgetConfig.from_dict(config)
