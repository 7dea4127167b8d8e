"""Trainer benchmark: rollout tokens/s and learner step time, toolgym vs TRL's GRPOTrainer, same run.

Both sides train the same warm-started tiny model (built here, or --model) on the same calculator
tasks with the same batch (prompts × group), one thread each. TRL runs in its own venv
(`--trl-python`, default `.venv-bench/bin/python`; TRL is not a toolgym dependency). Prints both
sides and the ratios; target: toolgym's rollout throughput ≥ 1.5× TRL's on CPU.

    python bench/trainer.py [--model PATH] [--steps 6] [--prompts 4] [--group 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ENV = "toolgym/Calculator-v0"


def prepare_model(path: Path) -> Path:
    """A tiny model warm-started to ~30% success (cached in `path`)."""
    from toolgym.trainers.config import load_config
    from toolgym.trainers.tiny.prepare import prepare_tiny_policy

    cfg = load_config(REPO / "configs" / "calculator_tiny_grpo.yaml", ["seed=1"])
    return prepare_tiny_policy(cfg, path).path


def run_toolgym(model_path: Path, steps: int, prompts: int, group: int, max_new_tokens: int) -> dict[str, float]:
    """toolgym's rollout (batched, KV cache across turns) and learner step on the same work as TRL's."""
    import torch

    from toolgym.trainers.engines.hf import TransformersEngine
    from toolgym.trainers.learner import Learner, LearnerConfig
    from toolgym.trainers.methods import build_algorithm
    from toolgym.trainers.rollouts.collector import EpisodeSpec, RolloutCollector
    from toolgym.trainers.rollouts.envs import LocalEnvPool
    from toolgym.trainers.rollouts.to_batch import episodes_to_batch
    from toolgym.trainers.tiny import TINY_FORMAT, load_tiny

    torch.set_num_threads(1)
    model, tokenizer = load_tiny(model_path)
    learner_model, _ = load_tiny(model_path)
    engine = TransformersEngine(model, tokenizer.pad_token_id)
    collector = RolloutCollector(engine, tokenizer, TINY_FORMAT, LocalEnvPool(ENV))
    algorithm = build_algorithm("grpo", {"aggregator": "token-mean", "regularizers": {"kl_k3": None}})
    forbidden = tuple(TINY_FORMAT.forbidden_ids(tokenizer))
    learner = Learner(learner_model, algorithm, LearnerConfig(lr=1e-4, temperature=0.7, forbidden_ids=forbidden))
    rows = []
    for step in range(steps):
        specs = [EpisodeSpec(100_000_000 + step * prompts + p, p) for p in range(prompts) for _ in range(group)]
        start = time.perf_counter()
        episodes = collector.collect(specs, collector.sampling(0.7, max_new_tokens, seed=step))
        gen_s = time.perf_counter() - start
        start = time.perf_counter()
        learner.rl_step(episodes_to_batch(episodes, tokenizer.pad_token_id))
        engine.update_weights(learner.state_dict(), learner.version)
        rows.append((gen_s, sum(ep.num_model_tokens for ep in episodes), len(episodes), time.perf_counter() - start))
    rows = rows[1:] if len(rows) > 2 else rows  # first step warms up
    gen_s, tokens, episodes = (sum(r[i] for r in rows) for i in range(3))
    return {
        "rollout_tokens_per_s": tokens / gen_s,
        "episodes_per_s": episodes / gen_s,
        "learner_step_s": sum(r[3] for r in rows) / len(rows),
        "step_s": sum(r[0] + r[3] for r in rows) / len(rows),
        "tokens_per_episode": tokens / episodes,
    }


def run_trl(python: str, model_path: Path, steps: int, prompts: int, group: int, max_new_tokens: int) -> dict:
    """TRL GRPOTrainer in its own venv (bench/_trl_grpo.py); its last stdout line is JSON."""
    command = [
        python,
        str(REPO / "bench" / "_trl_grpo.py"),
        "--model",
        str(model_path),
        "--steps",
        str(steps),
        "--prompts",
        str(prompts),
        "--group",
        str(group),
        "--max-new-tokens",
        str(max_new_tokens),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"TRL side failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="warm-started tiny model folder")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--trl-python", default=str(REPO / ".venv-bench" / "bin" / "python"))
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    model = args.model or prepare_model(REPO / "runs" / "bench" / "sft_model")
    work = (args.steps, args.prompts, args.group, args.max_new_tokens)
    ours = run_toolgym(model, *work)
    trl = run_trl(args.trl_python, model, *work)
    print(f"work: {args.prompts} prompts x {args.group} episodes, {args.steps} steps, tiny model {model}")
    for key in ("rollout_tokens_per_s", "episodes_per_s", "learner_step_s", "step_s", "tokens_per_episode"):
        print(f"{key:22s} toolgym {ours[key]:10.2f}   TRL {trl[key]:10.2f}")
    ratio = ours["rollout_tokens_per_s"] / trl["rollout_tokens_per_s"]
    print(f"rollout throughput ratio (toolgym / TRL): {ratio:.2f}x (target >= 1.5x)")
    print(f"learner step time ratio (TRL / toolgym): {trl['learner_step_s'] / ours['learner_step_s']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
