"""CPU time per environment step: toolgym against GEM and SkyRL-Gym on the peers' scripted episode.

The episode (from ../shared/reference/peers.md): a problem "((a+b)*c)-d", three calculator calls,
then the answer — four steps. Every library parses the same Hermes `<tool_call>` text and evaluates
with the same arithmetic function; toolgym additionally validates the arguments against the tool's
JSON Schema and writes its full info records. Libraries that are not installed are skipped.
"floor" is the contract written inline with no env object (see `run_contract_floor`): what any
implementation pays for parsing, validating and writing the records, the question given.
Run: `OMP_NUM_THREADS=1 python bench/env_step.py [--episodes 500] [--rounds 5]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import toolgym  # noqa: F401
from toolgym.envs.calculator import evaluate_expression

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
Episode = tuple[str, list[str], str]


def scripted_episodes(count: int) -> list[Episode]:
    """(question, four actions, answer) for `count` random problems."""
    rng = random.Random(0)
    episodes = []
    for _ in range(count):
        a, b, c, d = (rng.randint(1, 99) for _ in range(4))
        s, p = a + b, (a + b) * c
        calls = [f"{a} + {b}", f"{s} * {c}", f"{p} - {d}"]
        actions = [
            f"<tool_call>{json.dumps({'name': 'calculator', 'arguments': {'expression': e}})}</tool_call>"
            for e in calls
        ]
        episodes.append((f"What is (({a} + {b}) * {c}) - {d}?", [*actions, f"<answer>{p - d}</answer>"], str(p - d)))
    return episodes


def calculator_response(action: str) -> str | None:
    """Parse a Hermes call and answer it (the peers' tool body: same parsing, same arithmetic)."""
    match = _CALL.search(action)
    if match is None:
        return None
    payload = json.loads(match.group(1))
    return f"<tool_response>{evaluate_expression(payload['arguments']['expression'])}</tool_response>"


def run_toolgym(episodes: list[Episode]) -> int:
    env = gym.make("toolgym/Calculator-v0")
    env.reset(seed=0)
    steps = 0
    for _, actions, _ in episodes:
        env.reset()
        for action in actions:
            env.step(action)
            steps += 1
    return steps


def run_contract_floor(episodes: list[Episode]) -> int:
    """The least work toolgym's step contract asks for, written inline with no env object: parse the call,
    validate its arguments, evaluate, and write the tool-call record, the two OpenAI messages and the info
    dict. Not a library: the floor any implementation of the contract pays in CPython (question given)."""
    steps = 0
    for number, (question, actions, answer) in enumerate(episodes):
        episode_id = f"episode-{number}"
        messages: list[dict[str, Any]] = [{"role": "system", "content": "tools"}, {"role": "user", "content": question}]
        for turn, action in enumerate(actions, 1):
            match = _CALL.search(action)
            if match is not None:
                payload = json.loads(match.group(1))
                arguments = payload["arguments"]
                if (
                    type(arguments) is not dict
                    or set(arguments) != {"expression"}
                    or type(arguments["expression"]) is not str
                ):
                    raise ValueError("invalid arguments")
                result = str(evaluate_expression(arguments["expression"]))
                call_id = f"call_{turn}_0"
                record = {"id": call_id, "name": payload["name"], "arguments": arguments, "ok": True, "result": result}
                function = {"name": payload["name"], "arguments": json.dumps(arguments)}
                step = [
                    {
                        "role": "assistant",
                        "content": action,
                        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
                    },
                    {"role": "tool", "tool_call_id": call_id, "content": result},
                ]
                records, components = [record], {}
            else:
                given = _ANSWER.search(action)
                components = {"success": float(given is not None and given.group(1).strip() == answer)}
                step, records = [{"role": "assistant", "content": action}], []
            info = {"messages": step, "tool_calls": records, "reward_components": components, "turn": turn}
            info.update(budget={}, faults=[], episode_id=episode_id)
            messages.extend(step)
            steps += 1
    return steps


def make_gem_runner() -> Callable[[list[Episode]], int] | None:
    try:
        from gem.core import Env as GemEnv
        from gem.tools.base_tool import BaseTool
        from gem.tools.tool_env_wrapper import ToolEnvWrapper
    except ImportError:
        return None

    class ArithmeticEnv(GemEnv):  # type: ignore[misc]
        def __init__(self) -> None:
            self.question, self.answer = "", ""

        def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
            super().reset(seed)
            return self.question, {}

        def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
            match = _ANSWER.search(action)
            reward = float(match is not None and match.group(1).strip() == self.answer)
            return "", reward, True, False, {}

    class CalculatorTool(BaseTool):  # type: ignore[misc]
        tool_type = "calculator"

        def instruction_string(self) -> str:
            return 'calculator: <tool_call>{"name": "calculator", "arguments": {"expression": ...}}</tool_call>'

        def execute_action(self, action: str) -> tuple[bool, bool, str, str]:
            response = calculator_response(action)
            return (response is not None, False, response or "", action)

    def run(episodes: list[Episode]) -> int:
        base = ArithmeticEnv()
        env = ToolEnvWrapper(base, tools=[CalculatorTool()], max_tool_uses=10)
        steps = 0
        for question, actions, answer in episodes:
            base.question, base.answer = question, answer
            env.reset()
            for action in actions:
                env.step(action)
                steps += 1
        return steps

    return run


def make_skyrl_runner() -> Callable[[list[Episode]], int] | None:
    try:
        from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput
        from skyrl_gym.tools.core import ToolGroup
        from skyrl_gym.tools.core import tool as skyrl_tool
    except ImportError:
        return None

    class CalculatorGroup(ToolGroup):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(name="calc")

        @skyrl_tool
        def calculator(self, expression: str) -> str:
            return str(evaluate_expression(expression))

    class ArithmeticEnv(BaseTextEnv):  # type: ignore[misc]
        def __init__(self, answer: str) -> None:
            super().__init__()
            self.answer, self.max_turns = answer, 8
            self.init_tool_groups([CalculatorGroup()])

        def step(self, action: str) -> BaseTextEnvStepOutput:
            self.turns += 1
            match = _CALL.search(action)
            if match is not None:
                payload = json.loads(match.group(1))
                out = self._execute_tool("calc", payload["name"], [payload["arguments"]["expression"]])
                observation = [{"role": "user", "content": f"<tool_response>{out}</tool_response>"}]
                return BaseTextEnvStepOutput(observations=observation, reward=0.0, done=False, metadata={})
            answer = _ANSWER.search(action)
            reward = float(answer is not None and answer.group(1).strip() == self.answer)
            return BaseTextEnvStepOutput(observations=[], reward=reward, done=True, metadata={})

    def run(episodes: list[Episode]) -> int:
        steps = 0
        for question, actions, answer in episodes:
            env = ArithmeticEnv(answer)
            env.init([{"role": "user", "content": question}])
            for action in actions:
                env.step(action)
                steps += 1
        return steps

    return run


def cpu_per_step(run: Callable[[list[Episode]], int], episodes: list[Episode], rounds: int) -> float:
    """Best-of-`rounds` CPU seconds per step (the minimum is the least disturbed measurement)."""
    best = float("inf")
    for _ in range(rounds):
        evaluate_expression.cache_clear()
        started = time.process_time()
        steps = run(episodes)
        best = min(best, (time.process_time() - started) / steps)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    episodes = scripted_episodes(args.episodes)
    runners: dict[str, Callable[[list[Episode]], int] | None] = {
        "toolgym": run_toolgym,
        "floor": run_contract_floor,
        "gem": make_gem_runner(),
        "skyrl-gym": make_skyrl_runner(),
    }
    for runner in runners.values():
        if runner is not None:
            runner(episodes[:20])  # warm-up
    results = {name: cpu_per_step(r, episodes, args.rounds) for name, r in runners.items() if r is not None}
    for name, seconds in results.items():
        print(f"{name:10s} {seconds * 1e6:8.1f} µs CPU/step  ({1 / seconds:,.0f} steps per CPU-second)")
    if "gem" in results:
        print(f"ratio contract floor/gem: {results['floor'] / results['gem']:.2f}  (the least the contract costs)")
    for name in ("gem", "skyrl-gym"):
        if name in results:
            print(f"ratio toolgym/{name}: {results['toolgym'] / results[name]:.2f}  (target for gem: <= 1.0)")
        else:
            print(
                f"{name}: not installed in this interpreter — skipped (pip install {'gem-llm' if name == 'gem' else name})"
            )


if __name__ == "__main__":
    main()
