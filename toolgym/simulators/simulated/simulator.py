"""The simulator pipeline: validate arguments → read state → generate → validate output → retry → write state."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from typing import Any

from pydantic import ConfigDict, create_model

from toolgym.schemas import ErrorKind, ToolResult, ToolSpec
from toolgym.simulators.catalogs import Catalog, load_catalog
from toolgym.simulators.python_tools import Tool
from toolgym.simulators.simulated.backends import Backend, BackendError, make_backend
from toolgym.simulators.simulated.cache import ReplayMiss, SimCache, cache_key
from toolgym.simulators.simulated.reconcile import StateConflict, apply_effect, read_view, schema_problem
from toolgym.simulators.simulated.state import EffectPlan, StateStore, infer_plans
from toolgym.simulators.simulated.values import derive_seed, digest, generate_value

JsonDict = dict[str, Any]
PROMPT_VERSION = "sim-v1"
GENERIC_OUTPUT = {"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"]}
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")
SYSTEM_PROMPT = (
    "You simulate the API tool described below. Reply with exactly one JSON value and nothing else: "
    "no prose, no code fences. The value must conform to the output JSON Schema. Stay consistent "
    "with the state records you are shown; invent plausible values only for fields they lack."
)


def parse_json_reply(text: str) -> tuple[Any, str | None]:
    """The first JSON value in a model reply (code fences and surrounding prose tolerated)."""
    stripped = _FENCE.sub("", text.strip())
    try:
        return json.loads(stripped), None
    except ValueError:
        pass
    starts = [i for i in (stripped.find("{"), stripped.find("[")) if i >= 0]
    if starts:
        try:
            return json.JSONDecoder().raw_decode(stripped[min(starts) :])[0], None
        except ValueError:
            pass
    return None, f"reply is not JSON: {text[:80]!r}"


def build_messages(spec: ToolSpec, arguments: JsonDict, plan: EffectPlan, records: list[JsonDict]) -> list[JsonDict]:
    """The chat prompt for one simulated call (versioned by `PROMPT_VERSION`)."""
    request = {
        "tool": spec.name,
        "description": spec.description,
        "arguments": arguments,
        "output_schema": spec.output_schema or GENERIC_OUTPUT,
        "state": {"effect": plan.effect, "entity": plan.entity, "records": records[:20]},
    }
    content = json.dumps(request, ensure_ascii=False, sort_keys=True)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}]


class Simulator:
    """Answers calls to the tools of a catalog: real implementations run, the others are simulated.

    Args:
        catalog: anything `load_catalog` accepts.
        backend: anything `make_backend` accepts (default: offline).
        cache: anything `SimCache.from_config` accepts (default: record, in memory).
        seed: the simulation seed; part of every cache key.
        max_retries: extra backend attempts after an invalid output, before the offline fallback.
        simulate_all: simulate tools even when the catalog has a real implementation.
    """

    def __init__(
        self,
        catalog: Any = None,
        backend: Any = None,
        cache: Any = None,
        *,
        seed: int = 0,
        max_retries: int = 2,
        simulate_all: bool = False,
    ) -> None:
        # what is built here from a spec is closed here; objects passed in belong to the caller
        self._owned = (
            not isinstance(catalog, Catalog),
            not isinstance(backend, Backend),
            not isinstance(cache, SimCache),
        )
        self.catalog: Catalog = load_catalog(catalog)
        self.backend: Backend = make_backend(backend)
        self.cache = SimCache.from_config(cache)
        self.plans = infer_plans(self.catalog.specs)
        self.store = StateStore()
        self.seed, self.max_retries, self.simulate_all = seed, max_retries, simulate_all
        self.counts: Counter[str] = Counter()
        self.last_report: JsonDict = {}
        self._spec_digests = {s.name: digest(s.model_dump(mode="json"), 16) for s in self.catalog.specs}

    # ------------------------------------------------------------------ public API
    def call(self, name: str, arguments: Any) -> ToolResult:
        """Answer one call; `last_report` then describes how (cache, source, attempts, validity)."""
        self.counts["calls"] += 1
        self.last_report = {"cache": "none", "source": "none"}
        if name not in self.catalog:
            return ToolResult.failure(ErrorKind.UNKNOWN_TOOL, f"unknown tool {name!r}")
        spec = self.catalog.get(name)
        problem = (
            schema_problem(arguments, spec.input_schema, "arguments")
            if isinstance(arguments, dict)
            else "the arguments are not a JSON object"
        )
        if problem is not None:
            self.counts["invalid_arguments"] += 1
            return ToolResult.failure(ErrorKind.INVALID_ARGUMENTS, f"invalid arguments: {problem}")
        if name in self.catalog.implementations and not self.simulate_all:
            self.last_report = {"cache": "none", "source": "real"}
            return self.catalog.implementations[name](arguments)
        return self._simulate(spec, arguments)

    def tools(self) -> list[Tool]:
        """One `Tool` per catalog entry, answering through this simulator."""
        return [SimulatedTool(self, spec) for spec in self.catalog.specs]

    def close(self) -> None:
        """Release what this simulator built: the backend's connections, the cache, an MCP connection."""
        owns_catalog, owns_backend, owns_cache = self._owned
        close = getattr(self.backend, "close", None)
        if owns_backend and callable(close):
            close()
        if owns_cache:
            self.cache.close()
        if owns_catalog:
            self.catalog.close()

    def get_state(self) -> JsonDict:
        """The store and counters, JSON-serializable."""
        return {"store": self.store.to_dict(), "counts": dict(self.counts)}

    def set_state(self, state: JsonDict) -> None:
        """Restore `get_state` output."""
        self.store = StateStore.from_dict(state["store"])
        self.counts = Counter(state.get("counts", {}))

    # ------------------------------------------------------------------ pipeline
    def _simulate(self, spec: ToolSpec, arguments: JsonDict) -> ToolResult:
        plan = self.plans[spec.name]
        annotations = spec.annotations
        try:
            records = read_view(self.store, plan, arguments)
        except StateConflict as error:
            self.counts["state_errors"] += 1
            self.last_report = {"cache": "none", "source": "state", "effect": plan.effect, "entity": plan.entity}
            return ToolResult.failure(ErrorKind.EXECUTION, str(error))
        key = self._key(spec, arguments)
        try:
            value, report = self._generate_cached(spec, arguments, plan, records, key)
        except ReplayMiss as error:
            self.counts["replay_misses"] += 1
            self.last_report = {"cache": "miss", "source": "none", "key": key[:16]}
            return ToolResult.failure(ErrorKind.UNAVAILABLE, str(error))
        output = apply_effect(self.store, plan, arguments, value, spec.output_schema)
        problem = schema_problem(output, spec.output_schema)
        self.counts["final_invalid" if problem else "final_valid"] += 1
        self.last_report = {**report, "valid": problem is None, "effect": plan.effect, "entity": plan.entity}
        return ToolResult.success(output, cost=annotations.price, latency=annotations.latency)

    def _key(self, spec: ToolSpec, arguments: JsonDict) -> str:
        return cache_key(
            tool=spec.name,
            spec=self._spec_digests[spec.name],
            arguments=arguments,
            state=self.store.digest(),
            backend=self.backend.name,
            prompt=PROMPT_VERSION,
            seed=self.seed,
        )

    def _generate_cached(
        self, spec: ToolSpec, arguments: JsonDict, plan: EffectPlan, records: list[JsonDict], key: str
    ) -> tuple[Any, JsonDict]:
        hit = self.cache.lookup(key)
        if hit is not None:
            self.counts["cache_hits"] += 1
            return hit[0], {**hit[1], "cache": "hit", "key": key[:16]}
        if self.cache.mode != "off":
            self.counts["cache_misses"] += 1
        value, meta = self._generate(spec, build_messages(spec, arguments, plan, records), key)
        self.cache.store(key, "tool", value, meta)
        return value, {**meta, "cache": "miss" if self.cache.mode == "record" else "off", "key": key[:16]}

    def _generate(self, spec: ToolSpec, messages: list[JsonDict], key: str) -> tuple[Any, JsonDict]:
        schema = spec.output_schema
        problems: list[str] = []
        for attempt in range(1 + self.max_retries):
            self.counts["backend_calls"] += 1
            try:
                text = self.backend.chat(
                    messages, seed=derive_seed(self.seed, key, attempt), response_schema=schema or GENERIC_OUTPUT
                )
            except BackendError as error:
                self.counts["backend_errors"] += 1
                problems.append(str(error)[:200])
                continue
            value, problem = parse_json_reply(text)
            problem = problem or schema_problem(value, schema)
            if problem is None:
                return value, self._meta("backend", attempt + 1, problems)
            self.counts["invalid_outputs"] += 1
            problems.append(problem)
        self.counts["fallbacks"] += 1
        value = generate_value(schema or GENERIC_OUTPUT, random.Random(derive_seed(self.seed, key, "fallback")))
        return value, self._meta("offline_fallback", 1 + self.max_retries, problems)

    def _meta(self, source: str, attempts: int, problems: list[str]) -> JsonDict:
        self.counts["retries"] += attempts - 1
        return {"source": source, "backend": self.backend.name, "attempts": attempts, "problems": problems[-3:]}


_Permissive = create_model("SimulatedArguments", __config__=ConfigDict(extra="allow"))


class SimulatedTool(Tool):
    """A `Tool` whose calls go through a `Simulator` (arguments are validated there, by JSON Schema)."""

    def __init__(self, simulator: Simulator, spec: ToolSpec, target: str | None = None) -> None:
        super().__init__(self._run, spec, _Permissive)
        self.simulator = simulator
        self.target = target or spec.name

    def _run(self, **arguments: Any) -> Any:
        result = self.invoke(arguments)
        if not result.ok:
            raise ValueError(result.error_message)
        return result.content

    def invoke(self, arguments: Any) -> ToolResult:
        """Answer through the simulator (never raises)."""
        return self.simulator.call(self.target, arguments)

    def execute(self, arguments: Any) -> tuple[Any, ErrorKind | None, str | None]:
        """`invoke` as (content, error kind, error message), never raising."""
        result = self.invoke(arguments)
        return result.content, result.error_kind, result.error_message

    def validate(self, arguments: Any) -> JsonDict:
        """Check arguments against the input schema; raise `ValueError` when they do not fit."""
        problem = schema_problem(arguments, self.spec.input_schema, "arguments")
        if problem is not None:
            raise ValueError(f"invalid arguments: {problem}")
        return dict(arguments)

    def bind(self, **injected: Any) -> Tool:
        """Simulated tools take no injected arguments: returns self."""
        return self

    def with_spec(self, spec: ToolSpec) -> Tool:
        """A copy presented under another spec, still answered as the original tool."""
        return SimulatedTool(self.simulator, spec, target=self.target)
