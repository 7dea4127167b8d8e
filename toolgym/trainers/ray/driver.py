"""The driver loop: roll out on the workers, update on the learner, sync weights, log, checkpoint."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from toolgym.trainers._deps import require
from toolgym.trainers.config import TrainConfig, to_dict
from toolgym.trainers.logging import MetricsWriter, plot_reward_curve
from toolgym.trainers.ray.launcher import Actors, init_ray, launch, shutdown
from toolgym.trainers.rollouts.collector import EpisodeSpec
from toolgym.trainers.rollouts.episode import Episode
from toolgym.trainers.rollouts.offline import DEFAULT_POOL_STEPS, OfflinePool, pool_seeds
from toolgym.trainers.rollouts.stats import rollout_metrics, success_rate
from toolgym.trainers.rollouts.strategy import GroupPlanner

logger = logging.getLogger(__name__)


@dataclass
class TrainResult:
    """What a run achieved."""

    run_dir: Path
    success_before: float
    success_after: float
    steps: int
    sft_steps: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def rollout_planner(cfg: TrainConfig) -> GroupPlanner:
    """The method's rollout strategy for this run; raises a clear error for rollouts `toolgym train` cannot make."""
    from toolgym.trainers.methods import resolve_preset

    preset = resolve_preset(cfg.algorithm.name, cfg.algorithm.overrides)
    return GroupPlanner(preset, cfg.rollout.group_size, local_envs=cfg.env.server_url is None, env=cfg.env)


def train_specs(
    cfg: TrainConfig, step: int, planner: GroupPlanner | None = None, seeds: list[int] | None = None, draw: int = 0
) -> list[list[EpisodeSpec]]:
    """The step's groups (same seed = same task), planned by the method's strategy, whole groups per worker.

    `seeds`: the tasks (a prompt sampler's picks), else fresh seeds; `draw` > 0: a refill draw of the
    step (more seeds, group ids of their own).
    """
    if seeds is None:
        rng = np.random.default_rng([cfg.seed, step] if draw == 0 else [cfg.seed, step, draw])
        seeds = list(cfg.rollout.train_seed_offset + rng.integers(0, 2**30, size=cfg.rollout.prompts_per_step))
    n, first = cfg.rollout.group_size, step * cfg.rollout.prompts_per_step + draw * 1_000_000_000
    groups = [
        planner.group(int(s), first + g, n) if planner is not None else [EpisodeSpec(int(s), first + g)] * n
        for g, s in enumerate(seeds)
    ]
    workers = min(cfg.rollout.workers, len(groups))
    per_worker = -(-len(groups) // workers)
    parts = [sum(groups[w * per_worker : (w + 1) * per_worker], []) for w in range(workers)]
    return parts + [[] for _ in range(cfg.rollout.workers - workers)]


def eval_specs(cfg: TrainConfig) -> list[list[EpisodeSpec]]:
    """Eval seeds 0..tasks-1, dealt round-robin to the workers."""
    specs = [EpisodeSpec(seed=i, group_id=i) for i in range(cfg.eval.tasks)]
    return [specs[w :: cfg.rollout.workers] for w in range(cfg.rollout.workers)]


def launch_rollouts(
    actors: Actors,
    parts: list[list[EpisodeSpec]],
    temperature: float,
    max_new_tokens: int,
    *,
    greedy: bool = False,
    seed: int | None = None,
    expand: dict[str, Any] | None = None,
) -> list[Any]:
    """Start every worker on its part (`expand`: a fork strategy's options); returns the object refs."""
    return [
        w.rollout.remote(
            p, temperature, max_new_tokens, greedy=greedy, seed=None if seed is None else seed + i, expand=expand
        )
        for i, (w, p) in enumerate(zip(actors.workers, parts, strict=True))
    ]


def gather_rollouts(refs: list[Any]) -> tuple[list[Episode], float]:
    """Episodes from every worker (one `ray.get` for the batch) and the slowest worker's seconds."""
    results = require("ray").get(refs)
    return [ep for episodes, _ in results for ep in episodes], max(s for _, s in results)


def run_rollouts(
    actors: Actors, parts: list[list[EpisodeSpec]], temperature: float, max_new_tokens: int, **kwargs: Any
) -> tuple[list[Episode], float]:
    """Roll out and wait."""
    return gather_rollouts(launch_rollouts(actors, parts, temperature, max_new_tokens, **kwargs))


def sync_weights(actors: Actors, wait: bool = True) -> list[Any]:
    """Learner → workers: the weights go through the object store once.

    Each worker applies them after the call it is busy with (actor calls run in order), so with
    `wait=False` a rollout already running finishes on the old weights (one step off-policy).
    """
    ray = require("ray")
    weights = actors.learner.state_dict.remote()
    version = ray.get(actors.learner.get_version.remote())
    refs = [w.update_weights.remote(weights, version) for w in actors.workers]
    if wait:
        ray.get(refs)
    return refs


def evaluate(actors: Actors, cfg: TrainConfig) -> float:
    """Greedy success rate on the eval tasks."""
    episodes, _ = run_rollouts(actors, eval_specs(cfg), 1.0, cfg.eval.max_new_tokens, greedy=True)
    return success_rate(episodes)


def prepare_policy(cfg: TrainConfig) -> tuple[str, int, float]:
    """The model folder to train (building the tiny model when no path is given); SFT steps and seconds."""
    if cfg.model.path is not None:
        return cfg.model.path, 0, 0.0
    from toolgym.trainers.tiny.prepare import prepare_tiny_policy

    prepared = prepare_tiny_policy(cfg, cfg.run_dir / "sft_model")
    sft_steps = prepared.sft.steps if prepared.sft is not None else 0
    return str(prepared.path), sft_steps, prepared.seconds


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest `checkpoints/step_*` folder, if any."""
    found = sorted((run_dir / "checkpoints").glob("step_*"))
    return found[-1] if found else None


def save_checkpoint(actors: Actors, run_dir: Path, step: int, before: float) -> None:
    """Learner state at `step` (the workers get weights from the learner on resume)."""
    ray = require("ray")
    ray.get(
        actors.learner.save.remote(
            str(run_dir / "checkpoints" / f"step_{step:06d}"), {"step": step, "success_before": before}
        )
    )


def train(cfg: TrainConfig, progress: bool = True, on_line: Callable[[str], None] | None = None) -> TrainResult:
    """Run SFT warm start (tiny model), evaluation, the RL loop and the final evaluation."""
    say = on_line or (lambda line: logger.info("%s", line))
    planner = rollout_planner(cfg)  # fails fast, before SFT and Ray, for rollouts this loop cannot make
    if planner.offline and not cfg.optim.recompute_old_logprobs:
        cfg.optim.recompute_old_logprobs = True
        planner.notes.append(
            f"method {planner.name!r} trains on offline episodes: π_old is recomputed by the learner at each update"
        )
    for note in planner.notes:
        logger.warning("%s", note)
        say(f"note: {note}")
    clock = _Clock(cfg)
    run_dir = cfg.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    model_path, sft_steps, sft_s = prepare_policy(cfg)
    say(f"policy: {model_path} (SFT steps {sft_steps}, {sft_s:.0f}s)")
    started = init_ray(cfg.ray, cfg.threads)
    _stop_on_sigterm()
    actors = None
    try:
        actors = launch(cfg, model_path)
        return _train_loop(cfg, actors, planner, say, progress, sft_steps, sft_s, clock)
    finally:
        shutdown(actors, started)


def _stop_on_sigterm() -> None:
    """SIGTERM ends the run through `finally` (actors and a local Ray are shut down, not orphaned)."""
    import signal
    import threading

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)


def _resume(cfg: TrainConfig, actors: Actors, say: Callable[[str], None]) -> tuple[int, float | None]:
    ray = require("ray")
    checkpoint = latest_checkpoint(cfg.run_dir) if cfg.resume else None
    if checkpoint is None:
        return 0, None
    extra = ray.get(actors.learner.load.remote(str(checkpoint)))
    sync_weights(actors)
    say(f"resumed from {checkpoint}")
    return int(extra["step"]), float(extra["success_before"])


def _train_loop(
    cfg: TrainConfig,
    actors: Actors,
    planner: GroupPlanner,
    say: Callable[[str], None],
    progress: bool,
    sft_steps: int,
    sft_s: float,
    clock: _Clock,
) -> TrainResult:
    ray = require("ray")
    from tqdm import tqdm

    writer = MetricsWriter(cfg.run_dir)
    start_step, before = _resume(cfg, actors, say)
    t0 = time.perf_counter()
    if before is None:
        before = evaluate(actors, cfg)
        writer.log(start_step, {"eval/success_rate": before})
    clock.eval_s = time.perf_counter() - t0
    say(f"eval before RL: success_rate {before:.3f}")
    step = start_step
    bar = tqdm(total=cfg.steps, initial=start_step, disable=not progress, desc="RL", unit="step")
    pending = None
    tasks = TaskDraw(cfg, planner)
    offline = offline_pool(cfg, actors) if planner.offline else None
    while step < cfg.steps and not clock.rl_over(t0):
        if offline is not None:  # StepTool: a draw from the fixed episodes, no rollout
            episodes, rollout_s, draws = (
                offline.draw(step, cfg.rollout.prompts_per_step * cfg.rollout.group_size),
                0.0,
                0,
            )
        else:
            pending = pending or _launch_train(cfg, actors, step, planner, tasks)
            episodes, rollout_s = gather_rollouts(pending)
            episodes, draws = tasks.refill(lambda parts: _sample(cfg, actors, parts), episodes, step)
        tasks.observe(episodes)
        planner.observe(episodes)
        learner_ref = actors.learner.step.remote(episodes)
        overlap = offline is None and cfg.rollout.off_policy_steps > 0 and step + 1 < cfg.steps
        pending = (
            _launch_train(cfg, actors, step + 1, planner, tasks) if overlap else None
        )  # runs while the learner updates
        metrics = rollout_metrics(episodes, rollout_s)
        metrics["rollout/generation_draws"] = float(draws)
        metrics["rollout/policy_version_min"] = float(min(ep.policy_version for ep in episodes))
        metrics.update(ray.get(learner_ref))
        sync_start = time.perf_counter()
        sync_weights(actors, wait=pending is None)
        metrics["perf/rollout_s"], metrics["perf/sync_s"] = rollout_s, time.perf_counter() - sync_start
        step += 1
        if cfg.eval.every and step % cfg.eval.every == 0:  # queued after the weight update on every worker
            metrics["eval/success_rate"] = evaluate(actors, cfg)
        writer.log(step, metrics)
        bar.update(1)
        bar.set_postfix(reward=f"{metrics['rollout/reward_mean']:.2f}")
        if cfg.checkpoint_every and step % cfg.checkpoint_every == 0:
            save_checkpoint(actors, cfg.run_dir, step, before)
    _finish(pending)
    bar.close()
    rl_s = time.perf_counter() - t0
    after = evaluate(actors, cfg)
    writer.log(step, {"eval/success_rate": after})
    writer.close()
    save_checkpoint(actors, cfg.run_dir, step, before)
    plot_reward_curve(cfg.run_dir / "metrics.jsonl", cfg.run_dir / "reward_curve.png")
    return TrainResult(cfg.run_dir, before, after, step, sft_steps, {"sft": sft_s, "rl": rl_s})


def offline_pool(cfg: TrainConfig, actors: Actors) -> OfflinePool:
    """An offline method's episodes: `rollout.offline_episodes` (default four steps' worth) sampled once now."""
    per_step = cfg.rollout.prompts_per_step * cfg.rollout.group_size
    size = cfg.rollout.offline_episodes or DEFAULT_POOL_STEPS * per_step
    seeds = pool_seeds(cfg.rollout.train_seed_offset, -(-size // cfg.rollout.group_size), cfg.seed)
    parts = train_specs(cfg, 0, None, seeds)
    episodes, _ = run_rollouts(actors, parts, cfg.rollout.temperature, cfg.rollout.max_new_tokens, seed=cfg.seed)
    logger.info("offline pool: %d episodes sampled from the starting policy", len(episodes))
    return OfflinePool(episodes[:size], cfg.seed)


def _launch_train(cfg: TrainConfig, actors: Actors, step: int, planner: GroupPlanner, tasks: TaskDraw) -> list[Any]:
    return launch_rollouts(
        actors,
        train_specs(cfg, step, planner, tasks.seeds(actors, step)),
        cfg.rollout.temperature,
        cfg.rollout.max_new_tokens,
        seed=cfg.seed * 1_000_003 + step * 97,
        expand=planner.fork_options,
    )


class TaskDraw:
    """The tasks of each step: fresh seeds, or picks from a pool (by the learner's prompt sampler: SPO, VSPO);
    and, for a method with a group filter (DAPO's dynamic sampling), more draws until enough groups are kept."""

    def __init__(self, cfg: TrainConfig, planner: GroupPlanner) -> None:
        from toolgym.trainers.rollouts.sampling import TaskPool, pool_size

        self.cfg, self.planner = cfg, planner
        size = pool_size(cfg.rollout.prompt_pool, planner.prompt_sampler)
        self.pool = TaskPool(cfg.rollout.train_seed_offset, size) if size else None
        self.group_filter = planner.group_filter()

    def seeds(self, actors: Actors, step: int) -> list[int] | None:
        """The step's task seeds; None: fresh seeds (`train_specs` draws them)."""
        if self.pool is None:
            return None
        n, seed = self.cfg.rollout.prompts_per_step, self.cfg.seed * 7_919 + step
        if self.planner.prompt_sampler:  # queued after the learner's update: the sampler sees the newest state
            picks = require("ray").get(actors.learner.sample_prompts.remote(self.pool.candidate_keys(), n, seed))
        else:
            picks = np.random.default_rng(seed).choice(len(self.pool.seeds), size=n, replace=False).tolist()
        return [self.pool.seeds[int(i)] for i in picks]

    def observe(self, episodes: list[Episode]) -> None:
        """Remember the prompt key of every task rolled out."""
        if self.pool is not None:
            self.pool.observe(episodes)

    def refill(
        self, sample: Callable[[list[list[EpisodeSpec]]], list[Episode]], episodes: list[Episode], step: int
    ) -> tuple[list[Episode], int]:
        """The groups the filter keeps, with more draws of fresh tasks (`sample(parts)` rolls them out) until
        `prompts_per_step` are kept, at most the filter's `max_num_gen_batches` draws. Returns the episodes
        and the draws made."""
        from toolgym.trainers.rollouts.sampling import first_groups, group_count, kept_groups

        if self.group_filter is None:
            return episodes, 1
        cfg, target = self.cfg, self.cfg.rollout.prompts_per_step
        kept = kept_groups(self.group_filter, episodes, cfg.rollout.reward_component)
        draws, limit = 1, int(getattr(self.group_filter, "max_num_gen_batches", 10))
        while group_count(kept) < target and draws < limit:
            parts = train_specs(cfg, step, self.planner, draw=draws)
            kept += kept_groups(self.group_filter, sample(parts), cfg.rollout.reward_component)
            draws += 1
        return (first_groups(kept, target) or episodes), draws


def _sample(cfg: TrainConfig, actors: Actors, parts: list[list[EpisodeSpec]]) -> list[Episode]:
    return run_rollouts(actors, parts, cfg.rollout.temperature, cfg.rollout.max_new_tokens)[0]


def _finish(pending: list[Any] | None) -> None:
    """Wait for (and drop) a rollout started ahead when RL stops early."""
    if pending:
        gather_rollouts(pending)


class _Clock:
    """When RL must stop: its own budget, or early enough for the final evaluation to fit the total budget."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.start = time.perf_counter()
        self.eval_s = 0.0
        self.step_s = 0.0
        self._last: float | None = None

    def rl_over(self, rl_start: float) -> bool:
        """Called before each RL step."""
        now = time.perf_counter()
        if self._last is not None:
            self.step_s = now - self._last
        self._last = now
        if self.cfg.time_budget_s > 0 and now - rl_start > self.cfg.time_budget_s:
            return True
        reserve = 1.5 * self.eval_s + self.step_s + 15.0  # final eval, one more step, checkpoint and plot
        return self.cfg.total_budget_s > 0 and now - self.start + reserve > self.cfg.total_budget_s
