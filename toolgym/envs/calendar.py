"""`toolgym/Calendar-v0`: a stateful calendar of people and events, scored by the final state."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from toolgym.envs.core import ToolEnv
from toolgym.schemas import Task
from toolgym.simulators import Tool, ToolError, tool

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
OPEN_HOUR, CLOSE_HOUR = 9, 17
_NAMES = ("Alice", "Bob", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivan", "Julia")
_TITLES = (
    "Standup",
    "Design review",
    "Budget sync",
    "1:1",
    "Hiring panel",
    "Roadmap",
    "Retro",
    "Customer call",
    "Security audit",
    "Launch prep",
    "Data review",
    "Offsite planning",
    "Vendor demo",
    "Incident review",
    "Team lunch",
    "Board prep",
    "Code review",
    "Onboarding",
)
World = dict[str, Any]


def _busy(world: World, person: str, day: int, ignore: str | None = None) -> set[int]:
    hours: set[int] = set()
    for event in world["events"].values():
        if event["id"] != ignore and event["day"] == day and person in event["attendees"]:
            hours.update(range(event["start"], event["start"] + event["duration"]))
    return hours


def free_starts(world: World, attendees: list[str], day: int, duration: int, ignore: str | None = None) -> list[int]:
    """Start hours on `day` at which every attendee is free for `duration` hours."""
    busy = set().union(*(_busy(world, person, day, ignore) for person in attendees)) if attendees else set()
    return [h for h in range(OPEN_HOUR, CLOSE_HOUR - duration + 1) if not busy & set(range(h, h + duration))]


def _check_slot(
    world: World, attendees: list[str], day: int, start: int, duration: int, ignore: str | None = None
) -> None:
    if not 0 <= day < len(DAYS):
        raise ToolError(f"day must be 0 ({DAYS[0]}) to {len(DAYS) - 1} ({DAYS[-1]}), got {day}")
    if duration < 1 or start < OPEN_HOUR or start + duration > CLOSE_HOUR:
        raise ToolError(f"events must lie within {OPEN_HOUR}:00-{CLOSE_HOUR}:00 and last at least 1 hour")
    unknown = sorted(set(attendees) - set(world["people"]))
    if unknown:
        raise ToolError(f"unknown people: {unknown}; call list_people to see who exists")
    for person in attendees:
        if _busy(world, person, day, ignore) & set(range(start, start + duration)):
            raise ToolError(f"{person} is already busy on {DAYS[day]} between {start}:00 and {start + duration}:00")


def _event(world: World, event_id: str) -> dict[str, Any]:
    if event_id not in world["events"]:
        raise ToolError(f"no event with id '{event_id}'")
    return cast(dict[str, Any], world["events"][event_id])


@tool(inject=["world"])
def list_people(world: World) -> list[str]:
    """List everyone whose calendar this tool manages."""
    return list(world["people"])


@tool(inject=["world"])
def list_events(world: World, day: int | None = None, person: str | None = None) -> list[dict[str, Any]]:
    """List events, optionally only those on one day or attended by one person.

    Args:
        day: Day index, 0 (Monday) to 4 (Friday).
        person: Only events this person attends.
    """
    events = sorted(world["events"].values(), key=lambda e: (e["day"], e["start"], e["id"]))
    chosen = [e for e in events if (day is None or e["day"] == day) and (person is None or person in e["attendees"])]
    return [{**e, "attendees": list(e["attendees"])} for e in chosen]  # copies: results never alias the world


@tool(inject=["world"], read_only=False, writes=["events"])
def create_event(world: World, title: str, day: int, start: int, duration: int, attendees: list[str]) -> dict[str, Any]:
    """Create an event; nobody may be double-booked.

    Args:
        title: Title of the event.
        day: Day index, 0 (Monday) to 4 (Friday).
        start: Start hour, 9 to 16.
        duration: Length in whole hours.
        attendees: Names of the people attending.
    """
    _check_slot(world, attendees, day, start, duration)
    event_id = f"ev{world['next_id']}"
    world["next_id"] += 1
    event = {
        "id": event_id,
        "title": title,
        "day": day,
        "start": start,
        "duration": duration,
        "attendees": sorted(attendees),
    }
    world["events"][event_id] = event
    return dict(event)


@tool(inject=["world"], read_only=False, writes=["events"])
def move_event(world: World, event_id: str, day: int, start: int) -> dict[str, Any]:
    """Move an event to another day and start hour, keeping its length and attendees.

    Args:
        event_id: Id of the event, as returned by list_events.
        day: New day index, 0 (Monday) to 4 (Friday).
        start: New start hour.
    """
    event = _event(world, event_id)
    _check_slot(world, event["attendees"], day, start, event["duration"], ignore=event_id)
    event.update(day=day, start=start)
    return dict(event)


@tool(inject=["world"], read_only=False, writes=["events"])
def cancel_event(world: World, event_id: str) -> dict[str, Any]:
    """Cancel (delete) an event.

    Args:
        event_id: Id of the event, as returned by list_events.
    """
    event = world["events"].pop(_event(world, event_id)["id"])
    return {"cancelled": event["id"], "title": event["title"]}


@tool(inject=["world"])
def find_free_slots(world: World, attendees: list[str], day: int, duration: int) -> list[int]:
    """Start hours on a day at which all the given people are free for the whole duration.

    Args:
        attendees: Names of the people who must all be free.
        day: Day index, 0 (Monday) to 4 (Friday).
        duration: Length in whole hours.
    """
    unknown = sorted(set(attendees) - set(world["people"]))
    if unknown:
        raise ToolError(f"unknown people: {unknown}")
    return free_starts(world, attendees, day, duration)


CALENDAR_TOOLS = (list_people, list_events, create_event, move_event, cancel_event, find_free_slots)
_BY_NAME = {t.name: t for t in CALENDAR_TOOLS}


def canonical_state(world: World) -> list[tuple[Any, ...]]:
    """The calendar's content without event ids: what the goal is compared on."""
    return sorted(
        (e["title"], e["day"], e["start"], e["duration"], tuple(e["attendees"])) for e in world["events"].values()
    )


def _random_world(rng: np.random.Generator, shape: WorldShape) -> World:
    people = sorted(str(n) for n in rng.choice(_NAMES, size=shape.people, replace=False))
    world: World = {"people": people, "events": {}, "next_id": 1}
    titles = [str(t) for t in rng.permutation(_TITLES)]
    for title in titles[: int(rng.integers(shape.min_events, shape.max_events + 1))]:
        attendees = sorted(str(p) for p in rng.choice(people, size=int(rng.integers(1, 4)), replace=False))
        day, duration = int(rng.integers(5)), int(rng.integers(1, 3))
        starts = free_starts(world, attendees, day, duration)
        if starts:
            create_event.bind(world=world)(
                title=title, day=day, start=int(rng.choice(starts)), duration=duration, attendees=attendees
            )
    world["spare_titles"] = [t for t in titles if t not in {e["title"] for e in world["events"].values()}]
    return world


def _call(name: str, **arguments: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _plan_schedule(world: World, rng: np.random.Generator) -> tuple[str, list[str]] | None:
    people = [str(p) for p in rng.choice(world["people"], size=int(rng.integers(2, 4)), replace=False)]
    day, duration, title = int(rng.integers(5)), int(rng.integers(1, 3)), world["spare_titles"][0]
    starts = free_starts(world, people, day, duration)
    if not starts:
        return None
    text = (
        f"Schedule a {duration}-hour meeting titled '{title}' with {', '.join(people)} on {DAYS[day]}, "
        "at the earliest time when all of them are free."
    )
    calls = [
        _call("find_free_slots", attendees=people, day=day, duration=duration),
        _call("create_event", title=title, day=day, start=starts[0], duration=duration, attendees=people),
    ]
    return text, calls


def _plan_move(world: World, rng: np.random.Generator) -> tuple[str, list[str]] | None:
    event = list(world["events"].values())[int(rng.integers(len(world["events"])))]
    day = int(rng.integers(5))
    starts = [
        s
        for s in free_starts(world, event["attendees"], day, event["duration"], ignore=event["id"])
        if (day, s) != (event["day"], event["start"])
    ]
    if not starts:
        return None
    start = int(rng.choice(starts))
    text = f"Move the '{event['title']}' meeting to {DAYS[day]} at {start}:00."
    return text, [
        _call("list_events", day=event["day"]),
        _call("move_event", event_id=event["id"], day=day, start=start),
    ]


def _plan_cancel(world: World, rng: np.random.Generator) -> tuple[str, list[str]] | None:
    event = list(world["events"].values())[int(rng.integers(len(world["events"])))]
    person, day = event["attendees"][0], event["day"]
    doomed = [e["id"] for e in list_events.bind(world=world)(day=day, person=person)]
    text = f"{person} is out sick on {DAYS[day]}: cancel every event {person} attends that day."
    return text, [_call("list_events", day=day, person=person), *(_call("cancel_event", event_id=i) for i in doomed)]


def _plan_earliest(world: World, rng: np.random.Generator) -> tuple[str, list[str]] | None:
    event = list(world["events"].values())[int(rng.integers(len(world["events"])))]
    day = int((event["day"] + rng.integers(1, 5)) % 5)
    starts = free_starts(world, event["attendees"], day, event["duration"], ignore=event["id"])
    if not starts:
        return None
    text = f"Move '{event['title']}' to the earliest hour on {DAYS[day]} when all its attendees are free."
    calls = [
        _call("list_events", day=event["day"]),
        _call("find_free_slots", attendees=event["attendees"], day=day, duration=event["duration"]),
        _call("move_event", event_id=event["id"], day=day, start=starts[0]),
    ]
    return text, calls


_PLANNERS = {"schedule": _plan_schedule, "move": _plan_move, "cancel": _plan_cancel, "earliest": _plan_earliest}
TASK_KINDS = tuple(_PLANNERS)


@dataclass(frozen=True)
class WorldShape:
    """How tasks are drawn: the world's size and which task kinds occur (the defaults give Calendar-v0's tasks)."""

    people: int = 5
    min_events: int = 6
    max_events: int = 10
    task_kinds: tuple[str, ...] = TASK_KINDS

    def __post_init__(self) -> None:
        if not 2 <= self.people <= len(_NAMES):
            raise ValueError(f"people must be 2 to {len(_NAMES)}, got {self.people}")
        if not 1 <= self.min_events <= self.max_events <= len(_TITLES) - 1:
            raise ValueError(f"events must be [min, max] with 1 <= min <= max <= {len(_TITLES) - 1}")
        unknown = sorted(set(self.task_kinds) - set(TASK_KINDS))
        if unknown or not self.task_kinds:
            raise ValueError(
                f"task_kinds must be a non-empty subset of {list(TASK_KINDS)}, got {list(self.task_kinds)}"
            )

    @classmethod
    def of(cls, people: int, events: Sequence[int], task_kinds: Sequence[str] | None) -> WorldShape:
        """The shape from the env's kwargs (`events` is `[min, max]`)."""
        if isinstance(task_kinds, str) or len(events) != 2:
            raise ValueError("task_kinds must be a list of kinds and events a [min, max] pair")
        kinds = tuple(task_kinds) if task_kinds is not None else TASK_KINDS
        return cls(int(people), int(events[0]), int(events[1]), kinds)


def apply_gold(world: World, gold_actions: list[str]) -> World:
    """Replay a task's gold tool calls on a copy of `world` and return the resulting world."""
    result = copy.deepcopy(world)
    for action in gold_actions:
        if action.startswith("<tool_call>"):
            payload = json.loads(action[len("<tool_call>") : -len("</tool_call>")])
            _BY_NAME[payload["name"]].bind(world=result)(**payload["arguments"])
    return result


def make_calendar_task(index: int, shape: WorldShape = WorldShape()) -> Task:
    """The task with id `cal-<index>`: a world and a goal, both derived from the index (and the world shape)."""
    rng = np.random.default_rng(index)
    planners = [_PLANNERS[kind] for kind in shape.task_kinds]
    while True:
        world = _random_world(rng, shape)
        plan = planners[int(rng.integers(len(planners)))](world, rng)
        if plan is not None and world["events"]:
            break
    instruction, calls = plan
    gold = [*calls, "<answer>done</answer>"]
    goal = canonical_state(apply_gold(world, gold))
    return Task(
        id=f"cal-{index}",
        instruction=instruction,
        gold_actions=gold,
        answer="done",
        metadata={"world": world, "goal": [list(g[:4]) + [list(g[4])] for g in goal]},
    )


class CalendarEnv(ToolEnv):
    """A stateful calendar of people and events, managed through six tools.

    ## Description
    Five people share a working week (Monday–Friday, 9:00–17:00, whole hours). Each task asks
    for a change: schedule a meeting at the earliest common free time, move a meeting, cancel a
    person's meetings, or move a meeting to the earliest free hour of another day. Nobody may be
    double-booked (the tools refuse).

    ## Action Space
    Text: the assistant's raw output (Hermes `<tool_call>` blocks or OpenAI message JSON).

    ## Observation Space
    Text: the task at reset, then `<tool_response>` blocks with JSON results.

    ## Rewards
    `success`: 1.0 when the final calendar (ignoring event ids) equals the goal calendar, else
    0.0, given when the agent answers (`<answer>done</answer>`) or the episode is truncated;
    `invalid_call/*`: −0.05 per malformed or unknown call.

    ## Starting State
    A world and task drawn from the seed, or `options={"task_id": "cal-<n>"}`.

    ## Episode End
    Terminates on an answer; truncates after `max_turns` steps.

    ## Arguments
    `max_turns` (default 12); `people` (default 5) and `events` (`[min, max]`, default `[6, 10]`):
    the world's size; `task_kinds` (default all of "schedule", "move", "cancel", "earliest"): the
    kinds of task drawn — a small world with one or two kinds suits small models; `budget`,
    `faults`, `render_mode` ("ansi"). A task id names the same task only under the same shape.

    ## Version History
    * v0: initial version.
    """

    def __init__(
        self,
        *,
        max_turns: int = 12,
        people: int = 5,
        events: Sequence[int] = (6, 10),
        task_kinds: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.shape = WorldShape.of(people, events, task_kinds)
        super().__init__(max_turns=max_turns, **kwargs)
        self.world: World = {"people": [], "events": {}, "next_id": 1}

    def _make_task(self, rng: np.random.Generator, task_id: str | None) -> Task:
        if task_id is None:
            task = make_calendar_task(int(rng.integers(2**31)), self.shape)
        else:
            prefix, _, number = str(task_id).partition("-")
            if prefix != "cal" or not number.isdigit():
                raise ValueError(f"Calendar task ids look like 'cal-<non-negative int>', got {task_id!r}")
            task = make_calendar_task(int(number), self.shape)
        self.world = copy.deepcopy(task.metadata["world"])
        return task

    def _system_prompt(self) -> str:
        days = ", ".join(f"{i}={d}" for i, d in enumerate(DAYS))
        return f"{super()._system_prompt()} Days are numbered {days}; hours are whole hours from 9 to 17."

    def _episode_tools(self) -> list[Tool]:
        return [t.bind(world=self.world) for t in CALENDAR_TOOLS]

    def _world_state(self) -> Any:
        return self.world

    def _load_world_state(self, state: Any) -> None:
        self.world = state

    def _score(self, answer: str | None) -> dict[str, float]:
        assert self.task is not None
        goal = [tuple(g[:4]) + (tuple(g[4]),) for g in self.task.metadata["goal"]]
        return {"success": 1.0 if canonical_state(self.world) == goal else 0.0}
