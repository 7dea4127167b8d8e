"""Simulated-API latency: offline-backend calls and cache hits, as ratios to a plain Python tool call.

All three are measured in the same run on the same calls (a get, a list and a stateless lookup
over the default catalog, with a world of 3 records per entity):
- baseline: a `@tool` Python function over a dict, called through `Tool.invoke` (argument
  validation included), plus the bare function call for reference;
- offline: `Simulator(..., backend="offline", cache="off").call(...)` — the full pipeline
  (JSON-Schema validation, state read, schema-driven generation, output validation, state overlay);
- cache hit: the same calls with an in-memory SQLite cache already holding every answer.
Run: `OMP_NUM_THREADS=1 python bench/simulators.py [--calls 300] [--rounds 5]`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from toolgym.simulators import tool
from toolgym.simulators.simulated import Simulator
from toolgym.simulators.simulated.audit import sample_arguments

JsonDict = dict[str, Any]
CONTACTS: dict[str, JsonDict] = {}


@tool
def get_contact(contact_id: str) -> JsonDict:
    """A real tool: one contact by id.

    Args:
        contact_id: the contact's id.
    """
    return dict(CONTACTS[contact_id])


def seeded_simulator(cache: str) -> Simulator:
    """The default catalog with 3 records per entity, made through the simulator itself."""
    sim = Simulator(None, "offline", cache, seed=0)
    rng = random.Random(0)
    for spec in sim.catalog.specs:
        if sim.plans[spec.name].effect == "create":
            for _ in range(3):
                sim.call(spec.name, sample_arguments(spec, sim, rng))
    return sim


def workload(sim: Simulator, count: int) -> list[tuple[str, JsonDict]]:
    """`count` read-only calls cycling over get_contact, list_notes and get_weather_forecast."""
    ids = sorted(sim.store.table("contact"))
    calls = [
        ("get_contact", {"contact_id": ids[0]}),
        ("list_notes", {}),
        ("get_weather_forecast", {"city": "Lisbon", "days": 3}),
    ]
    return [calls[i % len(calls)] for i in range(count)]


def per_call(fn: Callable[[], None], count: int, rounds: int) -> float:
    """Median over rounds of the mean seconds per call."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) / count)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    offline, cached = seeded_simulator("off"), seeded_simulator("record")
    calls = workload(offline, args.calls)
    CONTACTS.update(offline.store.table("contact"))
    contact_args = {"contact_id": next(iter(CONTACTS))}
    for name, arguments in calls[:3]:  # warm the cache with every distinct call
        cached.call(name, arguments)

    def plain() -> None:
        for _ in range(args.calls):
            get_contact.invoke(contact_args)

    def bare() -> None:
        for _ in range(args.calls):
            get_contact.fn(**contact_args)

    def simulated(sim: Simulator) -> Callable[[], None]:
        def run() -> None:
            for name, arguments in calls:
                sim.call(name, arguments)

        return run

    base = per_call(plain, args.calls, args.rounds)
    rows = [
        ("plain Python tool (Tool.invoke)", base),
        ("bare Python function", per_call(bare, args.calls, args.rounds)),
        ("simulated, offline backend", per_call(simulated(offline), args.calls, args.rounds)),
        ("simulated, cache hit", per_call(simulated(cached), args.calls, args.rounds)),
    ]
    hits = cached.counts["cache_hits"]
    assert hits >= args.calls * args.rounds, "the cache-hit rows must really be hits"
    print(f"{'path':34} {'µs/call':>10} {'× plain tool':>13}")  # noqa: T201 - benchmark output
    for label, seconds in rows:
        print(f"{label:34} {seconds * 1e6:10.1f} {seconds / base:13.2f}")  # noqa: T201


if __name__ == "__main__":
    main()
