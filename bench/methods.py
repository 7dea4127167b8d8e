"""Compare RL methods side by side on the tiny model: final success, tool calls per success, stability, vs GRPO.

Every method trains the same SFT-warm-started tiny policy (toolgym.trainers.tiny, stopped at 30%
greedy success like the learning demo, so RL has signal) for the same budget (steps × groups ×
group size) on `toolgym/Calculator-v0`, through what `toolgym train` runs: the rollout collector
with each method's rollout plan (`GroupPlanner`: EAPO's tool-free rollouts, ToolExpander's
demonstrations, AXPO's and ELPO's forks), `episodes_to_batch` and `Learner.rl_step` (critics,
Flow-GRPO's per-turn samples included). MATPO trains on `toolgym/PlannerWorker-v0` over the same
env, with its own warm start (planner and worker oracle episodes). Tool-efficiency methods also run
on a second env (`--world-env`).

    python bench/methods.py --steps 20 --methods grpo,otc_grpo,hdpo --out runs/bench_methods

Writes `<out>/methods.md` (the Markdown table, also printed), `<out>/methods.png` and
`<out>/results.json`. StepTool trains on offline episodes: four steps' worth sampled once by the warm
start, from which each step draws its batch.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

EFFICIENCY_METHODS = ("otc_grpo", "otc_ppo", "hdpo", "eapo", "akbe", "toolrla", "aspo")
UNSUPPORTED_KINDS: dict[str, str] = {}
PLANNER_WORKER = "toolgym/PlannerWorker-v0"


@dataclass
class BenchConfig:
    """One budget for every method."""

    steps: int = 20
    prompts: int = 8
    group: int = 8
    eval_tasks: int = 128
    lr: float = 1e-4
    temperature: float = 0.7
    max_new_tokens: int = 48
    max_turns: int = 3
    seed: int = 0
    env_id: str = "toolgym/Calculator-v0"
    # The world env: a Calendar small enough for the tiny char-level model (3 people, 2-3 events,
    # schedule and cancel tasks). Its calls are long (create_event spells out title, day, hours and
    # attendees: ~140 characters), so a turn may write more tokens and an episode hold more.
    world_kwargs: dict[str, Any] = field(
        default_factory=lambda: {"people": 3, "events": [2, 3], "task_kinds": ["schedule", "cancel"]}
    )
    world_max_turns: int = 5
    world_max_new_tokens: int = 160
    world_max_tokens: int = 1024
    # Its warm start: longer episodes, so smaller SFT batches (more updates per minute) and more of them.
    world_sft_batch: int = 16
    world_sft_steps: int = 1500
    world_sft_check_every: int = 25  # a greedy validation of 128 Calendar tasks costs ~15 s: not every 5 steps
    sft_threads: int = 1


@dataclass
class MethodResult:
    """What one method achieved."""

    method: str
    env_id: str
    tier: str
    success_before: float = math.nan
    success_after: float = math.nan
    calls_per_success: float = math.nan
    grad_norm_mean: float = math.nan
    grad_norm_max: float = math.nan
    nonfinite_steps: int = 0
    reward_curve: list[float] = field(default_factory=list)
    seconds: float = 0.0
    skipped: str = ""


def unsupported(preset: Any) -> str:
    """Why `toolgym train`'s path cannot run this preset ('' if it can)."""
    return UNSUPPORTED_KINDS.get(preset.rollout.kind, "")


def env_of(name: str, env_id: str) -> tuple[str, dict[str, Any]]:
    """The env a method trains on: MATPO's planner-worker env over `env_id`, else `env_id` itself."""
    from toolgym.trainers.methods import REGISTRY

    if REGISTRY.get(name).rollout.kind == "planner_worker":
        return PLANNER_WORKER, {"env_id": env_id}
    return env_id, {}


def env_kwargs(env_id: str, cfg: BenchConfig, inner: dict[str, Any]) -> dict[str, Any]:
    """Constructor kwargs: the turn limit (on the inner env of the planner-worker env); the world env's shape."""
    if env_id == PLANNER_WORKER:
        return {**inner, "env_kwargs": {"max_turns": cfg.max_turns + 2}}
    if is_world(env_id, cfg):
        return {**inner, **cfg.world_kwargs, "max_turns": cfg.world_max_turns}
    return {**inner, "max_turns": cfg.max_turns}


def is_world(env_id: str, cfg: BenchConfig) -> bool:
    """Whether `env_id` is the second (world) env rather than the one every method trains on."""
    return env_id not in (cfg.env_id, PLANNER_WORKER)


def evaluate(collector: Any, params: Any, seeds: range) -> tuple[float, float]:
    """Greedy success rate and tool calls per successful task episode."""
    from toolgym.trainers.rollouts.collector import EpisodeSpec
    from toolgym.trainers.rollouts.stats import is_success, success_rate, task_episodes

    episodes = collector.collect([EpisodeSpec(s, s) for s in seeds], params)
    wins = [ep for ep in task_episodes(episodes) if is_success(ep)]
    calls = sum(len(ep.tool_calls) for ep in wins) / len(wins) if wins else math.nan
    return success_rate(episodes), calls


class Setup:
    """The warm-started tiny policy, tokenizer and chat format shared by every run on one env."""

    def __init__(self, out: Path, cfg: BenchConfig, model: str = "", env_id: str = "toolgym/Calculator-v0") -> None:
        from toolgym.trainers.config import TrainConfig
        from toolgym.trainers.tiny import TINY_FORMAT
        from toolgym.trainers.tiny.prepare import prepare_tiny_policy
        from toolgym.trainers.tiny.tokenizer import load_tokenizer

        self.cfg = cfg
        self.env_id, self.kwargs = (
            env_id,
            env_kwargs(env_id, cfg, {} if env_id != PLANNER_WORKER else {"env_id": cfg.env_id}),
        )
        if model:
            self.path = Path(model)
        elif (out / "sft_model" / "config.json").exists():  # a warm start of an earlier run (delete it to redo)
            self.path = out / "sft_model"
        else:  # the demo's warm start: SFT on oracle episodes until 30% greedy success
            train_cfg = TrainConfig(name="bench", output_dir=str(out), seed=cfg.seed)
            train_cfg.env.id, train_cfg.env.kwargs = env_id, dict(self.kwargs)
            train_cfg.model.sft.target_success, train_cfg.model.sft.validation_tasks = 0.3, 128
            train_cfg.model.sft.max_steps, train_cfg.eval.max_new_tokens = 400, self.max_new_tokens(cfg)
            train_cfg.rollout.max_tokens, train_cfg.threads = self.max_tokens(cfg), cfg.sft_threads
            if is_world(env_id, cfg):
                sft = train_cfg.model.sft
                sft.batch_size, sft.max_steps, sft.check_every = (
                    cfg.world_sft_batch,
                    cfg.world_sft_steps,
                    cfg.world_sft_check_every,
                )
            self.path = prepare_tiny_policy(train_cfg, out / "sft_model").path
        self.tokenizer, self.fmt = load_tokenizer(str(self.path)), TINY_FORMAT

    def max_new_tokens(self, cfg: BenchConfig) -> int:
        """A turn's token cap: a planner's delegation and a world env's calls are spelled out character by character."""
        if self.env_id == PLANNER_WORKER:
            return 128
        return cfg.world_max_new_tokens if is_world(self.env_id, cfg) else cfg.max_new_tokens

    def max_tokens(self, cfg: BenchConfig) -> int:
        """An episode's token cap."""
        return cfg.world_max_tokens if is_world(self.env_id, cfg) else 512

    def collector(self, engine: Any) -> Any:
        """A collector over local envs of this setup's env."""
        from toolgym.trainers.rollouts.collector import RolloutCollector
        from toolgym.trainers.rollouts.envs import LocalEnvPool

        pool = LocalEnvPool(self.env_id, self.kwargs)
        return RolloutCollector(engine, self.tokenizer, self.fmt, pool, max_tokens=self.max_tokens(self.cfg))

    def engine(self) -> Any:
        from toolgym.trainers.engines.hf import TransformersEngine

        return TransformersEngine.from_pretrained(str(self.path))

    def params(self, collector: Any, greedy: bool, seed: int | None = None) -> Any:
        return collector.sampling(self.cfg.temperature, self.max_new_tokens(self.cfg), greedy=greedy, seed=seed)


def train_one(name: str, setup: Setup, before: tuple[float, float]) -> MethodResult:
    """Train `name` for the budget with `toolgym train`'s rollout path, in process, and evaluate it."""
    cfg, preset = setup.cfg, _preset(name)
    result = MethodResult(name, setup.env_id, preset.tier, success_before=before[0])
    if reason := unsupported(preset):
        result.skipped = reason
        return result
    start = time.perf_counter()
    learner, engine = _learner(name, setup), setup.engine()
    collector, planner = setup.collector(engine), _planner(preset, setup)
    norms, rng = [], np.random.default_rng(cfg.seed)
    offline = _offline_pool(collector, planner, setup, rng) if planner.offline else None
    for step in range(cfg.steps):
        episodes = (
            offline.draw(step, cfg.prompts * cfg.group) if offline else _rollouts(collector, planner, setup, rng, step)
        )
        result.reward_curve.append(_success(episodes))
        metrics = learner.rl_step(_batch(episodes, setup))
        norms.append(metrics.get("losses/grad_norm", math.nan))
        result.nonfinite_steps += int(not math.isfinite(metrics.get("losses/total", 0.0)))
        engine.update_weights(learner.state_dict(), step + 1)
    result.success_after, result.calls_per_success = evaluate(
        collector, setup.params(collector, True), range(cfg.eval_tasks)
    )
    finite = [n for n in norms if math.isfinite(n)]
    result.grad_norm_mean = statistics.mean(finite) if finite else math.nan
    result.grad_norm_max = max(finite) if finite else math.nan
    result.seconds = time.perf_counter() - start
    return result


def _preset(name: str) -> Any:
    from toolgym.trainers.methods import REGISTRY

    return REGISTRY.get(name)


def _learner(name: str, setup: Setup) -> Any:
    from transformers import AutoModelForCausalLM

    from toolgym.trainers.learner import Learner, LearnerConfig
    from toolgym.trainers.methods import build_algorithm

    model = AutoModelForCausalLM.from_pretrained(str(setup.path))
    forbidden = tuple(setup.fmt.forbidden_ids(setup.tokenizer))
    config = LearnerConfig(
        lr=setup.cfg.lr,
        temperature=setup.cfg.temperature,
        max_grad_norm=0.0,
        forbidden_ids=forbidden,
        recompute_old_logprobs=_preset(name).rollout.kind == "offline",  # StepTool: π_old of the current policy
    )
    return Learner(model, build_algorithm(name), config)


def _planner(preset: Any, setup: Setup) -> Any:
    from toolgym.trainers.config import EnvConfig
    from toolgym.trainers.rollouts.strategy import GroupPlanner

    size = 1 if preset.rollout.kind == "single_stream" else setup.cfg.group
    return GroupPlanner(preset, size, local_envs=True, env=EnvConfig(id=setup.env_id, kwargs=dict(setup.kwargs)))


def _rollouts(collector: Any, planner: Any, setup: Setup, rng: Any, step: int) -> list[Any]:
    """One step's groups (same budget for every method: a single-stream method gets prompts × group tasks)."""
    import asyncio

    from toolgym.trainers.rollouts.strategy import collect_planned

    cfg = setup.cfg
    single = _preset(planner.name).rollout.kind == "single_stream"
    groups, size = (cfg.prompts * cfg.group, 1) if single else (cfg.prompts, cfg.group)
    seeds = 1_000_000 + rng.integers(0, 2**30, size=groups)
    specs = [spec for g, s in enumerate(seeds) for spec in planner.group(int(s), step * groups + g, size)]
    params = setup.params(collector, False, seed=cfg.seed * 7919 + step)
    episodes = collect_planned(collector, specs, params, planner.fork_options, asyncio.run)
    planner.observe(episodes)
    return episodes


def _offline_pool(collector: Any, planner: Any, setup: Setup, rng: Any) -> Any:
    """StepTool's offline episodes: four steps' worth sampled once by the warm start, then drawn from each step."""
    from toolgym.trainers.rollouts.offline import DEFAULT_POOL_STEPS, OfflinePool

    steps = range(10_000, 10_000 + DEFAULT_POOL_STEPS)
    episodes = [ep for k in steps for ep in _rollouts(collector, planner, setup, rng, k)]
    return OfflinePool(episodes, setup.cfg.seed)


def _batch(episodes: list[Any], setup: Setup) -> Any:
    from toolgym.trainers.rollouts.to_batch import episodes_to_batch

    return episodes_to_batch(episodes, setup.tokenizer.pad_token_id, reward_key="success")


def _success(episodes: list[Any]) -> float:
    from toolgym.trainers.rollouts.stats import success_rate

    return success_rate(episodes)


def safe_train(name: str, setup: Setup, before: tuple[float, float]) -> MethodResult:
    """`train_one`, recording an error as the result's note instead of stopping the whole comparison."""
    try:
        return train_one(name, setup, before)
    except Exception as error:  # noqa: BLE001 — one method's failure is a result, not a crash
        tier, note = _preset(name).tier, f"error: {error!r}"[:200]
        return MethodResult(name, setup.env_id, tier, success_before=before[0], skipped=note)


def baseline(setup: Setup) -> tuple[float, float]:
    """Success and calls per success of the warm-started policy before RL (greedy)."""
    collector = setup.collector(setup.engine())
    return evaluate(collector, setup.params(collector, True), range(setup.cfg.eval_tasks))


def _fmt(x: float, digits: int = 3) -> str:
    return "—" if isinstance(x, float) and math.isnan(x) else f"{x:.{digits}f}"


def markdown(results: list[MethodResult], cfg: BenchConfig) -> str:
    """The side-by-side table; Δ columns are against GRPO on the same env."""
    grpo = {r.env_id: r for r in results if r.method == "grpo" and not r.skipped}
    lines = [
        f"Budget per method: {cfg.steps} steps × {cfg.prompts} groups × {cfg.group} episodes, lr {cfg.lr}, "
        f"greedy eval on {cfg.eval_tasks} tasks.",
        "",
        "| env | method | tier | success before → after | Δ vs GRPO | tool calls / success | "
        "grad-norm mean / max | largest drop of rollout success | non-finite steps | seconds | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        base = grpo.get(r.env_id)
        delta = r.success_after - base.success_after if base and not r.skipped else math.nan
        lines.append(
            f"| {r.env_id} | `{r.method}` | {r.tier} | {_fmt(r.success_before)} → {_fmt(r.success_after)} | "
            f"{_fmt(delta, 3)} | {_fmt(r.calls_per_success, 2)} | {_fmt(r.grad_norm_mean, 2)} / "
            f"{_fmt(r.grad_norm_max, 2)} | {_fmt(largest_drop(r.reward_curve))} | {r.nonfinite_steps} | "
            f"{r.seconds:.0f} | {r.skipped} |"
        )
    return "\n".join(lines) + "\n"


def largest_drop(curve: list[float]) -> float:
    """Stability: the largest fall of rollout success from its best so far (0: never fell)."""
    best, drop = -math.inf, 0.0
    for value in curve:
        best = max(best, value)
        drop = max(drop, best - value)
    return drop if curve else math.nan


def plot(results: list[MethodResult], path: Path) -> None:
    """Final success (bars) and, one panel per env, each method's rollout success per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in results if not r.skipped]
    envs = list(dict.fromkeys(r.env_id for r in done))
    fig, axes = plt.subplots(1, 1 + len(envs), figsize=(7 + 6 * len(envs), 6), squeeze=False)
    bars = axes[0][0]
    bars.barh([f"{r.method} ({r.env_id.split('/')[-1]})" for r in done], [r.success_after for r in done])
    bars.set_xlabel("greedy success after RL")
    for ax, env_id in zip(axes[0][1:], envs, strict=True):
        for r in (r for r in done if r.env_id == env_id):
            ax.plot(r.reward_curve, label=r.method, linewidth=2.5 if r.method == "grpo" else 1.0)
        ax.set_title(env_id)
        ax.set_xlabel("RL step")
        ax.set_ylabel("rollout success")
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def default_methods() -> list[str]:
    """GRPO first, then every Tier A and Tier B method."""
    from toolgym.trainers.methods import REGISTRY

    rest = sorted(n for n in REGISTRY.names() if REGISTRY.get(n).tier in ("A", "B"))
    return ["grpo", *rest]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default="", help="comma-separated presets (default: grpo + Tier A + Tier B)")
    parser.add_argument("--world-env", default="toolgym/Calendar-v0", help="env for tool-efficiency methods ('' skips)")
    parser.add_argument(
        "--world-kwargs", type=json.loads, default=None, help="JSON kwargs of the world env (default: a small Calendar)"
    )
    parser.add_argument("--env", default=BenchConfig.env_id, help="env every listed method trains on")
    parser.add_argument("--out", default="runs/bench_methods")
    parser.add_argument("--model", default="", help="a warm-started tiny model folder (default: SFT one into --out)")
    for f in ("steps", "prompts", "group", "eval_tasks", "seed"):
        parser.add_argument(f"--{f.replace('_', '-')}", type=int, default=getattr(BenchConfig, f))
    parser.add_argument("--lr", type=float, default=BenchConfig.lr)
    parser.add_argument("--sft-threads", type=int, default=1, help="torch threads of the warm starts")
    parser.add_argument("--report-only", action="store_true", help="render <out>/results.json (e.g. a partial run)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    cfg = BenchConfig(
        steps=args.steps,
        prompts=args.prompts,
        group=args.group,
        eval_tasks=args.eval_tasks,
        lr=args.lr,
        seed=args.seed,
        env_id=args.env,
        sft_threads=args.sft_threads,
    )
    if args.world_kwargs is not None:
        cfg.world_kwargs = args.world_kwargs
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        return report([MethodResult(**r) for r in json.loads((out / "results.json").read_text())], cfg, out)
    methods = [m for m in args.methods.split(",") if m] or default_methods()
    runs = [(m, env_of(m, cfg.env_id)[0]) for m in methods]
    if args.world_env:
        runs += [(m, args.world_env) for m in ("grpo", *EFFICIENCY_METHODS) if m in methods]
    runs.sort(key=lambda run: run[1] != cfg.env_id)  # the main env first: a partial run still compares it
    setups: dict[str, tuple[Setup, tuple[float, float]]] = {}
    results = []
    for name, env in runs:
        if env not in setups:  # warm start and baseline on first use
            setup = Setup(out / env.split("/")[-1], cfg, args.model if env == cfg.env_id else "", env)
            setups[env] = (setup, baseline(setup))
        results.append(safe_train(name, *setups[env]))
        print(f"{name} on {env}: {asdict(results[-1])['success_after']}", flush=True)
        (out / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    return report(results, cfg, out)


def report(results: list[MethodResult], cfg: BenchConfig, out: Path) -> int:
    """Write and print the table, and the plot."""
    table = markdown(results, cfg)
    (out / "methods.md").write_text(table)
    plot(results, out / "methods.png")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
