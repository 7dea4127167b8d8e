"""Compare RL methods side by side on the tiny model: final success, tool calls per success, stability, vs GRPO.

Every method trains the same SFT-warm-started tiny policy (toolgym.trainers.tiny) for the same
budget (steps × groups × group size) on `toolgym/Calculator-v0`, with the same learner
(`toolgym.trainers.learner.Learner`) and engine (`TransformersEngine`). Rollouts go through each
method's rollout strategy (`toolgym.trainers.methods.strategies`), so EAPO gets its tool-free
rollouts, AXPO its forked resamples and ToolExpander its demonstrations; AKBE's dual path maps to
tools-off rollouts. Tool-efficiency methods also run on a second env (`--world-env`).

    python bench/methods.py --steps 8 --methods grpo,otc_grpo,hdpo --out runs/bench_methods

Writes `<out>/methods.md` (the Markdown table, also printed), `<out>/methods.png` and
`<out>/results.json`. Methods the in-process learner cannot run (a critic, offline data, MATPO's
worker sub-episodes, per-turn samples) are listed with the reason instead of a number.
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

EFFICIENCY_METHODS = ("otc_grpo", "hdpo", "eapo", "toolrla", "aspo")
UNSUPPORTED_KINDS = {
    "offline": "offline trajectories (StepTool)",
    "planner_worker": "worker sub-episodes (MATPO)",
    "per_turn": "per-turn samples (Flow-GRPO)",
}


@dataclass
class BenchConfig:
    """One budget for every method."""

    steps: int = 8
    prompts: int = 4
    group: int = 4
    eval_tasks: int = 64
    lr: float = 1e-4
    temperature: float = 0.7
    max_new_tokens: int = 48
    max_turns: int = 4
    seed: int = 0
    env_id: str = "toolgym/Calculator-v0"


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


class EnginePolicy:
    """A `TextPolicy` over the tiny engine: rebuilds the chat context and samples one assistant turn."""

    def __init__(self, engine: Any, tokenizer: Any, fmt: Any, params: Any) -> None:
        self.engine, self.tokenizer, self.fmt, self.params = engine, tokenizer, fmt, params
        self.calls = 0
        self.last_uncertainty = 0.0

    def __call__(self, prompt: str, history: Any, prefix: str) -> str:
        from toolgym.trainers.engines.base import GenRequest

        text = (
            self.fmt.prompt(prompt)
            + "".join(f"{a}{self.fmt.end_of_turn}{self.fmt.observation(o)}" for a, o in history)
            + prefix
        )
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        self.calls += 1
        out = self.engine.generate([GenRequest(f"b{self.calls}", ids)], self.params)[0]
        self.last_uncertainty = -sum(out.logprobs) / max(len(out.logprobs), 1)  # AXPO's prefix selection
        body = out.token_ids[:-1] if out.finish_reason == "stop" else out.token_ids
        return prefix + self.tokenizer.decode(body, skip_special_tokens=False)


def unsupported(preset: Any, needs_critic: bool) -> str:
    """Why the in-process learner cannot run this preset ('' if it can)."""
    if needs_critic:
        return "needs a critic (value head)"
    return UNSUPPORTED_KINDS.get(preset.rollout.kind, "")


def strategy_for(preset: Any) -> Any:
    """The method's rollout strategy; AKBE's dual path becomes tools-off rollouts."""
    from toolgym.trainers.methods.strategies import make_strategy
    from toolgym.trainers.methods.tier_b.eapo import ToolsOffMix

    if preset.rollout.kind == "dual_path":
        return ToolsOffMix(int(preset.rollout.options.get("n_tools_off", 2)))
    return make_strategy(dict(preset.rollout.options))


def make_runner(env_id: str, policy: Any, max_turns: int) -> Any:
    import gymnasium as gym

    import toolgym  # noqa: F401
    from toolgym.trainers.methods.strategies import ForkRunner

    return ForkRunner(lambda: gym.make(env_id), policy, max_turns=max_turns)


def evaluate(runner: Any, seeds: range) -> tuple[float, float]:
    """Greedy success rate and tool calls per successful episode."""
    from toolgym.trainers.methods.strategies import EpisodePlan

    traces = [runner.run(EpisodePlan(seed=s, group_id=s)) for s in seeds]
    wins = [t for t in traces if t.success]
    calls = sum(t.num_tool_calls for t in wins) / len(wins) if wins else math.nan
    return len(wins) / max(len(traces), 1), calls


class Setup:
    """The warm-started tiny policy, tokenizer and chat format shared by every run."""

    def __init__(
        self, out: Path, cfg: BenchConfig, model: str = "", sft_steps: int = 200, env_id: str = "toolgym/Calculator-v0"
    ) -> None:
        from transformers import AutoTokenizer

        from toolgym.trainers.config import TrainConfig
        from toolgym.trainers.tiny import TINY_FORMAT
        from toolgym.trainers.tiny.prepare import prepare_tiny_policy

        if model:
            self.path = Path(model)
        else:
            train_cfg = TrainConfig(name="bench", output_dir=str(out), seed=cfg.seed)
            train_cfg.env.id = env_id  # the warm start imitates this env's gold actions
            train_cfg.model.sft.max_steps, train_cfg.model.sft.validation_tasks = sft_steps, 32
            self.path = prepare_tiny_policy(train_cfg, out / "sft_model").path
        self.tokenizer, self.fmt, self.cfg = AutoTokenizer.from_pretrained(str(self.path)), TINY_FORMAT, cfg

    def params(self, greedy: bool) -> Any:
        from toolgym.trainers.engines.base import SamplingParams

        tok, fmt = self.tokenizer, self.fmt
        return SamplingParams(
            temperature=self.cfg.temperature,
            max_new_tokens=self.cfg.max_new_tokens,
            greedy=greedy,
            stop_ids=(fmt.end_id(tok),),
            forbidden_ids=tuple(fmt.forbidden_ids(tok)),
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def trace_format(self) -> Any:
        from toolgym.trainers.methods.trace_batch import TraceFormat

        f = self.fmt
        return TraceFormat(user=f.user, assistant=f.assistant, tool=f.tool, end=f.end_of_turn)


def learner_batch(learner: Any, batch: Any, step: int) -> Any:
    """Behaviour log-probs (on-policy: the current model) and the version, as an engine would record them."""
    import torch

    from toolgym.trainers.learner import token_logprobs

    with torch.no_grad():
        logp, _ = token_logprobs(learner.model, batch, learner.config.temperature)
    return batch.replace(
        rollout_logprobs=logp * batch.mask,
        policy_version=torch.full((batch.batch_size,), step),
        meta={**batch.meta, "step": step, "policy_version": step},
    )


def train_one(name: str, setup: Setup, env_id: str, before: tuple[float, float]) -> MethodResult:
    """Train `name` for the budget and evaluate it."""
    from transformers import AutoModelForCausalLM

    from toolgym.trainers.engines.hf import TransformersEngine
    from toolgym.trainers.learner import Learner, LearnerConfig
    from toolgym.trainers.methods import REGISTRY, build_algorithm
    from toolgym.trainers.methods.strategies import run_group
    from toolgym.trainers.methods.trace_batch import traces_to_batch

    cfg, preset = setup.cfg, REGISTRY.get(name)
    algo = build_algorithm(name)
    result = MethodResult(name, env_id, preset.tier, *before)
    if reason := unsupported(preset, algo.needs_critic):
        result.skipped = reason
        return result
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(str(setup.path))
    learner = Learner(model, algo, LearnerConfig(lr=cfg.lr, temperature=cfg.temperature))
    engine = TransformersEngine(AutoModelForCausalLM.from_pretrained(str(setup.path)), setup.tokenizer.pad_token_id)
    runner = make_runner(env_id, EnginePolicy(engine, setup.tokenizer, setup.fmt, setup.params(False)), cfg.max_turns)
    strategy, norms = strategy_for(preset), []
    rng = np.random.default_rng(cfg.seed)
    for step in range(cfg.steps):
        seeds = 1_000_000 + rng.integers(0, 2**30, size=cfg.prompts)
        traces = [t for g, s in enumerate(seeds) for t in run_group(runner, strategy, int(s), g, cfg.group)]
        result.reward_curve.append(float(statistics.mean(t.success for t in traces)))
        batch = learner_batch(learner, traces_to_batch(traces, setup.encode, setup.trace_format()), step)
        metrics = learner.rl_step(batch)
        norm = metrics.get("losses/grad_norm", math.nan)
        norms.append(norm)
        result.nonfinite_steps += int(not math.isfinite(metrics.get("losses/total", 0.0)))
        engine.update_weights(learner.state_dict(), step + 1)
    greedy = make_runner(env_id, EnginePolicy(engine, setup.tokenizer, setup.fmt, setup.params(True)), cfg.max_turns)
    result.success_after, result.calls_per_success = evaluate(greedy, range(cfg.eval_tasks))
    finite = [n for n in norms if math.isfinite(n)]
    result.grad_norm_mean = statistics.mean(finite) if finite else math.nan
    result.grad_norm_max = max(finite) if finite else math.nan
    result.seconds = time.perf_counter() - start
    return result


def safe_train(name: str, setup: Setup, env_id: str, before: tuple[float, float]) -> MethodResult:
    """`train_one`, recording an error as the result's note instead of stopping the whole comparison."""
    try:
        return train_one(name, setup, env_id, before)
    except Exception as error:  # noqa: BLE001 — one method's failure is a result, not a crash
        from toolgym.trainers.methods import REGISTRY

        return MethodResult(name, env_id, REGISTRY.get(name).tier, *before, skipped=f"error: {error!r}"[:200])


def baseline(setup: Setup, env_id: str) -> tuple[float, float]:
    """Success and calls per success of the warm-started policy before RL (greedy)."""
    from transformers import AutoModelForCausalLM

    from toolgym.trainers.engines.hf import TransformersEngine

    engine = TransformersEngine(AutoModelForCausalLM.from_pretrained(str(setup.path)), setup.tokenizer.pad_token_id)
    policy = EnginePolicy(engine, setup.tokenizer, setup.fmt, setup.params(True))
    return evaluate(make_runner(env_id, policy, setup.cfg.max_turns), range(setup.cfg.eval_tasks))


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
        "grad-norm mean / max | non-finite steps | seconds | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        base = grpo.get(r.env_id)
        delta = r.success_after - base.success_after if base and not r.skipped else math.nan
        lines.append(
            f"| {r.env_id} | `{r.method}` | {r.tier} | {_fmt(r.success_before)} → {_fmt(r.success_after)} | "
            f"{_fmt(delta, 3)} | {_fmt(r.calls_per_success, 2)} | {_fmt(r.grad_norm_mean, 2)} / "
            f"{_fmt(r.grad_norm_max, 2)} | {r.nonfinite_steps} | {r.seconds:.0f} | {r.skipped} |"
        )
    return "\n".join(lines) + "\n"


def plot(results: list[MethodResult], path: Path) -> None:
    """Final success (bars) and per-step rollout success (lines) for each method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in results if not r.skipped]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5))
    ax1.barh([f"{r.method} ({r.env_id.split('/')[-1]})" for r in done], [r.success_after for r in done])
    ax1.set_xlabel("greedy success after RL")
    for r in done:
        ax2.plot(r.reward_curve, label=r.method, linewidth=2.5 if r.method == "grpo" else 1.0)
    ax2.set_xlabel("RL step")
    ax2.set_ylabel("rollout success")
    ax2.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def default_methods() -> list[str]:
    """GRPO first, then every Tier A and Tier B method."""
    from toolgym.trainers.methods import REGISTRY

    rest = sorted(n for n in REGISTRY.names() if REGISTRY.get(n).tier in ("A", "B"))
    return ["grpo", *rest]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default="", help="comma-separated presets (default: grpo + Tier A + Tier B)")
    parser.add_argument("--world-env", default="toolgym/Calendar-v0", help="env for tool-efficiency methods ('' skips)")
    parser.add_argument("--env", default=BenchConfig.env_id, help="env every listed method trains on")
    parser.add_argument("--out", default="runs/bench_methods")
    parser.add_argument("--model", default="", help="a warm-started tiny model folder (default: SFT one into --out)")
    parser.add_argument("--sft-steps", type=int, default=200, help="SFT warm-start steps at most")
    for f in ("steps", "prompts", "group", "eval_tasks", "seed"):
        parser.add_argument(f"--{f.replace('_', '-')}", type=int, default=getattr(BenchConfig, f))
    parser.add_argument("--lr", type=float, default=BenchConfig.lr)
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
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        return report([MethodResult(**r) for r in json.loads((out / "results.json").read_text())], cfg, out)
    methods = [m for m in args.methods.split(",") if m] or default_methods()
    runs = [(m, cfg.env_id) for m in methods]
    if args.world_env:
        runs += [(m, args.world_env) for m in ("grpo", *EFFICIENCY_METHODS) if m in methods]
    envs = sorted({e for _, e in runs})
    setups = {
        env: Setup(out / env.split("/")[-1], cfg, args.model if env == cfg.env_id else "", args.sft_steps, env)
        for env in envs
    }
    before = {env: baseline(setups[env], env) for env in envs}
    results = []
    for name, env in runs:
        results.append(safe_train(name, setups[env], env, before[env]))
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
