"""Reusable policy rules over an episode trace: authenticate first, confirm before every write."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from toolgym.simulators.worlds.evaluation import PolicyRule, TraceEvent


def _successful_calls(trace: list[TraceEvent]) -> list[tuple[int, TraceEvent]]:
    return [(i, e) for i, e in enumerate(trace) if e["kind"] == "call" and e["ok"]]


def authenticate_first(auth_tools: Collection[str], exempt: Collection[str] = ()) -> PolicyRule:
    """Rule: no tool other than `auth_tools` and `exempt` succeeds before an auth tool has succeeded."""

    def rule(trace: list[TraceEvent], world: Any) -> list[str]:
        for _, event in _successful_calls(trace):
            if event["name"] in auth_tools:
                return []
            if event["name"] not in exempt:
                return [f"{event['name']} was called before the user was authenticated"]
        return []

    return rule


def confirm_before_write(write_tools: Collection[str]) -> PolicyRule:
    """Rule: every successful write needs an explicit user confirmation since the previous write."""

    def rule(trace: list[TraceEvent], world: Any) -> list[str]:
        confirmed, violations = False, []
        for event in trace:
            if event["kind"] == "user" and event.get("confirms"):
                confirmed = True
            elif event["kind"] == "call" and event["ok"] and event["name"] in write_tools:
                if not confirmed:
                    violations.append(f"{event['name']} ran without the user's explicit confirmation")
                confirmed = False
        return violations

    return rule


def per_call(check: Callable[[TraceEvent, Any], str | None], tools: Collection[str]) -> PolicyRule:
    """Rule from a per-call check: `check(event, world)` returns a violation or None for each call of `tools`."""

    def rule(trace: list[TraceEvent], world: Any) -> list[str]:
        found = (check(event, world) for _, event in _successful_calls(trace) if event["name"] in tools)
        return [v for v in found if v]

    return rule
