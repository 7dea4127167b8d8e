"""Helpers for budget and fault tests: the registered ToolEnv ids and a small priced env."""

from __future__ import annotations

import importlib
import json
from typing import Any

import numpy as np

import toolgym  # noqa: F401 - registers the ids
from toolgym.envs import ENV_IDS, ToolEnv
from toolgym.schemas import Task
from toolgym.simulators import Tool, tool


def _is_tool_env(entry_point: str) -> bool:
    module, _, name = entry_point.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return False
    return isinstance(cls, type) and issubclass(cls, ToolEnv)


TOOL_ENV_IDS = [env_id for env_id, entry in ENV_IDS.items() if _is_tool_env(entry)]


def call(name: str, **arguments: Any) -> str:
    """A Hermes tool-call action."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


@tool(price=0.1, latency=2.0)
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    return f"value-of-{key}"


@tool(price=0.5, latency=5.0)
def premium(key: str) -> dict[str, Any]:
    """Look a key up in the premium index.

    Args:
        key: The key.
    """
    return {"key": key, "score": 7, "tags": ["a", "b"]}


class PricedEnv(ToolEnv):
    """A one-task env with two priced tools (for budget and fault tests)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_turns=kwargs.pop("max_turns", 10), **kwargs)

    def _make_task(self, rng: np.random.Generator, task_id: str | None) -> Task:
        gold = [call("lookup", key="k"), call("premium", key="k"), "<answer>value-of-k</answer>"]
        return Task(id="priced-0", instruction="Find the value of k.", gold_actions=gold, answer="value-of-k")

    def _episode_tools(self) -> list[Tool]:
        return [lookup, premium]

    def _score(self, answer: str | None) -> dict[str, float]:
        return {"success": 1.0 if answer == "value-of-k" else 0.0}
