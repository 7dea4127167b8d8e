"""`toolgym/Calculator-v0`: arithmetic word problems solved with a `calculator` tool."""

from __future__ import annotations

import functools
import operator
import random
import re
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from toolgym.envs.core import ToolEnv
from toolgym.schemas import Task
from toolgym.simulators import Tool, ToolError, tool

_MAX_EXPRESSION = 200
_TEMPLATES = (
    "What is {e}?",
    "Compute {e}.",
    "Calculate the value of {e}.",
    "A shopkeeper's ledger needs the value of {e}. What is it?",
    "Evaluate {e} and give the result.",
)
_OPERATORS = ("+", "-", "*")


_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?|\.\d+)|(\*\*|//|[-+*/%()]))")
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2, "**": 3}
_APPLY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}


def _tokenize(expression: str) -> list[str]:
    tokens: list[str] = []
    position, end = 0, len(expression.rstrip())
    while position < end:
        match = _TOKEN.match(expression, position)
        if match is None:
            raise ToolError(f"not an arithmetic expression: unexpected {expression[position:].strip()[:10]!r}")
        tokens.append(match.group(1) or match.group(2))
        position = match.end()
    return tokens


@functools.lru_cache(maxsize=4096)
def evaluate_expression(expression: str) -> int | float:
    """Evaluate an arithmetic expression (numbers, + - * / // % **, parentheses, unary signs)."""
    if len(expression) > _MAX_EXPRESSION:
        raise ToolError(f"expression too long ({len(expression)} > {_MAX_EXPRESSION} characters)")
    tokens = _tokenize(expression)
    if not tokens:
        raise ToolError("empty expression")
    value, position = _parse_binary(tokens, 0, 1)
    if position != len(tokens):
        raise ToolError(f"not an arithmetic expression: unexpected {tokens[position]!r}")
    return value


def _parse_binary(tokens: list[str], position: int, min_precedence: int) -> tuple[int | float, int]:
    """Precedence climbing: parse operators binding at least as tightly as `min_precedence`."""
    left, position = _parse_unary(tokens, position)
    while position < len(tokens) and _PRECEDENCE.get(tokens[position], 0) >= min_precedence:
        op = tokens[position]
        next_min = _PRECEDENCE[op] + (0 if op == "**" else 1)  # ** is right-associative
        right, position = _parse_binary(tokens, position + 1, next_min)
        left = _apply(op, left, right)
    return left, position


def _parse_unary(tokens: list[str], position: int) -> tuple[int | float, int]:
    if position >= len(tokens):
        raise ToolError("not an arithmetic expression: it ends too early")
    token = tokens[position]
    if token in ("-", "+"):
        value, position = _parse_unary(tokens, position + 1)
        return (-value if token == "-" else value), position
    if token == "(":
        value, position = _parse_binary(tokens, position + 1, 1)
        if position >= len(tokens) or tokens[position] != ")":
            raise ToolError("not an arithmetic expression: unbalanced parentheses")
        return value, position + 1
    if token[0].isdigit() or token[0] == ".":
        return (float(token) if "." in token else int(token)), position + 1
    raise ToolError(f"not an arithmetic expression: unexpected {token!r}")


def _apply(op: str, left: int | float, right: int | float) -> int | float:
    if op == "**" and abs(right) > 64:
        raise ToolError("exponent too large")
    try:
        return cast(int | float, _APPLY[op](left, right))
    except ZeroDivisionError:
        raise ToolError("division by zero") from None


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: The expression, e.g. "(12 + 7) * 3 - 5". Supports + - * / // % ** and parentheses.
    """
    value = evaluate_expression(expression)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def generate_expression(rng: random.Random) -> tuple[str, int]:
    """A random expression of 1–3 operations over integers 1–99, with parentheses where they matter, and its value."""
    value = rng.randint(1, 99)
    text = str(value)
    for _ in range(rng.randint(1, 3)):
        op = rng.choice(_OPERATORS)
        operand = rng.randint(1, 99)
        wrap = " " in text and (op == "*" or rng.random() < 0.3)
        left = f"({text})" if wrap else text
        if rng.random() < 0.2:
            text, value = f"{operand} {op} {left}", _APPLY[op](operand, value)
            if op == "-" and not wrap and " " in left:  # "7 - 3 + 2" is not 7 - (3 + 2): read it as written
                value = cast(int, evaluate_expression(text))
        else:
            text, value = f"{left} {op} {operand}", _APPLY[op](value, operand)
    return text, value


def make_calculator_task(index: int) -> Task:
    """The task with id `calc-<index>`: the same index always gives the same problem."""
    rng = random.Random(index)
    expression, value = generate_expression(rng)
    instruction = rng.choice(_TEMPLATES).format(e=expression)
    answer = str(value)
    call = '{"name": "calculator", "arguments": {"expression": "' + expression + '"}}'  # what json.dumps writes
    return Task(
        id=f"calc-{index}",
        instruction=instruction,
        gold_actions=[f"<tool_call>{call}</tool_call>", f"<answer>{answer}</answer>"],
        answer=answer,
        metadata={"expression": expression},
    )


def _parse_number(text: str) -> float | None:
    cleaned = text.strip().replace(",", "").rstrip(".")
    try:
        return float(cleaned)
    except ValueError:
        return None


class CalculatorEnv(ToolEnv):
    """Arithmetic word problems that need a calculator.

    ## Description
    Each episode asks for the value of an expression of 1–3 operations (`+ - *`) over integers
    1–99. The agent calls `calculator` and answers with `<answer>N</answer>`.

    ## Action Space
    Text: the assistant's raw output (Hermes `<tool_call>` blocks or OpenAI message JSON).

    ## Observation Space
    Text: the problem at reset, then `<tool_response>` blocks.

    ## Rewards
    `success`: 1.0 when the answer equals the exact value, else 0.0; `invalid_call/*`: −0.05 per
    malformed or unknown call.

    ## Starting State
    A problem drawn from the seed, or `options={"task_id": "calc-<n>"}`.

    ## Episode End
    Terminates on an answer; truncates after `max_turns` steps.

    ## Arguments
    `max_turns` (default 4), `budget`, `faults`, `render_mode` ("ansi").

    ## Version History
    * v0: initial version.

    Example:
        >>> import gymnasium as gym, toolgym
        >>> env = gym.make("toolgym/Calculator-v0")
        >>> obs, info = env.reset(seed=0)
        >>> [t["function"]["name"] for t in info["tools"]]
        ['calculator']
    """

    def __init__(self, *, max_turns: int = 4, **kwargs: Any) -> None:
        super().__init__(max_turns=max_turns, **kwargs)

    def _make_task(self, rng: np.random.Generator, task_id: str | None) -> Task:
        if task_id is None:
            return make_calculator_task(int(rng.bit_generator.random_raw()) >> 33)
        prefix, _, number = str(task_id).partition("-")
        if prefix != "calc" or not number.isdigit():
            raise ValueError(f"Calculator task ids look like 'calc-<non-negative int>', got {task_id!r}")
        return make_calculator_task(int(number))

    def _episode_tools(self) -> list[Tool]:
        return [calculator]

    def _score(self, answer: str | None) -> dict[str, float]:
        assert self.task is not None and self.task.answer is not None
        given = _parse_number(answer) if answer is not None else None
        return {"success": 1.0 if given is not None and given == float(self.task.answer) else 0.0}
