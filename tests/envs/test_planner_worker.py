"""toolgym/PlannerWorker-v0: worker sub-episodes opened by the planner's worker calls (MATPO's env side)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import toolgym  # noqa: F401

ENV = "toolgym/PlannerWorker-v0"


def delegate(subtask: str) -> str:
    return '<tool_call>{"name": "worker", "arguments": ' + json.dumps({"subtask": subtask}) + "}</tool_call>"


def calc(expression: str) -> str:
    return '<tool_call>{"name": "calculator", "arguments": ' + json.dumps({"expression": expression}) + "}</tool_call>"


def test_gold_walk_switches_roles_and_the_planner_is_scored() -> None:
    env = gym.make(ENV)
    obs, info = env.reset(seed=3)
    task = env.unwrapped.task
    assert obs == task.instruction and info["role"] == "planner"
    assert [t["function"]["name"] for t in info["tools"]] == ["worker", "calculator"]
    assert task.gold_actions[0] == delegate(task.metadata["expression"])  # a short subtask to delegate
    roles = []
    for action in task.gold_actions:
        obs, reward, terminated, truncated, info = env.step(action)
        roles.append((info["role"], info["context"]))
    assert roles == [("worker", "new"), ("worker", "continue"), ("planner", "resume"), ("planner", "continue")]
    assert terminated and not truncated and reward == 1.0
    assert info["reward_components"]["success"] == 1.0


def test_worker_context_and_answer_hand_back() -> None:
    env = gym.make(ENV)
    env.reset(seed=5)
    obs, _, _, _, info = env.step(delegate("What is 6 * 7?"))
    assert "Subtask: What is 6 * 7?" in obs and info["subtask"] == "What is 6 * 7?"
    assert [t["function"]["name"] for t in info["tools"]] == ["calculator"]  # the worker has the env's tools
    assert env.step(calc("6 * 7"))[0] == "<tool_response>42</tool_response>"
    obs, reward, terminated, truncated, info = env.step("<answer>42</answer>")
    assert obs == "<tool_response>42</tool_response>" and not (terminated or truncated)
    (record,) = info["tool_calls"]
    assert record["name"] == "worker" and record["ok"] and record["result"] == "42"
    assert info["messages"][-1] == {"role": "tool", "tool_call_id": record["id"], "content": "42"}


def test_silent_worker_and_mixed_turn_become_error_responses() -> None:
    env = gym.make(ENV, max_worker_turns=2)
    env.reset(seed=5)
    env.step(delegate("x") + calc("1 + 1"))
    env.step("thinking")
    obs, _, _, _, info = env.step("still thinking")
    assert info["context"] == "resume"
    assert obs == (
        "<tool_response>Error (execution_error): the worker gave no answer in 2 turns</tool_response>\n"
        "<tool_response>Error (not_run): a turn that calls the worker runs only its worker calls</tool_response>"
    )


def test_two_worker_calls_open_two_sub_episodes_in_turn() -> None:
    env = gym.make(ENV)
    env.reset(seed=5)
    assert env.step(delegate("a") + delegate("b"))[4]["subtask"] == "a"
    _, _, _, _, info = env.step("<answer>1</answer>")
    assert (info["context"], info["subtask"]) == ("new", "b")
    obs, _, _, _, info = env.step("<answer>2</answer>")
    assert info["context"] == "resume" and obs == "<tool_response>1</tool_response>\n<tool_response>2</tool_response>"


def test_planner_turn_limit_truncates() -> None:
    env = gym.make(ENV, max_planner_turns=2)
    env.reset(seed=5)
    env.step(delegate("a"))
    assert env.step("<answer>1</answer>")[3] is False
    env.step(delegate("b"))
    assert env.step("<answer>1</answer>")[3] is True


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="wrap itself"):
        gym.make(ENV, env_id=ENV)
    with pytest.raises(ValueError, match="at least 1"):
        gym.make(ENV, max_worker_turns=0)
