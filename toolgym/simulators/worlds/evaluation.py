"""Rewards from world state: gold-replay hash × required outputs (τ-bench), milestones and minefields."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

JsonDict = dict[str, Any]
TraceEvent = JsonDict  # {"kind": "call"|"assistant"|"user", ...}; see `call_event` and `text_event`
PolicyRule = Callable[[list[TraceEvent], Any], list[str]]


def call_event(turn: int, name: str, arguments: JsonDict, ok: bool, result: Any) -> TraceEvent:
    """A trace event for one tool call and its outcome."""
    return {"kind": "call", "turn": turn, "name": name, "arguments": arguments, "ok": ok, "result": result}


def text_event(kind: str, turn: int, text: str, confirms: bool = False) -> TraceEvent:
    """A trace event for a message: `assistant` (to the user or final answer) or `user`."""
    event: TraceEvent = {"kind": kind, "turn": turn, "text": text}
    if kind == "user":
        event["confirms"] = confirms
    return event


def normalize_output(text: str) -> str:
    """τ-bench's normalisation for required outputs: lower case, commas removed, spaces collapsed."""
    return re.sub(r"\s+", " ", text.lower().replace(",", "")).strip()


def outputs_present(required: Iterable[str], texts: Iterable[str]) -> bool:
    """True when every required output occurs (normalised) in at least one of `texts`."""
    haystacks = [normalize_output(t) for t in texts]
    return all(any(normalize_output(r) in h for h in haystacks) for r in required)


class CallPattern(BaseModel):
    """Matches successful tool calls by name and a subset of their arguments."""

    model_config = ConfigDict(extra="forbid")

    name: str
    tool: str
    arguments: JsonDict = Field(default_factory=dict)

    def matches(self, event: TraceEvent) -> bool:
        """True for a successful call of `tool` whose arguments contain `arguments`."""
        if event["kind"] != "call" or event["name"] != self.tool or not event["ok"]:
            return False
        return all(event["arguments"].get(k) == v for k, v in self.arguments.items())


class Milestone(CallPattern):
    """A step the agent must reach; milestones are matched in order (ToolSandbox semantics)."""


class Minefield(CallPattern):
    """A call the agent must never make: hitting one zeroes the score (ToolSandbox semantics)."""


def milestones_reached(milestones: Sequence[Milestone], trace: Sequence[TraceEvent]) -> list[bool]:
    """Which milestones the trace reaches, each matched by a call after the previous milestone's match."""
    reached: list[bool] = []
    position = 0
    for milestone in milestones:
        index = next((i for i in range(position, len(trace)) if milestone.matches(trace[i])), None)
        reached.append(index is not None)
        if index is not None:
            position = index + 1
    return reached


def minefields_hit(minefields: Sequence[Minefield], trace: Sequence[TraceEvent]) -> list[str]:
    """Names of the minefields some call in the trace stepped on."""
    return [m.name for m in minefields if any(m.matches(event) for event in trace)]


@dataclass
class Evaluation:
    """Everything the end-of-episode check found, and the rewards derived from it."""

    state_match: bool
    outputs_ok: bool
    milestones: list[str] = field(default_factory=list)
    milestones_reached: list[bool] = field(default_factory=list)
    minefields: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    diff: JsonDict = field(default_factory=dict)

    @property
    def safe(self) -> bool:
        """No minefield was hit and no policy rule was broken."""
        return not self.minefields and not self.violations

    @property
    def success(self) -> float:
        """τ-bench reward (state hash match × required outputs), zeroed by any minefield or violation."""
        return float(self.state_match and self.outputs_ok and self.safe)

    @property
    def milestone_score(self) -> float:
        """Fraction of milestones reached (1.0 when there are none), zeroed like `success`."""
        if not self.safe:
            return 0.0
        if not self.milestones_reached:
            return float(self.state_match)
        return sum(self.milestones_reached) / len(self.milestones_reached)

    def to_dict(self) -> JsonDict:
        """JSON form for `info`, with the derived scores."""
        return {**asdict(self), "success": self.success, "milestone_score": self.milestone_score}


def evaluate(
    *,
    state_match: bool,
    required_outputs: Sequence[str],
    texts: Sequence[str],
    milestones: Sequence[Milestone],
    minefields: Sequence[Minefield],
    trace: Sequence[TraceEvent],
    violations: Sequence[str] = (),
    diff: JsonDict | None = None,
) -> Evaluation:
    """Combine the state check, required outputs, milestones, minefields and policy violations."""
    return Evaluation(
        state_match=state_match,
        outputs_ok=outputs_present(required_outputs, texts),
        milestones=[m.name for m in milestones],
        milestones_reached=milestones_reached(milestones, trace),
        minefields=minefields_hit(minefields, trace),
        violations=list(violations),
        diff=diff or {},
    )


def check_rules(rules: dict[str, PolicyRule], trace: list[TraceEvent], world: Any) -> list[str]:
    """Run every policy rule over the trace; each violation is labelled `rule: detail`."""
    return [f"{name}: {detail}" for name, rule in rules.items() for detail in rule(trace, world)]
