"""Audit a catalog's simulation: output validity per tool, and agreement with real implementations."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

from toolgym.schemas import ToolSpec
from toolgym.simulators.simulated.reconcile import schema_problem
from toolgym.simulators.simulated.simulator import Simulator
from toolgym.simulators.simulated.values import derive_seed, generate_value

JsonDict = dict[str, Any]
_COUNTERS = ("backend_calls", "invalid_outputs", "fallbacks", "backend_errors", "final_valid", "final_invalid")


@dataclass
class ToolAudit:
    """Audit numbers for one tool. `shape_agreement`/`exact_agreement` are None without a real implementation."""

    name: str
    calls: int = 0
    valid_first_try: int = 0
    backend_calls: int = 0
    invalid_outputs: int = 0
    fallbacks: int = 0
    backend_errors: int = 0
    final_valid: int = 0
    final_invalid: int = 0
    errors: int = 0
    compared: int = 0
    same_shape: int = 0
    same_value: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def validity(self) -> float:
        """Share of simulated outputs that were valid on the backend's first attempt."""
        return self.valid_first_try / self.calls if self.calls else 0.0

    @property
    def shape_agreement(self) -> float | None:
        """Share of compared calls whose simulated output has the real output's JSON shape."""
        return self.same_shape / self.compared if self.compared else None

    @property
    def exact_agreement(self) -> float | None:
        """Share of compared calls whose simulated output equals the real one."""
        return self.same_value / self.compared if self.compared else None

    def as_dict(self) -> JsonDict:
        """JSON-serializable numbers, derived ratios included."""
        data = asdict(self)
        data.update(validity=self.validity, shape_agreement=self.shape_agreement, exact_agreement=self.exact_agreement)
        return data


def json_shape(value: Any) -> Any:
    """A value's structure without its contents: keys and JSON types (lists by their first item)."""
    if isinstance(value, dict):
        return {k: json_shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [json_shape(value[0])] if value else []
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "null" if value is None else type(value).__name__


def sample_arguments(spec: ToolSpec, simulator: Simulator, rng: random.Random) -> JsonDict:
    """Arguments for an audit call: generated from the input schema, ids pointing at stored entities."""
    arguments = generate_value(spec.input_schema, rng, full=rng.random() < 0.5)
    plan = simulator.plans[spec.name]
    if not isinstance(arguments, dict):
        return {}
    if plan.effect in ("get", "update", "delete") and plan.entity and plan.id_key:
        ids = sorted(simulator.store.table(plan.entity))
        if ids:
            arguments[plan.id_key] = rng.choice(ids)
    return arguments


def _seed_entities(simulator: Simulator, rng: random.Random, per_entity: int = 3) -> None:
    for spec in simulator.catalog.specs:
        if simulator.plans[spec.name].effect == "create":
            for _ in range(per_entity):
                simulator.call(spec.name, sample_arguments(spec, simulator, rng))


def audit_tool(simulator: Simulator, spec: ToolSpec, samples: int, rng: random.Random) -> ToolAudit:
    """Call one tool `samples` times through the simulator (and for real, where possible)."""
    report = ToolAudit(spec.name)
    real = simulator.catalog.implementations.get(spec.name)
    for _ in range(samples):
        arguments = sample_arguments(spec, simulator, rng)
        before = simulator.counts.copy()
        result = simulator.call(spec.name, arguments)
        delta = simulator.counts - before
        for name in _COUNTERS:
            setattr(report, name, getattr(report, name) + delta[name])
        if not result.ok:
            report.errors += 1
            continue
        report.calls += 1
        report.valid_first_try += int(
            simulator.last_report.get("attempts") == 1 and simulator.last_report.get("source") == "backend"
        )
        report.problems.extend(simulator.last_report.get("problems", [])[:1])
        if real is not None:
            _compare(report, real(arguments), result.content)
    report.problems = report.problems[:3]
    return report


def _compare(report: ToolAudit, real: Any, simulated: Any) -> None:
    if not real.ok:
        return
    report.compared += 1
    report.same_shape += int(json_shape(real.content) == json_shape(simulated))
    report.same_value += int(real.content == simulated)


def audit_catalog(catalog: Any = None, backend: Any = None, *, samples: int = 5, seed: int = 0) -> list[ToolAudit]:
    """Audit every tool of `catalog` with `backend`: validity of generated outputs (first try, after
    retries, offline fallbacks) and, for tools with a real implementation, agreement with it."""
    simulator = Simulator(catalog, backend, cache="off", seed=seed, simulate_all=True)
    rng = random.Random(derive_seed("audit", seed))
    _seed_entities(simulator, rng)
    return [audit_tool(simulator, spec, samples, rng) for spec in simulator.catalog.specs]


def output_problem(spec: ToolSpec, value: Any) -> str | None:
    """Why `value` is not a valid output of `spec` (None when it is)."""
    return schema_problem(value, spec.output_schema)
