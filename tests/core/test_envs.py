"""Every registered env: Gymnasium's checker, determinism, fork/resume, and the oracle."""

from __future__ import annotations

import copy
import importlib.util
import json
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import toolgym  # noqa: F401
from toolgym.envs.calendar import TASK_KINDS
from toolgym.envs.registration import ENV_IDS

INFO_KEYS = {"messages", "tool_calls", "reward_components", "turn", "budget", "faults", "episode_id"}
_OPTIONAL = {"toolgym/BFCL-MultiTurn-v0": "bfcl_eval"}
LOCAL_IDS = [
    i for i in ENV_IDS if i != "toolgym/Remote-v0" and (i not in _OPTIONAL or importlib.util.find_spec(_OPTIONAL[i]))
]


def _rollout(env_id: str, seed: int, actions: list[str] | None = None) -> list[Any]:
    env = gym.make(env_id)
    obs, info = env.reset(seed=seed)
    trace: list[Any] = [obs, info]
    actions = actions if actions is not None else list(env.unwrapped.task.gold_actions)
    for action in actions:
        step = env.step(action)
        trace.append(step)
        if step[2] or step[3]:
            break
    env.close()
    return trace


@pytest.mark.parametrize("env_id", LOCAL_IDS)
def test_check_env(env_id: str) -> None:
    env = gym.make(env_id)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("env_id", LOCAL_IDS)
def test_same_seed_same_actions_same_everything(env_id: str) -> None:
    first = _rollout(env_id, seed=7)
    second = _rollout(env_id, seed=7)
    assert json.dumps(first, default=str) == json.dumps(second, default=str)
    assert first[1]["episode_id"] == second[1]["episode_id"]


@pytest.mark.parametrize("env_id", LOCAL_IDS)
def test_info_has_the_documented_keys(env_id: str) -> None:
    env = gym.make(env_id)
    _, info = env.reset(seed=3)
    assert INFO_KEYS | {"tools"} <= set(info)
    assert all(t["type"] == "function" for t in info["tools"])
    _, _, _, _, step_info = env.step('<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>')
    assert INFO_KEYS <= set(step_info)
    record = step_info["tool_calls"][0]
    assert {"name", "arguments", "error", "cost", "latency"} <= set(record) and record["ok"] is False
    assert step_info["reward_components"]["invalid_call/unknown_tool"] < 0


@pytest.mark.parametrize("env_id", LOCAL_IDS)
def test_fork_at_every_step_continues_identically(env_id: str) -> None:
    env = gym.make(env_id).unwrapped
    env.reset(seed=11)
    actions = list(env.task.gold_actions)
    reference = _rollout(env_id, seed=11, actions=actions)
    for k in range(len(actions)):
        env.reset(seed=11)
        for action in actions[:k]:
            env.step(action)
        state = json.loads(json.dumps(env.get_state()))  # forks travel as JSON
        fork = gym.make(env_id).unwrapped
        fork.set_state(copy.deepcopy(state))
        tail = [fork.step(a) for a in actions[k:]]
        original_tail = [env.step(a) for a in actions[k:]]
        assert json.dumps(tail, default=str) == json.dumps(original_tail, default=str)
        assert json.dumps(tail, default=str) == json.dumps(reference[2 + k :], default=str)


@pytest.mark.parametrize("env_id", ["toolgym/Calculator-v0", "toolgym/Calendar-v0"])
def test_oracle_solves_at_least_99_percent(env_id: str) -> None:
    env = gym.make(env_id)
    solved = 0
    for seed in range(200):
        env.reset(seed=seed)
        reward, terminated = 0.0, False
        for action in env.unwrapped.task.gold_actions:
            _, reward, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        solved += int(terminated and reward == 1.0)
    assert solved / 200 >= 0.99


def test_tools_none_and_subset() -> None:
    env = gym.make("toolgym/Calendar-v0")
    _, info = env.reset(seed=0, options={"tools": "none"})
    assert info["tools"] == []
    obs, *_ = env.step('<tool_call>{"name": "list_people", "arguments": {}}</tool_call>')
    assert "unknown tool" in obs
    _, info = env.reset(seed=0, options={"tools": ["list_people"]})
    assert [t["function"]["name"] for t in info["tools"]] == ["list_people"]
    with pytest.raises(ValueError, match="unknown tools"):
        env.reset(seed=0, options={"tools": ["nope"]})


def test_task_selection_is_reproducible() -> None:
    env = gym.make("toolgym/Calculator-v0")
    a, _ = env.reset(seed=1, options={"task_id": "calc-42"})
    b, _ = env.reset(seed=2, options={"task_id": "calc-42"})
    assert a == b and env.unwrapped.task.id == "calc-42"
    with pytest.raises(ValueError, match="calc-"):
        env.reset(options={"task_id": "bogus"})


def test_malformed_and_unknown_calls_are_observations() -> None:
    env = gym.make("toolgym/Calculator-v0")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("<tool_call>{oops</tool_call>")
    assert "parse_error" in obs and not terminated and reward < 0
    assert info["reward_components"] == {"invalid_call/parse_error": -0.05}
    obs, *_ = env.step('<tool_call>{"name": "calculator", "arguments": {"expression": 5}}</tool_call>')
    assert "invalid_arguments" in obs
    obs, *_ = env.step('<tool_call>{"name": "calculator", "arguments": {"expression": "1/0"}}</tool_call>')
    assert "division by zero" in obs


def test_max_turns_truncates_and_step_after_end_raises() -> None:
    env = gym.make("toolgym/Calculator-v0", max_turns=2)
    env.reset(seed=0)
    assert env.step("hello")[3] is False
    obs, reward, terminated, truncated, info = env.step("hello again")
    assert truncated and not terminated and "Turn limit" in obs and info["reward_components"]["success"] == 0.0
    with pytest.raises(gym.error.ResetNeeded):
        env.unwrapped.step("more")


def test_wrong_answer_scores_zero_and_several_calls_per_turn() -> None:
    env = gym.make("toolgym/Calculator-v0")
    env.reset(seed=0, options={"task_id": "calc-5"})
    two = '<tool_call>{"name": "calculator", "arguments": {"expression": "2+2"}}</tool_call>' * 2
    obs, _, _, _, info = env.step(two)
    assert obs == "<tool_response>4</tool_response>\n<tool_response>4</tool_response>"
    assert [m["role"] for m in info["messages"]] == ["assistant", "tool", "tool"]
    assert len(info["messages"][0]["tool_calls"]) == 2
    _, reward, terminated, _, _ = env.step("<answer>-1</answer>")
    assert terminated and reward == 0.0


def test_openai_format_action_in_env() -> None:
    env = gym.make("toolgym/Calculator-v0")
    env.reset(seed=0)
    message = {
        "content": None,
        "tool_calls": [
            {"id": "abc", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'}}
        ],
    }
    obs, _, _, _, info = env.step(json.dumps(message))
    assert obs == "<tool_response>42</tool_response>" and info["tool_calls"][0]["id"] == "abc"
    assert info["messages"][1] == {"role": "tool", "tool_call_id": "abc", "content": "42"}


def test_calendar_refuses_double_booking() -> None:
    env = gym.make("toolgym/Calendar-v0")
    env.reset(seed=0)
    world = env.unwrapped.world
    event = next(iter(world["events"].values()))
    call = {
        "name": "create_event",
        "arguments": {
            "title": "Clash",
            "day": event["day"],
            "start": event["start"],
            "duration": 1,
            "attendees": event["attendees"][:1],
        },
    }
    obs, *_ = env.step(f"<tool_call>{json.dumps(call)}</tool_call>")
    assert "already busy" in obs
    _, reward, *_ = env.step("<answer>done</answer>")
    assert reward == 0.0 or env.unwrapped.task.instruction.startswith("Move")


def test_render_ansi() -> None:
    env = gym.make("toolgym/Calculator-v0", render_mode="ansi")
    env.reset(seed=0)
    assert "[user]" in env.render()


def test_tool_results_do_not_alias_the_world() -> None:
    env = gym.make("toolgym/Calendar-v0")
    env.reset(seed=0)
    event = next(iter(env.unwrapped.world["events"].values()))
    _, _, _, _, info = env.step(
        f'<tool_call>{{"name": "list_events", "arguments": {{"day": {event["day"]}}}}}</tool_call>'
    )
    listed = copy.deepcopy(info["tool_calls"][0]["result"])
    from toolgym.envs.calendar import free_starts

    day = (event["day"] + 1) % 5
    start = free_starts(env.unwrapped.world, event["attendees"], day, event["duration"], ignore=event["id"])[0]
    move = {"name": "move_event", "arguments": {"event_id": event["id"], "day": day, "start": start}}
    _, _, _, _, moved = env.step(f"<tool_call>{json.dumps(move)}</tool_call>")
    assert moved["tool_calls"][0]["ok"]
    assert info["tool_calls"][0]["result"] == listed


def test_calendar_world_shape_and_task_kinds() -> None:
    env = gym.make("toolgym/Calendar-v0", people=3, events=[2, 3], task_kinds=["cancel"])
    for seed in range(30):
        obs, _ = env.reset(seed=seed)
        world = env.unwrapped.task.metadata["world"]
        assert len(world["people"]) == 3 and 1 <= len(world["events"]) <= 3
        assert "out sick" in obs  # only cancel tasks
        for action in env.unwrapped.task.gold_actions:
            _, reward, terminated, _, _ = env.step(action)
        assert terminated and reward == 1.0
    default = gym.make("toolgym/Calendar-v0")
    default.reset(options={"task_id": "cal-7"})
    same = gym.make("toolgym/Calendar-v0", people=5, events=[6, 10], task_kinds=list(TASK_KINDS))
    same.reset(options={"task_id": "cal-7"})
    assert default.unwrapped.task == same.unwrapped.task  # the defaults are Calendar-v0's tasks


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"people": 1}, "people must be 2 to 10"),
        ({"events": [4, 2]}, "events must be"),
        ({"events": [3]}, "pair"),
        ({"task_kinds": ["lunch"]}, "subset of"),
        ({"task_kinds": []}, "non-empty"),
        ({"task_kinds": "cancel"}, "list of kinds"),
    ],
)
def test_calendar_rejects_a_bad_world_shape(kwargs: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        gym.make("toolgym/Calendar-v0", **kwargs)


def test_calculator_task_answers_are_the_expressions_values() -> None:
    """The generator tracks each problem's value as it writes it; it must agree with reading the text."""
    from toolgym.envs.calculator import evaluate_expression, make_calculator_task

    for index in range(3000):
        task = make_calculator_task(index)
        expression = task.metadata["expression"]
        assert task.answer == str(evaluate_expression(expression)), expression
        assert (
            task.gold_actions[0]
            == f"<tool_call>{json.dumps({'name': 'calculator', 'arguments': {'expression': expression}})}</tool_call>"
        )
