"""Seeded failure injection: a reproducible schedule of labelled faults (errors, timeouts, drift, implicit corruption)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from toolgym.schemas import ErrorKind, ToolResult, ToolSpec

JsonDict = dict[str, Any]
CALL_KINDS = ("http_error", "timeout", "rate_limit", "wrong_value", "garbage", "price_change")
EPISODE_KINDS = ("schema_drift", "missing_tool", "distractor")
ALL_KINDS = CALL_KINDS + EPISODE_KINDS
IMPLICIT_KINDS = frozenset({"wrong_value", "garbage", "distractor"})
CONFIG_KEYS = frozenset({"rate", "kinds", "tools", "seed", "solvable", "permanent", "turn_seconds", "timeout_s"})
_TOOL_KEYS = frozenset({"rate", "kinds", "permanent"})
_TRANSIENT_STATUS = (
    (409, "Conflict"),
    (500, "Internal Server Error"),
    (502, "Bad Gateway"),
    (503, "Service Unavailable"),
)
_PERMANENT_STATUS = ((403, "Forbidden"), (410, "Gone"), (501, "Not Implemented"))
_TOOL_RENAMES = ("{}_v2", "{}_new", "v2_{}")
_PARAM_RENAMES = ("{}_v2", "{}_value", "new_{}")
_DISTRACTOR_NAMES = ("{}_legacy", "{}_beta", "{}_v0")
_GARBAGE = (
    '{"data": [1, 2, ',
    "\x1f\x8b\x08\x00\ufffd\ufffd",
    "<!-- upstream --><p>",
    "null null null",
    "%PDF-1.4 \ufffd",
)


def unit(*parts: Any) -> float:
    """A uniform number in [0, 1) that depends only on `parts`: the counter-based RNG of the schedule."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def _choose(weights: dict[str, float], u: float) -> str:
    total = sum(weights.values())
    acc = 0.0
    for name in sorted(weights):
        acc += weights[name] / total
        if u < acc:
            return name
    return sorted(weights)[-1]


@dataclass(frozen=True)
class ToolFaultSettings:
    """Fault rate, kind weights and the probability that a fault is permanent, for one tool."""

    rate: float
    kinds: dict[str, float]
    permanent: float

    def kinds_in(self, group: tuple[str, ...]) -> dict[str, float]:
        """The enabled kinds of one group (call-level or episode-level) with positive weight."""
        return {k: w for k, w in self.kinds.items() if k in group and w > 0}


@dataclass(frozen=True)
class FaultConfig:
    """Validated `faults={…}` settings."""

    default: ToolFaultSettings
    tools: dict[str, ToolFaultSettings] = field(default_factory=dict)
    seed: int | None = None
    solvable: bool = True
    turn_seconds: float = 1.0
    timeout_s: float = 30.0

    @classmethod
    def from_dict(cls, config: JsonDict) -> FaultConfig:
        """Read `{"rate", "kinds", "tools", "seed", "solvable", "permanent", "turn_seconds", "timeout_s"}`."""
        if not isinstance(config, dict):
            raise TypeError(f"faults must be a dict, got {type(config).__name__}")
        unknown = sorted(set(config) - CONFIG_KEYS)
        if unknown:
            raise ValueError(f"unknown faults keys {unknown}; allowed: {sorted(CONFIG_KEYS)}")
        default = _settings(config, None)
        tools = {str(name): _tool_settings(name, value, default) for name, value in (config.get("tools") or {}).items()}
        seed = config.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"faults['seed'] must be an int or None, got {seed!r}")
        return cls(
            default=default,
            tools=tools,
            seed=seed,
            solvable=bool(config.get("solvable", True)),
            turn_seconds=_number(config, "turn_seconds", 1.0, upper=None),
            timeout_s=_number(config, "timeout_s", 30.0, upper=None),
        )

    def for_tool(self, tool: str) -> ToolFaultSettings:
        """The settings that apply to `tool`."""
        return self.tools.get(tool, self.default)


def _number(config: JsonDict, key: str, default: float, upper: float | None = 1.0) -> float:
    value = config.get(key, default)
    bad = isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0
    if bad or (upper is not None and value > upper):
        bounds = f"between 0 and {upper}" if upper is not None else "non-negative"
        raise ValueError(f"faults['{key}'] must be a number {bounds}, got {value!r}")
    return float(value)


def _kinds(value: Any) -> dict[str, float]:
    if value is None:
        return dict.fromkeys(ALL_KINDS, 1.0)
    weights = dict.fromkeys(value, 1.0) if isinstance(value, (list, tuple)) else value
    if not isinstance(weights, dict):
        raise ValueError(f"faults['kinds'] must be a list of kinds or a dict of weights, got {value!r}")
    unknown = sorted(set(weights) - set(ALL_KINDS))
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known kinds: {list(ALL_KINDS)}")
    for kind, weight in weights.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise ValueError(f"fault kind weight for {kind!r} must be a non-negative number, got {weight!r}")
    return {str(k): float(w) for k, w in weights.items()}


def _settings(config: JsonDict, base: ToolFaultSettings | None) -> ToolFaultSettings:
    return ToolFaultSettings(
        rate=_number(config, "rate", base.rate if base else 0.1),
        kinds=_kinds(config.get("kinds")) if "kinds" in config or base is None else dict(base.kinds),
        permanent=_number(config, "permanent", base.permanent if base else 0.2),
    )


def _tool_settings(name: Any, value: Any, default: ToolFaultSettings) -> ToolFaultSettings:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = {"rate": value}
    if not isinstance(value, dict) or not set(value) <= _TOOL_KEYS:
        raise ValueError(f"faults['tools'][{name!r}] must be a rate or a dict with keys {sorted(_TOOL_KEYS)}")
    value = {k: (1.0 if v is True else 0.0 if v is False else v) for k, v in value.items()}
    return _settings(value, default)


@dataclass
class Decision:
    """What the schedule does to one call: a kind, whether it is permanent, and its parameters."""

    kind: str
    permanent: bool
    detail: JsonDict = field(default_factory=dict)


class FaultInjector:
    """The per-episode fault schedule: episode-level faults at reset, call-level faults as calls come in.

    Every random choice is `unit(key, …)` of the episode key and a counter, so the schedule is a pure
    function of the seed, the task and the sequence of calls: the same seed gives the same schedule,
    and restoring the counters (`get_state`/`set_state`) continues it exactly.
    """

    def __init__(self, config: FaultConfig) -> None:
        self.config = config
        self._clear()

    def _clear(self) -> None:
        self.key = ""
        self.required: list[str] = []
        self.schemas: dict[str, JsonDict | None] = {}
        self.drift: dict[str, JsonDict] = {}
        self.missing: dict[str, JsonDict] = {}
        self.distractors: dict[str, str] = {}
        self.permanent: dict[str, JsonDict] = {}
        self.rate_limits: dict[str, float] = {}
        self.last_faulted: dict[str, bool] = {}
        self.calls = 0
        self.clock = 0.0
        self.turn = 0

    # ------------------------------------------------------------------ episode plan
    def start_episode(self, key: str, specs: list[ToolSpec], required: set[str] | None) -> list[JsonDict]:
        """Plan the episode-level faults for these tools; return them as step-0 events."""
        self._clear()
        self.key = key
        names = sorted(spec.name for spec in specs)
        self.required = sorted(required) if required is not None else names
        self.schemas = {spec.name: spec.output_schema for spec in specs}
        taken = set(names)
        events = []
        for spec in sorted(specs, key=lambda s: s.name):
            event = self._plan_tool(spec, taken)
            if event is not None:
                events.append(event)
        return events

    def _plan_tool(self, spec: ToolSpec, taken: set[str]) -> JsonDict | None:
        settings = self.config.for_tool(spec.name)
        kinds = settings.kinds_in(EPISODE_KINDS)
        if not kinds or unit(self.key, "episode", spec.name) >= settings.rate:
            return None
        kind = _choose(kinds, unit(self.key, "episode-kind", spec.name))
        permanent = unit(self.key, "episode-permanent", spec.name) < settings.permanent
        if kind == "missing_tool" and self.config.solvable and spec.name in self.required:
            permanent = False
        permanent = permanent or kind == "distractor"  # a distractor stays listed for the whole episode
        detail = getattr(self, f"_plan_{kind}")(spec, permanent, taken)
        return event(kind, spec.name, 0, permanent, detail)

    def _plan_schema_drift(self, spec: ToolSpec, permanent: bool, taken: set[str]) -> JsonDict:
        params = sorted(spec.input_schema.get("properties", {}))
        pick = unit(self.key, "drift-form", spec.name)
        if not params or pick < 0.5:
            new = _fresh(_TOOL_RENAMES, spec.name, taken, unit(self.key, "drift-name", spec.name))
            plan: JsonDict = {"new_name": new, "params": {}}
        else:
            param = params[int(unit(self.key, "drift-param", spec.name) * len(params))]
            plan = {"new_name": spec.name, "params": {param: _fresh(_PARAM_RENAMES, param, set(params), pick)}}
        plan["permanent"] = permanent
        self.drift[spec.name] = plan
        return {"renamed_to": plan["new_name"], "renamed_parameters": plan["params"]}

    def _plan_missing_tool(self, spec: ToolSpec, permanent: bool, taken: set[str]) -> JsonDict:
        until = None if permanent else 1 + int(unit(self.key, "missing-window", spec.name) * 2)
        self.missing[spec.name] = {"permanent": permanent, "until_turn": until}
        return {"until_turn": until}

    def _plan_distractor(self, spec: ToolSpec, permanent: bool, taken: set[str]) -> JsonDict:
        name = _fresh(_DISTRACTOR_NAMES, spec.name, taken, unit(self.key, "distractor", spec.name))
        self.distractors[name] = spec.name
        return {"distractor": name}

    # ------------------------------------------------------------------ what the agent sees
    def transform_specs(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        """The tool list after drift (renames), missing tools (hidden) and distractors (added)."""
        result = []
        decoys = {original: name for name, original in self.distractors.items()}
        for spec in specs:
            if not self.missing.get(spec.name, {}).get("permanent"):
                result.append(_drifted_spec(spec, self.drift[spec.name]) if spec.name in self.drift else spec)
            if spec.name in decoys:  # right next to the tool it imitates
                result.append(_distractor_spec(spec, decoys[spec.name]))
        return result

    def resolve(self, name: str, arguments: JsonDict) -> tuple[str, JsonDict, JsonDict | None]:
        """Map a visible name and arguments onto the real tool; a deprecated name gives a drift error plan."""
        for original, plan in self.drift.items():
            renamed = {new: old for old, new in plan["params"].items()}
            if name == plan["new_name"] and (name != original or set(renamed) & set(arguments)):
                return original, {renamed.get(k, k): v for k, v in arguments.items()}, None
            if name == original and (plan["new_name"] != original or set(plan["params"]) & set(arguments)):
                return original, arguments, {"kind": "schema_drift", "tool": original, "plan": plan}
        return name, arguments, None

    # ------------------------------------------------------------------ the schedule
    def begin_turn(self, turn: int) -> None:
        """A new step: the virtual clock moves on by `turn_seconds`."""
        self.turn = turn
        self.clock += self.config.turn_seconds

    def observe_latency(self, seconds: float) -> None:
        """A call took `seconds` of virtual time."""
        self.clock += max(0.0, seconds)

    def decide(self, tool: str) -> Decision | None:
        """The fault (if any) that hits this call of `tool`; advances the call counter."""
        index = self.calls
        self.calls += 1
        standing = self._standing(tool)
        if standing is not None:
            return standing
        settings = self.config.for_tool(tool)
        kinds = settings.kinds_in(CALL_KINDS)
        if self.config.solvable and tool in self.required:  # a silent corruption cannot be retried away
            kinds = {k: w for k, w in kinds.items() if k not in IMPLICIT_KINDS}
        guarded = self.config.solvable and self.last_faulted.get(tool, False)
        self.last_faulted[tool] = False
        if not kinds or guarded or unit(self.key, "call", index) >= settings.rate:
            return None
        self.last_faulted[tool] = True
        kind = _choose(kinds, unit(self.key, "kind", index))
        permanent = unit(self.key, "permanent", index) < settings.permanent
        if self.config.solvable and tool in self.required and kind != "price_change":
            permanent = False
        return self._new_decision(tool, kind, permanent, index)

    def _standing(self, tool: str) -> Decision | None:
        missing = self.missing.get(tool)
        if missing and (missing["permanent"] or self.turn <= missing["until_turn"]):
            return Decision("missing_tool", missing["permanent"], {"until_turn": missing["until_turn"]})
        if tool in self.rate_limits and self.clock < self.rate_limits[tool]:
            return Decision("rate_limit", False, {"retry_after": math.ceil(self.rate_limits[tool] - self.clock)})
        if tool in self.permanent:
            held = self.permanent[tool]
            return Decision(held["kind"], True, dict(held["detail"]))
        return None

    def _new_decision(self, tool: str, kind: str, permanent: bool, index: int) -> Decision:
        u = unit(self.key, "detail", index)
        detail: JsonDict = {"call_index": index}
        if kind == "http_error":
            table = _PERMANENT_STATUS if permanent else _TRANSIENT_STATUS
            detail["status"], detail["reason"] = table[int(u * len(table))]
        elif kind == "timeout":
            detail["timeout_s"] = self.config.timeout_s
        elif kind == "rate_limit" and not permanent:
            detail["retry_after"] = 1 + int(u * 2)
            self.rate_limits[tool] = self.clock + detail["retry_after"]
        elif kind == "price_change":
            detail["multiplier"] = (2.0, 3.0, 5.0)[int(u * 3)]
        elif kind in ("wrong_value", "garbage"):
            detail["u"] = u
        if permanent and kind != "price_change":
            self.permanent[tool] = {"kind": kind, "detail": detail}
        return Decision(kind, permanent, detail)

    # ------------------------------------------------------------------ snapshot
    def get_state(self) -> JsonDict:
        """JSON-serializable schedule position and standing faults."""
        state: JsonDict = json.loads(
            json.dumps(
                {
                    "key": self.key,
                    "required": self.required,
                    "schemas": self.schemas,
                    "drift": self.drift,
                    "missing": self.missing,
                    "distractors": self.distractors,
                    "permanent": self.permanent,
                    "rate_limits": self.rate_limits,
                    "last_faulted": self.last_faulted,
                    "calls": self.calls,
                    "clock": self.clock,
                    "turn": self.turn,
                }
            )
        )
        return state

    def set_state(self, state: JsonDict) -> None:
        """Restore `get_state`'s output."""
        for name, value in json.loads(json.dumps(state)).items():
            setattr(self, name, value)


# ---------------------------------------------------------------------- results of faults
def event(kind: str, tool: str | None, step: int, permanent: bool, detail: JsonDict | None = None) -> JsonDict:
    """A labelled fault event (the `FaultEvent` schema as a dict)."""
    return {
        "kind": kind,
        "tool": tool,
        "step": step,
        "explicit": kind not in IMPLICIT_KINDS,
        "transient": not permanent,
        "detail": dict(detail or {}),
    }


def error_result(tool: str, decision: Decision) -> ToolResult:
    """The explicit error a call receives for a fault that stops it from running."""
    d = decision.detail
    if decision.kind == "http_error":
        hint = "retrying will not help" if decision.permanent else "retry the call"
        payload = {"status": d["status"], "error": d["reason"], "message": f"{tool} failed upstream; {hint}."}
        return ToolResult.failure(ErrorKind.HTTP, json.dumps(payload))
    if decision.kind == "timeout":
        text = f"the call to {tool} did not answer within {d['timeout_s']:g} s and was not executed"
        return ToolResult.failure(ErrorKind.TIMEOUT, json.dumps({"status": 504, "error": "Timeout", "message": text}))
    if decision.kind == "rate_limit":
        return ToolResult.failure(ErrorKind.RATE_LIMIT, json.dumps(_rate_limit_payload(tool, decision)))
    if decision.kind == "missing_tool":
        when = "for the rest of the episode" if decision.permanent else "temporarily; retry on a later turn"
        payload = {
            "status": 404 if decision.permanent else 503,
            "error": "Unavailable",
            "message": f"{tool} is unavailable {when}.",
        }
        return ToolResult.failure(ErrorKind.UNAVAILABLE, json.dumps(payload))
    raise ValueError(f"fault kind {decision.kind!r} does not produce an error result")


def _rate_limit_payload(tool: str, decision: Decision) -> JsonDict:
    if decision.permanent:
        return {
            "status": 429,
            "error": "Quota exceeded",
            "message": f"the quota for {tool} is used up",
            "retry_after": None,
        }
    seconds = decision.detail["retry_after"]
    text = f"rate limit for {tool} exceeded; retry after {seconds} s"
    return {"status": 429, "error": "Too Many Requests", "message": text, "retry_after": seconds}


def deprecation_result(tool: str, plan: JsonDict) -> ToolResult:
    """The error a call with a drifted (old) tool or parameter name receives."""
    if plan["new_name"] != tool:
        text = f"'{tool}' is deprecated and was renamed to '{plan['new_name']}'; call '{plan['new_name']}' instead"
    else:
        pairs = ", ".join(f"'{old}' is now '{new}'" for old, new in plan["params"].items())
        text = f"parameters of '{tool}' were renamed: {pairs}"
    payload = {"status": 410, "error": "Deprecated", "message": text}
    payload.update(replacement=plan["new_name"], renamed_parameters=plan["params"])
    return ToolResult.failure(ErrorKind.DEPRECATED, json.dumps(payload))


def deprecation_warning(tool: str, plan: JsonDict) -> str:
    """The notice shown when a transiently drifted tool is still called by its old name."""
    if plan["new_name"] != tool:
        return f"Warning: '{tool}' is deprecated and will be removed; use '{plan['new_name']}'."
    pairs = ", ".join(f"'{old}' -> '{new}'" for old, new in plan["params"].items())
    return f"Warning: parameters of '{tool}' are deprecated and will be removed: {pairs}."


def corrupt_wrong_value(content: Any, u: float) -> tuple[Any, JsonDict]:
    """A silently wrong but same-shaped value: one leaf changed (or one list item dropped)."""
    leaves = list(_leaves(content, ()))
    if not leaves:
        if isinstance(content, list) and content:
            return content[:-1], {"changed": "dropped_last_item"}
        return content, {"changed": None}
    path, value = leaves[int(u * len(leaves))]
    strings = sorted({v for _, v in leaves if isinstance(v, str) and v != value})
    new = _alter(value, u, strings)
    return _replace(content, path, new), {"changed": "/".join(map(str, path)) or "(root)"}


def _leaves(value: Any, path: tuple[Any, ...]) -> Any:
    if isinstance(value, dict):
        for key in sorted(value):
            yield from _leaves(value[key], (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    elif isinstance(value, (bool, int, float, str)):
        yield path, value


def _alter(value: Any, u: float, strings: list[str]) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1 + int(u * 1000) % 3
    if isinstance(value, float):
        return value * (1.1 + u)
    if value.strip().lstrip("-").isdigit():
        return str(int(value) + 1 + int(u * 1000) % 9)
    if strings:
        return strings[int(u * 7919) % len(strings)]
    return value[::-1] if len(set(value)) > 1 else value + "_"


def _replace(content: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(content) if isinstance(content, dict) else list(content)
    copy[path[0]] = _replace(content[path[0]], path[1:], new)
    return copy


def garbage(u: float) -> str:
    """Unusable output: truncated JSON, binary noise or markup, picked by `u`."""
    return _GARBAGE[int(u * len(_GARBAGE))] + hashlib.blake2b(repr(u).encode(), digest_size=6).hexdigest()


def neutral_value(schema: JsonDict | None) -> Any:
    """A schema-valid, empty answer: what a distractor tool returns."""
    kind = (schema or {}).get("type")
    if kind == "array":
        return []
    if kind == "object":
        props = (schema or {}).get("properties", {})
        return {name: neutral_value(props.get(name)) for name in (schema or {}).get("required", [])}
    return {"string": "", "integer": 0, "number": 0.0, "boolean": False}.get(str(kind), "ok")


def _fresh(templates: tuple[str, ...], name: str, taken: set[str], u: float) -> str:
    start = int(u * len(templates))
    for offset in range(len(templates)):
        candidate = templates[(start + offset) % len(templates)].format(name)
        if candidate not in taken:
            taken.add(candidate)
            return candidate
    candidate = f"{name}_{len(taken)}"
    taken.add(candidate)
    return candidate


def _drifted_spec(spec: ToolSpec, plan: JsonDict) -> ToolSpec:
    schema = json.loads(json.dumps(spec.input_schema))
    properties = schema.get("properties", {})
    for old, new in plan["params"].items():
        if old in properties:
            properties[new] = properties.pop(old)
        schema["required"] = [new if r == old else r for r in schema.get("required", [])]
    return spec.model_copy(update={"name": plan["new_name"], "input_schema": schema})


def _distractor_spec(spec: ToolSpec, name: str) -> ToolSpec:
    description = f"{spec.description} (compatible endpoint)" if spec.description else "Compatible endpoint."
    return spec.model_copy(update={"name": name, "description": description})


__all__ = [
    "ALL_KINDS",
    "CALL_KINDS",
    "EPISODE_KINDS",
    "Decision",
    "FaultConfig",
    "FaultInjector",
    "ToolFaultSettings",
    "corrupt_wrong_value",
    "deprecation_result",
    "error_result",
    "event",
    "garbage",
    "neutral_value",
    "unit",
]
