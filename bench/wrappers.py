"""Per-step overhead of budgets and fault injection, as a ratio to the bare env measured in the same run.

Each variant replays the gold actions of the same Calendar tasks; only `step` is timed, in CPU time (resets, which
build the world, are not).
Variants: bare (the core's fast path); a no-op hook (the core's hook path: what any hook costs);
budget (all four limits, tracker on); faults at rate 0 (the fault hook without faults);
faults at rate 0.1 (the schedule firing); budget + faults at 0.1. The best of `--rounds` is taken
per variant, and rounds interleave the variants so that machine noise hits them alike.
Run: `OMP_NUM_THREADS=1 python bench/wrappers.py [--tasks 100] [--rounds 15]`.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym

import toolgym  # noqa: F401 - registers the ids
from toolgym.envs import BaseHook

ENV_ID = "toolgym/Calendar-v0"
BUDGET = {"calls": 1000, "cost": 1000.0, "tokens": 1_000_000, "time": 1e6}
VARIANTS: dict[str, dict[str, Any]] = {
    "bare": {},
    "no-op hook": {"hooks": [BaseHook()]},
    "budget": {"budget": BUDGET},
    "faults rate 0": {"faults": {"rate": 0.0}},
    "faults rate 0.1": {"faults": {"rate": 0.1}},
    "budget + faults 0.1": {"budget": BUDGET, "faults": {"rate": 0.1}},
}


def gold_episodes(count: int) -> list[tuple[str, list[str]]]:
    """(task id, gold actions) for the first `count` Calendar tasks."""
    env = gym.make(ENV_ID)
    episodes = []
    for index in range(count):
        env.reset(options={"task_id": f"cal-{index}"})
        episodes.append((f"cal-{index}", list(env.unwrapped.task.gold_actions)))
    return episodes


def run(kwargs: dict[str, Any], episodes: list[tuple[str, list[str]]]) -> tuple[float, int]:
    """Seconds spent in `step` and steps taken (faulted calls are not retried: the step count stays equal)."""
    env = gym.make(ENV_ID, max_turns=50, **kwargs)
    steps, seconds = 0, 0.0
    clock = time.process_time  # CPU time: robust to other processes on a shared machine
    for seed, (task_id, actions) in enumerate(episodes):
        env.reset(seed=seed, options={"task_id": task_id})
        for action in actions:
            start = clock()
            _, _, terminated, truncated, _ = env.step(action)
            seconds += clock() - start
            steps += 1
            if terminated or truncated:
                break
    return seconds, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    episodes = gold_episodes(args.tasks)
    best: dict[str, float] = {}
    steps: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, kwargs in VARIANTS.items():
            seconds, count = run(kwargs, episodes)
            per_step = seconds / count
            best[name] = min(best.get(name, per_step), per_step)
            steps[name] = count
    bare, noop = best["bare"], best["no-op hook"]
    print(f"{ENV_ID}: {args.tasks} gold episodes, best of {args.rounds} rounds")
    print(f"{'variant':24} {'µs/step':>9} {'steps':>7} {'ratio to bare':>14} {'to no-op hook':>14}")
    for name, per_step in best.items():
        print(f"{name:24} {per_step * 1e6:9.1f} {steps[name]:7d} {per_step / bare:13.2f}x {per_step / noop:13.2f}x")


if __name__ == "__main__":
    main()
