"""`toolgym train CONFIG [key=value ...]`: SFT warm start (tiny model), GRPO-family RL with Ray, evaluation."""

from __future__ import annotations

import argparse
import logging
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `toolgym train`."""
    parser.add_argument("config", nargs="?", default=None, help="YAML config (see configs/); omitted: defaults")
    parser.add_argument("overrides", nargs="*", help="overrides as dotted key=value, e.g. rollout.temperature=0.8")
    parser.add_argument("--resume", action="store_true", help="continue from the run's latest checkpoint")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    """Load the config, train, and print `success_rate: <before> -> <after>`."""
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        from toolgym.trainers.config import load_config

        config, overrides = args.config, list(args.overrides)
        if config is not None and "=" in config and not config.endswith((".yaml", ".yml")):
            config, overrides = None, [config, *overrides]  # no config file: the first word is an override
        cfg = load_config(config, overrides + (["resume=true"] if args.resume else []))
    except (OSError, ValueError) as error:
        sys.stderr.write(f"toolgym train: {error}\n")
        return 2
    try:
        from toolgym.trainers.ray.driver import rollout_planner, train
    except ImportError as error:
        sys.stderr.write(f"toolgym train: {error} (pip install 'toolgym[train]')\n")
        return 2
    try:
        rollout_planner(cfg)  # a method whose rollouts this trainer cannot make fails here, before any work
    except ValueError as error:
        sys.stderr.write(f"toolgym train: {error}\n")
        return 2
    result = train(cfg, progress=not args.no_progress, on_line=_say)
    _say(f"run: {result.run_dir} (RL steps {result.steps}; metrics.jsonl, tensorboard/, reward_curve.png)")
    _say(f"success_rate: {result.success_before:.3f} -> {result.success_after:.3f}")
    return 0
