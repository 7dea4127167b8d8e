"""CodeInterpreter-v0: gold code run in the real sandbox gives the exact answers; persistence, limits, fork."""

from __future__ import annotations

import copy
import json
import warnings
from typing import Any

import gymnasium as gym
import pytest

import toolgym  # noqa: F401
from toolgym.envs.code_interpreter import CodeInterpreterEnv, answers_match
from toolgym.envs.code_tasks import KINDS, python_call
from toolgym.simulators.sandbox import available_backends

ENV_ID = "toolgym/CodeInterpreter-v0"


def _env(**kwargs: Any) -> CodeInterpreterEnv:
    env = gym.make(ENV_ID, **kwargs).unwrapped
    assert isinstance(env, CodeInterpreterEnv)
    return env


def _call(env: CodeInterpreterEnv, code: str) -> tuple[str, dict[str, Any]]:
    obs, _, _, _, info = env.step(python_call(code))
    return obs, info


def test_gold_code_computes_every_kind_exactly_in_the_sandbox() -> None:
    env = _env()
    try:
        for index in range(2 * len(KINDS)):
            env.reset(seed=0, options={"task_id": f"code-{index}"})
            task = env.task
            obs, _, _, _, info = env.step(task.gold_actions[0])
            assert info["tool_calls"][0]["ok"], obs
            assert obs == f"<tool_response>{task.answer}</tool_response>", (task.id, obs)
            _, reward, terminated, _, _ = env.step(task.gold_actions[1])
            assert terminated and reward == 1.0
    finally:
        env.close()


def test_answers_are_checked_exactly() -> None:
    assert answers_match(" 12.50 ", "12.5") and answers_match("anvil", "anvil")
    assert not answers_match("12.51", "12.5") and not answers_match("Anvil", "anvil") and not answers_match("", "0")
    env = _env()
    env.reset(seed=0, options={"task_id": "code-3"})
    _, reward, terminated, _, _ = env.step(f"<answer>{int(env.task.answer) + 1}</answer>")
    assert terminated and reward == 0.0
    with pytest.raises(ValueError, match="code-"):
        env.reset(options={"task_id": "calc-1"})
    env.close()


def test_interpreter_state_and_files_persist_within_an_episode_only() -> None:
    env = _env()
    env.reset(seed=0, options={"task_id": "code-5"})
    assert _call(env, "x = 40")[0] == "<tool_response></tool_response>"
    assert _call(env, "x + 2")[0] == "<tool_response>42</tool_response>"
    assert "region,product" in _call(env, "print(open('sales.csv').read()[:14])")[0]
    env.reset(seed=0, options={"task_id": "code-5"})
    obs, info = _call(env, "x")
    assert not info["tool_calls"][0]["ok"] and "NameError" in obs
    env.close()


def test_errors_and_timeouts_are_observations_and_the_env_recovers() -> None:
    env = _env(limits={"wall_time": 1.0, "cpu_time": 1.0})
    env.reset(seed=0, options={"task_id": "code-0"})
    obs, info = _call(env, "while True:\n    pass")
    assert not info["tool_calls"][0]["ok"] and "timed out" in obs
    obs, info = _call(env, "open('/etc/shadow').read()")
    assert not info["tool_calls"][0]["ok"] and "Error" in obs
    obs, info = _call(env, "print(6 * 7)")
    assert obs == "<tool_response>42</tool_response>"
    obs, *_ = env.step('<tool_call>{"name": "python", "arguments": {"source": "1"}}</tool_call>')
    assert "invalid_arguments" in obs
    env.close()


def test_fork_replays_the_cells_into_a_fresh_interpreter() -> None:
    env = _env()
    env.reset(seed=0, options={"task_id": "code-6"})
    _call(env, "import csv\nrows = list(csv.DictReader(open('sales.csv')))\nn = len(rows)")
    state = json.loads(json.dumps(env.get_state()))
    fork = _env()
    fork.set_state(copy.deepcopy(state))
    assert _call(fork, "n")[0] == _call(env, "n")[0]
    assert fork.cells == env.cells
    fork.close()
    env.close()


def test_one_shot_mode_and_the_subprocess_fallback() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = _env(sandbox="subprocess", persistent=False)
    env.reset(seed=0, options={"task_id": "code-7"})
    _call(env, "y = 1")
    obs, info = _call(env, "print(len(open('sales.csv').readlines()) > 1); y")
    assert "True" in obs and "NameError" in obs and not info["tool_calls"][0]["ok"]
    obs, *_ = env.step(env.task.gold_actions[0])
    assert obs == f"<tool_response>{env.task.answer}</tool_response>" and env.sandbox.name == "subprocess"
    env.close()


@pytest.mark.skipif("bwrap" not in available_backends(), reason="bubblewrap does not work here")
def test_default_backend_is_bubblewrap_without_network() -> None:
    env = _env()
    assert env.sandbox.name == "bwrap"
    env.reset(seed=0, options={"task_id": "code-1"})
    code = "import socket\ns = socket.socket()\ns.settimeout(1)\ns.connect(('127.0.0.1', 22))"
    obs, info = _call(env, code)
    assert not info["tool_calls"][0]["ok"] and "Error" in obs
    env.close()
