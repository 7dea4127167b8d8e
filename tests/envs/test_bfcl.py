"""BFCL-MultiTurn-v0: every shipped entry's ground truth scores 1.0, and verdicts agree with BFCL's own checker."""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

import gymnasium as gym
import pytest

import toolgym  # noqa: F401
from toolgym.envs.parsing import parse_action

pytest.importorskip("bfcl_eval", reason="needs the bfcl extra")

from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker  # noqa: E402

from toolgym.envs import bfcl_data  # noqa: E402
from toolgym.envs.bfcl import BFCLMultiTurnEnv  # noqa: E402

ENV_ID = "toolgym/BFCL-MultiTurn-v0"


def _env(**kwargs: Any) -> BFCLMultiTurnEnv:
    env = gym.make(ENV_ID, **kwargs).unwrapped
    assert isinstance(env, BFCLMultiTurnEnv)
    return env


def _play(env: BFCLMultiTurnEnv, task_id: str, actions: list[str]) -> tuple[float, dict[str, Any], bool]:
    env.reset(seed=0, options={"task_id": task_id})
    total, info, terminated = 0.0, {}, False
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            break
    return total, info, terminated


def test_every_shipped_entry_replays_its_ground_truth_to_one() -> None:
    env = _env()
    tasks = env.tasks
    assert len(tasks) == sum(len(bfcl_data.entries(c)) for c in bfcl_data.CATEGORIES) == 800
    failed = []
    for task in tasks:
        total, info, terminated = _play(env, task.id, task.gold_actions)
        if not (terminated and total == 1.0):
            failed.append((task.id, info.get("evaluation")))
    assert failed == []


def _call_string(name: str, arguments: dict[str, Any]) -> str:
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


def _perturb(task_gold: list[str], seed: int) -> list[str]:
    """Drop one call of one turn (chosen by `seed`) from the gold actions."""
    call_actions = [i for i, a in enumerate(task_gold) if parse_action(a).calls]
    index = call_actions[seed % len(call_actions)]
    calls = parse_action(task_gold[index]).calls
    kept = [c for j, c in enumerate(calls) if j != seed % len(calls)]
    blocks = "".join(f"<tool_call>{json.dumps({'name': c.name, 'arguments': c.arguments})}</tool_call>" for c in kept)
    return [*task_gold[:index], *([blocks] if blocks else []), *task_gold[index + 1 :]]


@pytest.mark.parametrize("category", bfcl_data.CATEGORIES)
def test_verdicts_agree_with_bfcl_multi_turn_checker(category: str) -> None:
    env = _env(categories=[category])
    agreed, failing = 0, 0
    for number, task in enumerate(env.tasks[:12]):
        actions = _perturb(task.gold_actions, number)
        total, _, _ = _play(env, task.id, actions)
        turns: list[list[list[str]]] = [[] for _ in task.metadata["ground_truth"]]
        for call in env._calls:
            turns[call["turn"]].append(_call_string(call["name"], call["arguments"]))
        decoded = [[calls] if calls else [] for calls in turns]
        entry = copy.deepcopy(bfcl_data.entry(task.id))
        truth = entry.pop("ground_truth")
        verdict = multi_turn_checker(decoded, truth, entry, category, f"toolgym_diff_{category}_{number}")
        assert verdict["valid"] == (total == 1.0), (task.id, verdict.get("error_type"))
        agreed += 1
        failing += int(not verdict["valid"])
    assert agreed == 12 and failing >= 6  # most perturbations must really break the entry


def test_missed_function_appears_at_its_turn_and_turns_advance() -> None:
    env = _env(categories=["multi_turn_miss_func"])
    task = next(t for t in env.tasks if t.id == "multi_turn_miss_func_0")
    obs, info = env.reset(options={"task_id": task.id})
    assert obs == task.instruction and "sort" not in {t["function"]["name"] for t in info["tools"]}
    assert "cp" not in {t["function"]["name"] for t in info["tools"]}  # excluded_function
    revealed = None
    for action in task.gold_actions:
        obs, _, terminated, _, info = env.step(action)
        if "tools" in info:
            revealed = (obs, {t["function"]["name"] for t in info["tools"]})
        if terminated:
            break
    assert revealed is not None and "sort" in revealed[1] and "sort" in revealed[0]
    assert info["evaluation"]["valid"] and len(info["evaluation"]["turns"]) == len(task.metadata["ground_truth"])


def test_text_ends_a_turn_and_wrong_or_early_endings_score_zero() -> None:
    env = _env(categories=["multi_turn_base"])
    task = env.tasks[0]
    obs, _ = env.reset(options={"task_id": task.id})
    obs, reward, terminated, _, info = env.step("Done.")  # turn 0 skipped: no calls
    second_question = bfcl_data.entry(task.id)["question"][1][0]["content"]
    assert obs == second_question and not terminated and info["messages"][1]["role"] == "user"
    assert info["turn_check"]["error_type"] == "multi_turn:empty_turn_model_response"
    _, reward, terminated, _, info = env.step("<answer>bye</answer>")
    assert terminated and reward == 0.0
    errors = [info["evaluation"]["turns"][0]["error_type"], info["evaluation"]["error"]["error_type"]]
    assert errors == ["multi_turn:empty_turn_model_response", "multi_turn:empty_turn_model_response"]
    total, info, _ = _play(env, task.id, [task.gold_actions[0], "<answer>stop early</answer>"])
    assert total == 0.0 and info["evaluation"]["turns"] == [{"turn": 0, "valid": True}]
    assert info["evaluation"]["error"]["error_type"] == "multi_turn:force_terminated"


def test_bad_arguments_are_observations_and_backend_errors_are_results() -> None:
    env = _env(categories=["multi_turn_base"])
    env.reset(options={"task_id": "multi_turn_base_0"})
    obs, reward, *_ = env.step('<tool_call>{"name": "cd", "arguments": {"nope": 1}}</tool_call>')
    assert "invalid_arguments" in obs and reward < 0
    obs, *_ = env.step('<tool_call>{"name": "cd", "arguments": {"folder": "no_such_dir"}}</tool_call>')
    assert "error" in obs.lower() and env._results  # BFCL's error payload, recorded for the response check


def test_fork_mid_entry_through_json() -> None:
    env = _env(categories=["multi_turn_long_context"])
    task = env.tasks[5]
    env.reset(seed=0, options={"task_id": task.id})
    half = len(task.gold_actions) // 2 + 1
    for action in task.gold_actions[:half]:
        env.step(action)
    state = json.loads(json.dumps(env.get_state()))
    fork = _env(categories=["multi_turn_long_context"])
    fork.set_state(copy.deepcopy(state))
    rest_fork = [fork.step(a) for a in task.gold_actions[half:]]
    rest = [env.step(a) for a in task.gold_actions[half:]]
    assert json.dumps(rest_fork, default=str) == json.dumps(rest, default=str)
    assert rest[-1][2] and rest[-1][1] == 1.0


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bfcl_eval", None)
    with pytest.raises(ImportError, match=r"toolgym\[bfcl\]"):
        BFCLMultiTurnEnv()
    with pytest.raises(ValueError, match="categories"):
        monkeypatch.undo()
        BFCLMultiTurnEnv(categories=["simple_python"])
