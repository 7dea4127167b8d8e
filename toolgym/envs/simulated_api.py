"""`toolgym/SimulatedAPI-v0`: tasks over a catalog of simulated tools, scored on the explicit state."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np

from toolgym.envs.core import ToolEnv
from toolgym.envs.hooks import BaseHook
from toolgym.envs.parsing import ParsedAction
from toolgym.schemas import ErrorKind, Task, ToolCall, ToolResult
from toolgym.simulators import Tool
from toolgym.simulators.simulated import Simulator, StateStore
from toolgym.simulators.simulated.audit import sample_arguments
from toolgym.simulators.simulated.reconcile import overlay
from toolgym.simulators.simulated.values import derive_seed, generate_value

JsonDict = dict[str, Any]
TASK_PREFIX = "sim-"
SEED_RECORDS = (2, 5)
_SCALAR = ("string", "integer", "number")


def _call(name: str, arguments: JsonDict | None = None) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments or {}}) + "</tool_call>"


def _entity_tools(simulator: Simulator) -> dict[str, dict[str, str]]:
    """entity → effect → tool name, for every stateful tool of the catalog."""
    out: dict[str, dict[str, str]] = {}
    for name, plan in simulator.plans.items():
        if plan.entity is not None:
            out.setdefault(plan.entity, {}).setdefault(plan.effect, name)
    return out


def seed_world(simulator: Simulator, rng: random.Random) -> None:
    """Populate the simulator's store with 2–5 records per entity, made by the entity's create tool."""
    for tools in _entity_tools(simulator).values():
        if "create" in tools:
            spec = simulator.catalog.get(tools["create"])
            for _ in range(rng.randint(*SEED_RECORDS)):
                simulator.call(spec.name, sample_arguments(spec, simulator, rng))


def _scalar_props(schema: JsonDict | None, record: JsonDict, skip: set[str]) -> list[str]:
    properties = (schema or {}).get("properties") or {}
    return [
        k
        for k, s in properties.items()
        if k in record
        and k not in skip
        and isinstance(s, dict)
        and s.get("type") in _SCALAR
        and isinstance(record[k], (str, int, float))
        and not isinstance(record[k], bool)
    ]


class TaskMaker:
    """Generates verifiable tasks (goal + oracle calls) from a catalog, deterministically per index."""

    def __init__(self, simulator: Simulator) -> None:
        self.sim = simulator
        self.entities = _entity_tools(simulator)
        if not any(len(tools) > 1 or "create" in tools for tools in self.entities.values()):
            raise ValueError(
                "the catalog has no stateful tools (create/get/list/update/delete over an entity) to build tasks from"
            )

    def make(self, index: int) -> Task:
        """The task with id `sim-<index>`."""
        rng = random.Random(derive_seed("task", index))
        world = Simulator(self.sim.catalog, "offline", cache="off", seed=index, simulate_all=True)
        seed_world(world, rng)
        planners = [self._create, self._update, self._delete, self._lookup, self._count]
        for _ in range(50):
            entity = rng.choice(sorted(self.entities))
            plan = rng.choice(planners)(world, entity, rng)
            if plan is not None:
                break
        else:
            raise ValueError("could not build a task from this catalog")
        instruction, calls, goal, answer = plan
        return Task(
            id=f"{TASK_PREFIX}{index}",
            instruction=instruction,
            gold_actions=[*calls, f"<answer>{answer}</answer>"],
            answer=answer,
            metadata={"world": world.store.to_dict(), "goal": goal},
        )

    def _records(self, world: Simulator, entity: str) -> list[JsonDict]:
        return world.store.records(entity)

    def _create(self, world: Simulator, entity: str, rng: random.Random) -> Any:
        tool = self.entities[entity].get("create")
        if tool is None:
            return None
        spec = world.catalog.get(tool)
        arguments = generate_value(spec.input_schema, rng, full=not spec.input_schema.get("required"))
        fields = {k: v for k, v in arguments.items() if v is not None}
        described = ", ".join(f"{k} {json.dumps(v)}" for k, v in fields.items())
        goal = {"kind": "exists", "entity": entity, "fields": fields}
        return f"Create a new {entity} with {described}.", [_call(tool, arguments)], goal, "done"

    def _pick(self, world: Simulator, entity: str, effect: str, rng: random.Random) -> tuple[str, JsonDict] | None:
        tool = self.entities[entity].get(effect)
        records = self._records(world, entity)
        return (tool, rng.choice(records)) if tool and records else None

    def _update(self, world: Simulator, entity: str, rng: random.Random) -> Any:
        picked = self._pick(world, entity, "update", rng)
        if picked is None:
            return None
        tool, record = picked
        spec, id_key = world.catalog.get(tool), world.plans[tool].id_key or ""
        required = set(spec.input_schema.get("required", [])) - {id_key}
        fields = _scalar_props(spec.input_schema, record, {id_key} | required)
        if not fields or not required <= set(record):
            return None
        field = rng.choice(fields)
        value = generate_value(spec.input_schema["properties"][field], rng, field)
        if value == record[field]:
            return None
        arguments = {id_key: record[id_key], **{k: record[k] for k in required}, field: value}
        goal = {"kind": "field", "entity": entity, "id": record[id_key], "field": field, "value": value}
        text = f"Change the {field} of {entity} {record[id_key]} to {json.dumps(value)}."
        return text, [_call(tool, arguments)], goal, "done"

    def _delete(self, world: Simulator, entity: str, rng: random.Random) -> Any:
        picked = self._pick(world, entity, "delete", rng)
        if picked is None:
            return None
        tool, record = picked
        id_key = world.plans[tool].id_key or ""
        verb = tool.split("_")[0]
        goal = {"kind": "absent", "entity": entity, "id": record[id_key]}
        return f"{verb.title()} {entity} {record[id_key]}.", [_call(tool, {id_key: record[id_key]})], goal, "done"

    def _lookup(self, world: Simulator, entity: str, rng: random.Random) -> Any:
        picked = self._pick(world, entity, "get", rng)
        if picked is None:
            return None
        tool, record = picked
        plan = world.plans[tool]
        shown = overlay({}, dict(record), world.catalog.get(tool).output_schema, plan, write_back=False)
        fields = _scalar_props(world.catalog.get(tool).output_schema, shown, {plan.id_key or "", "id"})
        if not fields:
            return None
        field = rng.choice(fields)
        answer = str(record[field])
        text = f"What is the {field} of {entity} {record[plan.id_key or '']}? Answer with the value only."
        goal = {"kind": "answer", "entity": entity}
        return text, [_call(tool, {plan.id_key or "": record[plan.id_key or ""]})], goal, answer

    def _count(self, world: Simulator, entity: str, rng: random.Random) -> Any:
        tool = self.entities[entity].get("list")
        if tool is None or world.catalog.get(tool).input_schema.get("required"):
            return None
        count = len(self._records(world, entity))
        text = f"How many {entity} records are there in total? Answer with a number."
        return text, [_call(tool)], {"kind": "answer", "entity": entity}, str(count)


def _normalize(text: str) -> str:
    return text.strip().strip("\"'").rstrip(".").strip().casefold()


def goal_met(store: StateStore, goal: JsonDict) -> bool:
    """Whether the final state satisfies a state goal (answer goals are checked on the answer)."""
    kind, entity = goal["kind"], goal["entity"]
    if kind == "exists":
        return any(all(_same(r.get(k), v) for k, v in goal["fields"].items()) for r in store.records(entity))
    if kind == "field":
        record = store.get(entity, goal["id"])
        return record is not None and _same(record.get(goal["field"]), goal["value"])
    if kind == "absent":
        return store.get(entity, goal["id"]) is None
    return True


def _same(stored: Any, wanted: Any) -> bool:
    if isinstance(stored, str) and isinstance(wanted, str):
        return _normalize(stored) == _normalize(wanted)
    return bool(stored == wanted)


NOT_SIMULATED: JsonDict = {"cache": "none", "source": "not_simulated"}
PARSE_ERROR: JsonDict = {"cache": "none", "source": "parse_error"}


class ProvenanceHook(BaseHook):
    """Notes, per call id, how the simulator answered each dispatched call (or that it did not).

    Reports are keyed by the call's id, not by position: parse errors, calls answered by other
    hooks (budget refusals, injected faults) and agent-chosen ids that repeat all pair correctly.
    """

    name = "simulator_provenance"

    def __init__(self, simulator: Simulator) -> None:
        self.simulator = simulator
        self.reports: dict[str, list[JsonDict]] = {}
        self._calls_before = 0

    def resolve_call(self, call: ToolCall) -> ToolCall:
        """Runs first for every call: remember the simulator's call count."""
        self._calls_before = self.simulator.counts["calls"]
        return call

    def after_call(self, call: ToolCall, result: ToolResult) -> ToolResult:
        """Record the simulator's report when this call reached it."""
        answered = self.simulator.counts["calls"] > self._calls_before
        report = dict(self.simulator.last_report) if answered else dict(NOT_SIMULATED)
        self.reports.setdefault(call.id, []).append(report)
        return result

    def take(self, record: JsonDict) -> JsonDict:
        """The report for one call record (in order, for ids that repeat)."""
        if record.get("error_kind") == ErrorKind.PARSE.value and not record.get("name"):
            return dict(PARSE_ERROR)
        pending = self.reports.get(str(record.get("id")))
        return pending.pop(0) if pending else dict(NOT_SIMULATED)


class SimulatedAPIEnv(ToolEnv):
    """Tasks over a catalog of LLM-simulated (or offline-simulated) tools with an explicit state store.

    ## Description
    Every tool of the catalog (also one with a real implementation: goals are checked on the
    simulator's state store) is answered by the simulator pipeline (validate arguments → read state → generate with the backend → validate output → retry →
    offline fallback → write state). Tasks are generated from the catalog: create an entity with
    given fields, change a field, delete an entity, look up a field, or count entities. Each has
    an oracle solution (`task.gold_actions`) that scores 1.0 with every backend.

    ## Action Space
    Text: the assistant's raw output (Hermes `<tool_call>` blocks or OpenAI message JSON).

    ## Observation Space
    Text: the task at reset, then `<tool_response>` blocks with JSON results.

    ## Rewards
    `success`: 1.0 when the final state meets the goal (create/update/delete tasks) or the answer
    equals the expected one (lookup/count tasks), else 0.0; `invalid_call/*`: −0.05 per malformed
    or unknown call.

    ## Info
    Each `info["tool_calls"][i]["simulator"]` says how the call was answered: `cache`
    ("hit", "miss", "off" or "none" when no generation was needed), `source` ("backend",
    "offline_fallback", "state" for not-found errors, "real", …), `attempts`, `valid`, `effect`,
    `entity`. `info["simulator"]` sums a step: `cache_hits`, `cache_misses`, `fallbacks`.

    ## Starting State
    A seeded world (two to five records per entity) and a task drawn from the seed, or
    `options={"task_id": "sim-<n>"}`.

    ## Arguments
    `catalog` (anything `load_catalog` accepts; default: the embedded catalog), `backend`
    ("offline", "openai", `{"kind": "openai", "base_url": …, "model": …}`, `{"kind":
    "transformers", "path": …}`), `cache` (default: in memory for one episode and carried by
    snapshots, so forks see the same hits; "record", "replay", "off" or `{"mode": …, "path": …}`
    for a cache that spans episodes),
    `max_retries` (2), `max_turns` (10), `budget`, `faults`, `render_mode`.

    ## Version History
    * v0: initial version.
    """

    def __init__(
        self,
        *,
        catalog: Any = None,
        backend: Any = None,
        cache: Any = None,
        max_retries: int = 2,
        max_turns: int = 10,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_turns=max_turns, **kwargs)
        # every tool is simulated, also those with a real implementation (an MCP server, a Python
        # function): goals are checked on the simulator's state store, which real tools do not write
        self.simulator = Simulator(catalog, backend, cache, max_retries=max_retries, simulate_all=True)
        # the default in-memory cache lives for one episode and travels in snapshots, so a fork
        # sees the same hits as the original; a cache file (record/replay) spans episodes
        self._episode_cache = cache is None
        self.task_maker = TaskMaker(self.simulator)
        self._provenance = ProvenanceHook(self.simulator)
        self.hooks.insert(0, self._provenance)

    def close(self) -> None:
        """Release the simulator's backend connections, cache file and any MCP connection it opened."""
        self.simulator.close()
        super().close()

    def _make_task(self, rng: np.random.Generator, task_id: str | None) -> Task:
        if task_id is None:
            index = int(rng.integers(2**31))
        else:
            number = str(task_id)[len(TASK_PREFIX) :]
            if not str(task_id).startswith(TASK_PREFIX) or not number.isdigit():
                raise ValueError(f"SimulatedAPI task ids look like 'sim-<non-negative int>', got {task_id!r}")
            index = int(number)
        task = self.task_maker.make(index)
        self.simulator.set_state({"store": task.metadata["world"], "counts": {}})
        if self._episode_cache:
            self.simulator.cache.load([])
        self.simulator.seed = index
        return task

    def _system_prompt(self) -> str:
        return f"{super()._system_prompt()} Records are identified by ids such as contact_1 or order_2."

    def _episode_tools(self) -> list[Tool]:
        return self.simulator.tools()

    def _world_state(self) -> Any:
        state = {**self.simulator.get_state(), "seed": self.simulator.seed}
        if self._episode_cache:
            state["cache"] = self.simulator.cache.entries()
        return state

    def _load_world_state(self, state: Any) -> None:
        self.simulator.set_state(state)
        self.simulator.seed = state["seed"]
        if self._episode_cache:
            self.simulator.cache.load(state.get("cache", []))

    def _score(self, answer: str | None) -> dict[str, float]:
        assert self.task is not None
        goal = self.task.metadata["goal"]
        if goal["kind"] == "answer":
            met = answer is not None and _normalize(answer) == _normalize(self.task.answer or "")
        else:
            met = goal_met(self.simulator.store, goal)
        return {"success": 1.0 if met else 0.0}

    def _run_calls(self, parsed: ParsedAction) -> tuple[list[JsonDict], list[str], dict[str, float]]:
        self._provenance.reports.clear()
        records, responses, components = super()._run_calls(parsed)
        for record in records:
            record["simulator"] = self._provenance.take(record)
        return records, responses, components

    def _base_info(self, messages: list[JsonDict], records: list[JsonDict], components: dict[str, float]) -> JsonDict:
        info = super()._base_info(messages, records, components)
        reports = [r.get("simulator", {}) for r in records]
        info["simulator"] = {
            "backend": self.simulator.backend.name,
            "cache_mode": self.simulator.cache.mode,
            "cache_hits": sum(r.get("cache") == "hit" for r in reports),
            "cache_misses": sum(r.get("cache") == "miss" for r in reports),
            "fallbacks": sum(r.get("source") == "offline_fallback" for r in reports),
        }
        return info
