"""Code-sandbox call latency: fresh and persistent sandboxes as ratios to a plain subprocess.

The baseline, measured in the same run, is the cheapest way to run a snippet out of process
without any isolation: ``subprocess.run([python, "-I", "-S", "-c", code])`` (the interpreter and
flags the sandboxes use). Each sandbox backend that
works here is timed twice: a fresh sandbox per call (``sandbox.run``: start, run, tear down) and
a call in a persistent session (``session.run``: the interpreter and its variables stay).
Wall-clock latencies are reported as median and p90. Target: a persistent-session call on the
default backend (bubblewrap) in at most 5 ms (median).
Run: `python bench/sandbox.py [--fresh 30] [--persistent 500] [--json]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

from toolgym.simulators.sandbox import SandboxLimits, available_backends, get_backend
from toolgym.simulators.sandbox._proc import host_python

CODE = "print(sum(range(100)))"
STATEFUL_CODE = "counter += 1\nprint(counter)"
TARGET_SECONDS = 0.005


def timed(call: Callable[[], Any], count: int) -> list[float]:
    """Wall-clock seconds of ``count`` calls (after one warm-up call)."""
    call()
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def summary(samples: list[float], baseline: float) -> dict[str, float]:
    """Median and p90 in milliseconds, and the median's ratio to the baseline's median."""
    median = statistics.median(samples)
    p90 = statistics.quantiles(samples, n=10)[-1] if len(samples) > 1 else median
    return {"median_ms": median * 1e3, "p90_ms": p90 * 1e3, "ratio": median / baseline, "calls": len(samples)}


def plain_subprocess() -> None:
    """The unsandboxed baseline: a fresh interpreter, output captured, nothing else."""
    proc = subprocess.run([host_python()[0], "-I", "-S", "-c", CODE], capture_output=True, check=True)
    assert proc.stdout == b"4950\n"


def measure_backend(name: str, fresh: int, persistent: int, baseline: float) -> dict[str, dict[str, float]]:
    """Time fresh-sandbox calls and persistent-session calls of one backend."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the subprocess fallback warns by design
        sandbox = get_backend(name, SandboxLimits(wall_time=30))

    def fresh_call() -> None:
        assert sandbox.run(CODE).stdout == "4950\n"

    results = {"fresh": summary(timed(fresh_call, fresh), baseline)}
    with sandbox.open_session() as session:
        session.run("counter = 0")

        def session_call() -> None:
            assert session.run(STATEFUL_CODE).ok

        results["persistent"] = summary(timed(session_call, persistent), baseline)
        assert int(session.run("counter").stdout) == persistent + 1  # state really persisted
    return results


def report(baseline: dict[str, float], results: dict[str, dict[str, dict[str, float]]]) -> None:
    """Print one line per measurement, then the verdict on the persistent-call target."""
    print(f"{'plain subprocess':28s} {baseline['median_ms']:8.2f} ms median {baseline['p90_ms']:8.2f} ms p90   1.00x")
    for name, modes in results.items():
        for mode, row in modes.items():
            label = f"{name} {mode}"
            print(f"{label:28s} {row['median_ms']:8.2f} ms median {row['p90_ms']:8.2f} ms p90 {row['ratio']:6.2f}x")
    default = next(iter(results), None)
    if default is not None:
        median = results[default]["persistent"]["median_ms"]
        verdict = "met" if median <= TARGET_SECONDS * 1e3 else "MISSED"
        print(f"target: {default} persistent call <= {TARGET_SECONDS * 1e3:.0f} ms median: {verdict} ({median:.2f} ms)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", type=int, default=30, help="calls of a fresh sandbox (and of the baseline)")
    parser.add_argument("--persistent", type=int, default=500, help="calls in a persistent session")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    args = parser.parse_args()
    baseline = summary(timed(plain_subprocess, args.fresh), 1.0)
    base_seconds = baseline["median_ms"] / 1e3
    baseline["ratio"] = 1.0
    backends = available_backends()
    results = {name: measure_backend(name, args.fresh, args.persistent, base_seconds) for name in backends}
    if args.json:
        print(json.dumps({"baseline": baseline, "backends": results}, indent=2))
    else:
        report(baseline, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
