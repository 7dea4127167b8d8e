"""A small builder for world tasks: the user's profile and the gold actions, written side by side."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolgym.envs.worlds.base import tool_call
from toolgym.schemas import Task
from toolgym.simulators.users import Fact, UserProfile

ANYTHING_ELSE = "Is there anything else I can help you with?"


class Plan:
    """Accumulates a task: what the user knows and asks, and the assistant outputs that solve it."""

    def __init__(self, opening: str, instructions: str) -> None:
        self.opening, self.instructions = opening, instructions
        self.facts: list[Fact] = []
        self.requests: list[str] = []
        self.actions: list[str] = []
        self.outputs: list[str] = []
        self.minefields: list[dict[str, Any]] = []

    def fact(self, keywords: list[str], text: str) -> Plan:
        """Something the user tells when asked about one of `keywords`."""
        self.facts.append(Fact(keywords=keywords, text=text))
        return self

    def say(self, text: str) -> Plan:
        """A message to the user (a text-only gold action)."""
        self.actions.append(text)
        return self

    def call(self, name: str, **arguments: Any) -> Plan:
        """A gold tool call."""
        self.actions.append(tool_call(name, **arguments))
        return self

    def confirm_and_call(self, summary: str, name: str, **arguments: Any) -> Plan:
        """Describe a write, get the user's explicit yes, then make it (the policy's confirmation rule)."""
        return self.say(f"{summary} Do you confirm? Please answer yes or no.").call(name, **arguments)

    def forbid(self, name: str, tool: str, **arguments: Any) -> Plan:
        """A minefield: calling `tool` with these arguments zeroes the score."""
        self.minefields.append({"name": name, "tool": tool, "arguments": arguments})
        return self

    def finish(self, message: str = "") -> Plan:
        """Say `message` and offer more help: the scripted user then raises its next request or ends the talk."""
        return self.say(f"{message} {ANYTHING_ELSE}".strip())

    def task(self, task_id: str, kind: str) -> Task:
        """The finished task: instruction (the user's whole request), gold actions and metadata."""
        profile = UserProfile(
            opening=self.opening, instructions=self.instructions, facts=self.facts, requests=self.requests
        )
        return Task(
            id=task_id,
            instruction=profile.disclosed(),
            gold_actions=list(self.actions),
            metadata={
                "kind": kind,
                "user": profile.model_dump(),
                "outputs": list(self.outputs),
                "minefields": list(self.minefields),
            },
        )


def unique_plan(seen: set[tuple[str, ...]], draw: Callable[[int], Plan], attempts: int = 50) -> Plan:
    """Draw plans (attempt 0, 1, …) until one's gold actions differ from every plan in `seen`."""
    for attempt in range(attempts):
        plan = draw(attempt)
        if tuple(plan.actions) not in seen:
            seen.add(tuple(plan.actions))
            return plan
    raise RuntimeError(f"no new task after {attempts} draws: too few candidates in the world")
