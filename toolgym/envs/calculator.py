"""`toolgym/Calculator-v0`: arithmetic word problems solved with a `calculator` tool."""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from toolgym.envs.core import ToolEnv
from toolgym.schemas import Task
from toolgym.simulators import Tool, ToolError, tool

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_MAX_EXPRESSION = 200
_TEMPLATES = (
    "What is {e}?",
    "Compute {e}.",
    "Calculate the value of {e}.",
    "A shopkeeper's ledger needs the value of {e}. What is it?",
    "Evaluate {e} and give the result.",
)
_OPERATORS = ("+", "-", "*")


def evaluate_expression(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely (numbers, + - * / // % **, parentheses)."""
    if len(expression) > _MAX_EXPRESSION:
        raise ToolError(f"expression too long ({len(expression)} > {_MAX_EXPRESSION} characters)")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as error:
        raise ToolError(f"not an arithmetic expression: {error.msg}") from None
    return _eval_node(tree.body)


def _eval_node(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ToolError("exponent too large")
        try:
            return cast(int | float, _BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ToolError("division by zero") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return cast(int | float, _UNARY[type(node.op)](_eval_node(node.operand)))
    raise ToolError(f"unsupported element in expression: {type(node).__name__}")


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


def generate_expression(rng: np.random.Generator) -> str:
    """A random expression of 1–3 operations over integers 1–99, with parentheses where they matter."""
    text = str(int(rng.integers(1, 100)))
    for _ in range(int(rng.integers(1, 4))):
        op = _OPERATORS[int(rng.integers(len(_OPERATORS)))]
        operand = str(int(rng.integers(1, 100)))
        wrap = " " in text and (op == "*" or rng.random() < 0.3)
        left = f"({text})" if wrap else text
        text = f"{operand} {op} {left}" if rng.random() < 0.2 else f"{left} {op} {operand}"
    return text


def make_calculator_task(index: int) -> Task:
    """The task with id `calc-<index>`: the same index always gives the same problem."""
    rng = np.random.default_rng(index)
    expression = generate_expression(rng)
    instruction = _TEMPLATES[int(rng.integers(len(_TEMPLATES)))].format(e=expression)
    answer = calculator(expression=expression)
    call = json.dumps({"name": "calculator", "arguments": {"expression": expression}})
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
            return make_calculator_task(int(rng.integers(2**31)))
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
