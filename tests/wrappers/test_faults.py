"""Fault injection: every kind, its labels, seeded reproducibility, solvability and fork exactness."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest
from wrapper_helpers import TOOL_ENV_IDS, PricedEnv, call

from toolgym.envs.evaluation.policies import OraclePolicy
from toolgym.envs.wrappers import FaultWrapper
from toolgym.schemas import FaultEvent
from toolgym.simulators.faults import ALL_KINDS, FaultConfig

LABELS = {"kind", "tool", "step", "explicit", "transient", "detail"}


def only(tool: str, kind: str, permanent: float = 0.0, **extra: Any) -> dict[str, Any]:
    """A fault config that hits exactly `tool` with `kind` on every eligible call."""
    return {"rate": 0.0, "tools": {tool: {"rate": 1.0, "kinds": [kind], "permanent": permanent}}, **extra}


def play(env: gym.Env, seed: int, task_id: str | None = None) -> tuple[float, list[dict], list[str]]:
    """Run the recovering oracle; return the total reward, every fault event and every observation."""
    options = {"task_id": task_id} if task_id else None
    obs, info = env.reset(seed=seed, options=options)
    policy = OraclePolicy()
    policy.start(obs, info, env.unwrapped.task)
    events, observations, total, done = list(info["faults"]), [obs], 0.0, False
    while not done:
        obs, reward, term, trunc, info = env.step(policy.act(obs, info))
        events += info["faults"]
        observations.append(obs)
        total, done = total + reward, term or trunc
    return total, events, observations


@pytest.mark.parametrize("env_id", TOOL_ENV_IDS)
def test_every_env_accepts_faults_and_labels_events(env_id: str) -> None:
    env = gym.make(env_id, faults={"rate": 0.7, "seed": 1, "permanent": 0.5}, max_turns=30)
    events = []
    for seed in range(4):
        events += play(env, seed)[1]
    assert events, "a 70% fault rate must produce events"
    for item in events:
        assert set(item) == LABELS and item["kind"] in ALL_KINDS
        assert FaultEvent.model_validate(item).model_dump() == item
        assert isinstance(item["explicit"], bool) and isinstance(item["transient"], bool)
        assert item["explicit"] == (item["kind"] not in ("wrong_value", "garbage", "distractor"))


def test_env_checker_passes_with_budget_and_faults() -> None:
    from gymnasium.utils.env_checker import check_env

    env = gym.make("toolgym/Calendar-v0", budget={"calls": 5}, faults={"rate": 0.5, "seed": 2})
    check_env(env.unwrapped, skip_render_check=True)


def _schedule(faults: dict[str, Any], seeds: range) -> list[list[dict]]:
    env = gym.make("toolgym/Calendar-v0", faults=faults, max_turns=30)
    return [play(env, seed)[1] for seed in seeds]


def test_same_seed_same_schedule_and_different_seed_different_schedule() -> None:
    config = {"rate": 0.5, "seed": 42, "permanent": 0.3}
    first, second = _schedule(config, range(6)), _schedule(config, range(6))
    assert first == second and sum(map(len, first)) > 5
    other = _schedule({**config, "seed": 43}, range(6))
    assert other != first


def test_without_a_seed_the_schedule_follows_the_reset_seed() -> None:
    assert _schedule({"rate": 0.5}, range(3)) == _schedule({"rate": 0.5}, range(3))
    assert _schedule({"rate": 0.5}, range(3)) != _schedule({"rate": 0.5}, range(3, 6))


def test_http_error_transient_then_retry_works() -> None:
    env = PricedEnv(faults=only("lookup", "http_error"))
    env.reset(seed=0)
    obs, _, _, _, info = env.step(call("lookup", key="k"))
    record = info["tool_calls"][0]
    payload = json.loads(record["error"])
    assert record["error_kind"] == "http_error" and payload["status"] in (409, 500, 502, 503)
    assert info["faults"] == [
        {
            "kind": "http_error",
            "tool": "lookup",
            "step": 1,
            "explicit": True,
            "transient": True,
            "detail": info["faults"][0]["detail"],
        }
    ]
    _, _, _, _, info = env.step(call("lookup", key="k"))  # solvable: the retry of a transient fault is clean
    assert info["tool_calls"][0]["result"] == "value-of-k" and info["faults"] == []


def test_http_error_permanent_holds_for_the_rest_of_the_episode() -> None:
    env = PricedEnv(faults=only("lookup", "http_error", permanent=1.0, solvable=False))
    env.reset(seed=0)
    for step in range(1, 4):
        _, _, _, _, info = env.step(call("lookup", key="k"))
        assert json.loads(info["tool_calls"][0]["error"])["status"] in (403, 410, 501)
        assert info["faults"][0]["transient"] is False and info["faults"][0]["step"] == step
    _, _, _, _, info = env.step(call("premium", key="k"))
    assert info["tool_calls"][0]["ok"]  # other tools are unaffected


def test_solvable_turns_permanent_faults_on_required_tools_transient() -> None:
    env = PricedEnv(faults=only("lookup", "http_error", permanent=1.0))
    env.reset(seed=0)
    _, _, _, _, info = env.step(call("lookup", key="k"))
    assert info["faults"][0]["transient"] is True


def test_timeout_costs_virtual_time_and_can_exhaust_the_time_budget() -> None:
    env = PricedEnv(faults=only("premium", "timeout", timeout_s=30.0), budget={"time": 20.0})
    env.reset(seed=0)
    obs, _, _, trunc, info = env.step(call("premium", key="k"))
    assert info["tool_calls"][0]["error_kind"] == "timeout" and info["tool_calls"][0]["latency"] == 35.0
    assert info["faults"][0]["kind"] == "timeout"
    assert trunc and "time budget exhausted" in obs


def test_rate_limit_gives_retry_after_and_lifts_on_the_virtual_clock() -> None:
    env = PricedEnv(faults=only("lookup", "rate_limit"))
    env.reset(seed=0)
    _, _, _, _, info = env.step(call("lookup", key="k") + call("lookup", key="k"))
    first, second = (json.loads(r["error"]) for r in info["tool_calls"])
    assert first["status"] == 429 and first["retry_after"] in (1, 2)
    assert second["status"] == 429  # still inside the window within the same turn
    waited = 0
    while not info["tool_calls"][0]["ok"]:
        _, _, _, _, info = env.step(call("lookup", key="k"))
        waited += 1
    assert 1 <= waited <= first["retry_after"]


def test_wrong_value_is_silent_and_schema_valid() -> None:
    env = PricedEnv(faults=only("premium", "wrong_value", solvable=False))
    env.reset(seed=0)
    _, _, _, _, info = env.step(call("premium", key="k"))
    record, truth = info["tool_calls"][0], {"key": "k", "score": 7, "tags": ["a", "b"]}
    assert record["ok"] and record["result"] != truth
    assert {k: type(v) for k, v in record["result"].items()} == {k: type(v) for k, v in truth.items()}
    assert info["faults"][0]["explicit"] is False and info["faults"][0]["kind"] == "wrong_value"


def test_garbage_output_is_implicit() -> None:
    env = PricedEnv(faults=only("premium", "garbage", solvable=False))
    env.reset(seed=0)
    _, _, _, _, info = env.step(call("premium", key="k"))
    assert info["tool_calls"][0]["ok"] and isinstance(info["tool_calls"][0]["result"], str)
    assert info["faults"][0]["kind"] == "garbage" and not info["faults"][0]["explicit"]


def test_solvable_keeps_silent_corruption_off_the_gold_path() -> None:
    env = PricedEnv(faults=only("premium", "wrong_value"))
    env.reset(seed=0)
    _, _, _, _, info = env.step(call("premium", key="k"))
    assert info["tool_calls"][0]["result"] == {"key": "k", "score": 7, "tags": ["a", "b"]} and info["faults"] == []


def test_permanent_price_change_is_announced_and_charged() -> None:
    env = PricedEnv(faults=only("lookup", "price_change", permanent=1.0), budget={"cost": 5.0})
    env.reset(seed=0)
    obs, _, _, _, info = env.step(call("lookup", key="k"))
    new = info["faults"][0]["detail"]["new"]
    assert info["faults"][0]["detail"]["old"] == 0.1 and new in (0.2, 0.3, 0.5)
    assert "Notice: the price of lookup changed" in obs
    assert info["budget"]["cost"]["used"] == pytest.approx(new)
    _, _, _, _, info = env.step(call("lookup", key="k"))  # solvable guard: no new fault; the price stays
    assert info["tool_calls"][0]["cost"] == pytest.approx(new) and info["budget"]["cost"]["used"] == pytest.approx(
        2 * new
    )


def _drifted_env(permanent: float) -> tuple[PricedEnv, dict, dict]:
    env = PricedEnv(faults=only("premium", "schema_drift", permanent=permanent))
    _, info = env.reset(seed=0)
    return env, info, info["faults"][0]


def test_schema_drift_renames_with_a_deprecation_message_on_the_old_name() -> None:
    env, info, drift = _drifted_env(permanent=1.0)
    assert drift["kind"] == "schema_drift" and drift["step"] == 0 and not drift["transient"]
    new_name = drift["detail"]["renamed_to"]
    params = drift["detail"]["renamed_parameters"]
    assert new_name in [t["function"]["name"] for t in info["tools"]]
    _, _, _, _, step = env.step(call("premium", key="k"))
    payload = json.loads(step["tool_calls"][0]["error"])
    assert step["tool_calls"][0]["error_kind"] == "deprecated" and "deprecated" in payload["message"] or params
    assert payload["replacement"] == new_name and payload["renamed_parameters"] == params
    _, _, _, _, step = env.step(call(new_name, **{params.get("key", "key"): "k"}))
    assert step["tool_calls"][0]["ok"] and step["tool_calls"][0]["result"]["key"] == "k"


def test_unknown_tool_message_lists_the_drifted_names_only() -> None:
    env = PricedEnv(faults=only("premium", "schema_drift", permanent=1.0, seed=3))
    _, info = env.reset(seed=0)
    visible = sorted(t["function"]["name"] for t in info["tools"])
    _, _, _, _, step = env.step(call("nonexistent", key="k"))
    assert step["tool_calls"][0]["error_kind"] == "unknown_tool"
    assert step["tool_calls"][0]["error"].endswith(", ".join(visible))


def test_drift_covers_tool_and_parameter_renames() -> None:
    forms = set()
    for seed in range(12):
        env = PricedEnv(faults=only("premium", "schema_drift", permanent=1.0, seed=seed))
        _, info = env.reset(seed=0)
        detail = info["faults"][0]["detail"]
        forms.add("param" if detail["renamed_parameters"] else "tool")
        if detail["renamed_parameters"]:
            spec = next(t["function"] for t in info["tools"] if t["function"]["name"] == "premium")
            assert list(spec["parameters"]["properties"]) == list(detail["renamed_parameters"].values())
    assert forms == {"param", "tool"}


def test_transient_drift_still_accepts_the_old_name_with_a_warning() -> None:
    env, _, drift = _drifted_env(permanent=0.0)
    assert drift["transient"]
    obs, _, _, _, info = env.step(call("premium", key="k"))
    assert info["tool_calls"][0]["ok"] and "Warning:" in obs and "deprecated" in obs
    assert info["faults"][0]["kind"] == "schema_drift"


def test_missing_tool_permanent_is_hidden_and_unavailable() -> None:
    env = PricedEnv(faults=only("premium", "missing_tool", permanent=1.0, solvable=False))
    _, info = env.reset(seed=0)
    assert [t["function"]["name"] for t in info["tools"]] == ["lookup"]
    _, _, _, _, info = env.step(call("premium", key="k"))
    assert info["tool_calls"][0]["error_kind"] == "unavailable"
    assert info["faults"][0]["kind"] == "missing_tool" and not info["faults"][0]["transient"]


def test_missing_required_tool_under_solvable_comes_back() -> None:
    env = PricedEnv(faults=only("premium", "missing_tool", permanent=1.0))
    _, info = env.reset(seed=0)
    assert info["faults"][0]["transient"] and "premium" in [t["function"]["name"] for t in info["tools"]]
    outcomes = [env.step(call("premium", key="k"))[4]["tool_calls"][0]["ok"] for _ in range(3)]
    assert outcomes[0] is False and outcomes[-1] is True


def test_distractor_is_a_near_duplicate_that_silently_does_nothing() -> None:
    env = PricedEnv(faults=only("premium", "distractor"))
    _, info = env.reset(seed=0)
    names = [t["function"]["name"] for t in info["tools"]]
    decoy = info["faults"][0]["detail"]["distractor"]
    assert names.index(decoy) == names.index("premium") + 1 and decoy.startswith("premium")
    decoy_spec = info["tools"][names.index(decoy)]["function"]
    assert decoy_spec["parameters"] == info["tools"][names.index("premium")]["function"]["parameters"]
    _, _, _, _, step = env.step(call(decoy, key="k"))
    assert step["tool_calls"][0]["ok"] and step["tool_calls"][0]["result"] == {}
    assert step["faults"][0] == {
        "kind": "distractor",
        "tool": decoy,
        "step": 1,
        "explicit": False,
        "transient": False,
        "detail": {"imitates": "premium"},
    }


def _world_env_ids() -> list[str]:
    ids = []
    for env_id in TOOL_ENV_IDS:
        env = gym.make(env_id, max_turns=40)
        env.reset(seed=0)
        if env.unwrapped.task.gold_actions and play(env, 0)[0] >= 1.0:
            ids.append(env_id)
    return ids


def test_solvable_keeps_a_path_to_success_on_the_world_tasks() -> None:
    ids = _world_env_ids()
    assert "toolgym/Calendar-v0" in ids
    for env_id in ids:
        env = gym.make(env_id, faults={"rate": 0.6, "permanent": 0.6, "solvable": True}, max_turns=60)
        results = [play(env, seed) for seed in range(10)]
        assert all(total >= 1.0 for total, _, _ in results), env_id
        assert sum(len(events) for _, events, _ in results) > 10


def test_without_solvable_permanent_faults_can_block_the_task() -> None:
    env = gym.make("toolgym/Calendar-v0", faults={"rate": 0.6, "permanent": 0.6, "solvable": False}, max_turns=60)
    assert any(play(env, seed)[0] < 1.0 for seed in range(15))


def test_fault_state_survives_fork_exactly() -> None:
    env = gym.make("toolgym/Calendar-v0", faults={"rate": 0.6, "permanent": 0.4}, budget={"calls": 30})
    obs, info = env.reset(seed=7)
    policy = OraclePolicy()
    policy.start(obs, info, env.unwrapped.task)
    obs, *_, info = env.step(policy.act(obs, info))
    snapshot = json.loads(json.dumps(env.unwrapped.get_state()))
    actions = [
        "<tool_call>" + json.dumps({"name": "list_events", "arguments": {"day": d}}) + "</tool_call>" for d in range(5)
    ]
    first = [env.step(a) for a in actions]
    env.unwrapped.set_state(snapshot)
    second = [env.step(a) for a in actions]
    assert first == second and any(step[4]["faults"] for step in first)


def test_wrapper_form_matches_the_keyword() -> None:
    config = {"rate": 0.5, "seed": 9}
    by_kwarg = gym.make("toolgym/Calendar-v0", faults=config, max_turns=30)
    wrapped = FaultWrapper(gym.make("toolgym/Calendar-v0", max_turns=30), **config)
    assert [play(by_kwarg, s) for s in range(3)] == [play(wrapped, s) for s in range(3)]


@pytest.mark.parametrize(
    "config, message",
    [
        ({"rate": 1.5}, "between 0 and 1"),
        ({"kinds": ["meteor"]}, "unknown fault kinds"),
        ({"chaos": True}, "unknown faults keys"),
        ({"tools": {"x": {"speed": 1}}}, "must be a rate or a dict"),
        ({"seed": "abc"}, "must be an int"),
    ],
)
def test_bad_fault_config_is_a_clear_error(config: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FaultConfig.from_dict(config)
