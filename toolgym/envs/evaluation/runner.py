"""Run a policy on an env (local or remote) for N tasks × k samples, concurrently, and collect episode results."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym

from toolgym.envs.evaluation.policies import OpenAIPolicy, OraclePolicy, Policy, RandomPolicy
from toolgym.envs.metrics import summarize
from toolgym.schemas import Task
from toolgym.simulators.budget import count_tokens

JsonDict = dict[str, Any]
logger = logging.getLogger(__name__)
POLICIES = ("oracle", "random", "openai")


@dataclass
class EvalConfig:
    """What `toolgym eval` runs: env, policy, how many tasks and samples, and the budget/fault settings."""

    env_id: str
    policy: str = "oracle"
    tasks: int = 10
    samples: int = 1
    concurrency: int = 1
    seed: int = 0
    env_kwargs: JsonDict = field(default_factory=dict)
    budget: JsonDict | None = None
    faults: JsonDict | None = None
    fault_rates: list[float] | None = None
    remote_url: str | None = None
    remote_api_key: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    temperature: float = 0.0
    max_steps: int = 100

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; choose one of {POLICIES}")
        if self.policy == "openai" and not (self.base_url and self.model):
            raise ValueError("the openai policy needs a base URL and a model name (--base-url, --model)")
        if self.tasks < 1 or self.samples < 1 or self.concurrency < 1:
            raise ValueError("tasks, samples and concurrency must all be at least 1")


class _EnvPool:
    """One env per worker thread (envs are not thread-safe), closed together at the end."""

    def __init__(self, make: Callable[[], gym.Env[str, str]]) -> None:
        self._make, self._local = make, threading.local()
        self._all: list[gym.Env[str, str]] = []
        self._lock = threading.Lock()

    def get(self) -> gym.Env[str, str]:
        env = getattr(self._local, "env", None)
        if env is None:
            env = self._local.env = self._make()
            with self._lock:
                self._all.append(env)
        return env

    def close(self) -> None:
        for env in self._all:
            env.close()


def _env_kwargs(config: EvalConfig, faults: JsonDict | None) -> JsonDict:
    kwargs = dict(config.env_kwargs)
    if config.budget is not None:
        kwargs["budget"] = config.budget
    if faults is not None:
        kwargs["faults"] = faults
    return kwargs


def make_env(config: EvalConfig, faults: JsonDict | None) -> gym.Env[str, str]:
    """A local env by id, or a `RemoteEnv` session on the server at `remote_url`."""
    kwargs = _env_kwargs(config, faults)
    if config.remote_url:
        from toolgym.envs.remote import RemoteEnv

        return RemoteEnv(config.remote_url, config.env_id, kwargs, config.remote_api_key)
    return gym.make(config.env_id, **kwargs)


class TaskLookup:
    """The gold actions of a task by id, from a local copy of the env (works for remote runs too)."""

    def __init__(self, env_id: str, env_kwargs: JsonDict) -> None:
        self.env_id, self.env_kwargs = env_id, env_kwargs
        self._env: gym.Env[str, str] | None = None
        self._lock = threading.Lock()

    def task(self, env: gym.Env[str, str], task_id: str) -> Task | None:
        """The task of the current episode: the env's own when it is local, else a local lookup."""
        own = getattr(env.unwrapped, "task", None)
        if isinstance(own, Task):
            return own
        with self._lock:
            if self._env is None:
                self._env = gym.make(self.env_id, **self.env_kwargs)
            self._env.reset(options={"task_id": task_id})
            task = getattr(self._env.unwrapped, "task", None)
            return task if isinstance(task, Task) else None


def make_policy(config: EvalConfig, seed: int) -> Policy:
    """A fresh policy for one episode."""
    if config.policy == "oracle":
        return OraclePolicy()
    if config.policy == "random":
        return RandomPolicy(seed=seed)
    assert config.base_url and config.model
    return OpenAIPolicy(config.base_url, config.model, config.api_key, temperature=config.temperature)


def run_episode(
    env: gym.Env[str, str], policy: Policy, seed: int, task_id: str | None, lookup: TaskLookup, max_steps: int = 100
) -> JsonDict:
    """Play one episode (at most `max_steps` steps); return its result (success, calls, cost, tokens, faults, ...)."""
    obs, info = env.reset(seed=seed, options={"task_id": task_id} if task_id else None)
    task_id = str(info.get("task_id", task_id))
    task = lookup.task(env, task_id)
    policy.start(obs, info, task)
    result = _empty_result(task_id, seed, info)
    done, steps = False, 0
    while not done and steps < max_steps:
        action = policy.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        steps += 1
        done = terminated or truncated
        _account(result, action, float(reward), info, truncated)
    close = getattr(policy, "close", None)
    if close is not None:
        close()
    return _finish(result)


def _empty_result(task_id: str, seed: int, info: JsonDict) -> JsonDict:
    return {
        "task_id": task_id,
        "seed": seed,
        "success": False,
        "reward": 0.0,
        "turns": 0,
        "tool_calls": 0,
        "failed_calls": 0,
        "cost": 0.0,
        "tokens": 0,
        "time": 0.0,
        "truncated": False,
        "budget_exhausted": False,
        "faults": list(info.get("faults", [])),
        "components": {},
    }


def _account(result: JsonDict, action: str, reward: float, info: JsonDict, truncated: bool) -> None:
    calls = [r for r in info.get("tool_calls", []) if r.get("name")]
    result["turns"] += 1
    result["reward"] += reward
    result["tool_calls"] += len(calls)
    result["failed_calls"] += sum(1 for r in calls if not r.get("ok"))
    result["cost"] += sum(float(r.get("cost") or 0.0) for r in calls)
    result["time"] += sum(float(r.get("latency") or 0.0) for r in calls)
    result["tokens"] += count_tokens(action)
    result["faults"] += info.get("faults", [])
    result["truncated"] = truncated
    for name, value in info.get("reward_components", {}).items():
        result["components"][name] = result["components"].get(name, 0.0) + float(value)
    budget = info.get("budget") or {}
    result["budget_exhausted"] = bool(truncated and budget.get("exhausted"))


def _finish(result: JsonDict) -> JsonDict:
    components = result["components"]
    result["success"] = components["success"] >= 1.0 if "success" in components else result["reward"] >= 1.0
    result["cost"] = round(result["cost"], 9)
    return result


def _task_ids(config: EvalConfig, faults: JsonDict | None) -> list[str]:
    env = make_env(config, faults)
    try:
        return [str(env.reset(seed=config.seed + i)[1].get("task_id", "")) for i in range(config.tasks)]
    finally:
        env.close()


def run_config(config: EvalConfig, faults: JsonDict | None, progress: Any = None) -> list[JsonDict]:
    """All N × k episodes for one fault setting, `concurrency` at a time."""
    task_ids = _task_ids(config, faults)
    lookup = TaskLookup(config.env_id, dict(config.env_kwargs))
    pool = _EnvPool(lambda: make_env(config, faults))
    jobs = [(i, j) for i in range(config.tasks) for j in range(config.samples)]

    def one(job: tuple[int, int]) -> JsonDict:
        i, j = job
        seed = config.seed * 1_000_003 + i * 7_919 + j
        policy = make_policy(config, seed)
        result = run_episode(pool.get(), policy, seed, task_ids[i] or None, lookup, config.max_steps)
        result["sample"] = j
        if progress is not None:
            progress.update(1)
        return result

    try:
        with ThreadPoolExecutor(max_workers=config.concurrency) as executor:
            return list(executor.map(one, jobs))
    finally:
        pool.close()


def fault_settings(config: EvalConfig) -> list[tuple[float | None, JsonDict | None]]:
    """(fault rate, faults config) for each run: one per swept rate, or the single configured setting."""
    if not config.fault_rates:
        rate = (config.faults or {}).get("rate", 0.1 if config.faults is not None else 0.0)
        return [(float(rate), config.faults)]
    return [(float(r), {**(config.faults or {}), "rate": float(r)}) for r in config.fault_rates]


def run_eval(config: EvalConfig, show_progress: bool = True) -> JsonDict:
    """Run every setting and return the results: config, and per run its fault rate, metrics and episodes."""
    settings = fault_settings(config)
    total = len(settings) * config.tasks * config.samples
    from tqdm import tqdm

    runs = []
    with tqdm(total=total, desc=f"eval {config.env_id} [{config.policy}]", disable=not show_progress) as bar:
        for rate, faults in settings:
            episodes = run_config(config, faults, bar)
            runs.append(
                {
                    "fault_rate": rate,
                    "faults": faults,
                    "metrics": summarize(episodes, config.samples),
                    "episodes": episodes,
                }
            )
    public = {k: v for k, v in asdict(config).items() if k not in ("api_key", "remote_api_key")}
    return {"config": public, "runs": runs}
