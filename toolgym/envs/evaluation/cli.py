"""`toolgym eval`: run a policy on an env id (local or remote) for N tasks × k samples and write a report."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

import httpx

from toolgym.envs.evaluation.runner import POLICIES, EvalConfig, run_eval

logger = logging.getLogger(__name__)


def _json_dict(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object, e.g. '{\"calls\": 10}'")
    return value


def _rates(text: str) -> list[float]:
    try:
        rates = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"fault rates must be comma-separated numbers, got {text!r}") from None
    if not rates or any(not 0.0 <= r <= 1.0 for r in rates):
        raise argparse.ArgumentTypeError("fault rates must lie between 0 and 1")
    return rates


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `toolgym eval`."""
    parser.add_argument("env_id", help="a registered env id, e.g. toolgym/Calendar-v0")
    parser.add_argument("--policy", choices=POLICIES, default="oracle", help="who acts (default: oracle)")
    parser.add_argument("--tasks", "-n", type=int, default=10, help="number of tasks N (default 10)")
    parser.add_argument("--samples", "-k", type=int, default=1, help="samples per task k, for pass^k (default 1)")
    parser.add_argument("--concurrency", "-c", type=int, default=4, help="episodes run at once (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    parser.add_argument("--budget", type=_json_dict, help='budget JSON, e.g. \'{"calls": 8, "cost": 1.0}\'')
    parser.add_argument("--faults", type=_json_dict, help='faults JSON, e.g. \'{"rate": 0.2, "seed": 1}\'')
    parser.add_argument("--fault-rates", type=_rates, help="sweep these fault rates, e.g. 0,0.1,0.3")
    parser.add_argument("--env-kwargs", type=_json_dict, default={}, help="more env constructor kwargs as JSON")
    parser.add_argument("--remote", metavar="URL", help="run on a toolgym server instead of locally")
    parser.add_argument("--remote-api-key", default=os.environ.get("TOOLGYM_API_KEY"), help="server API key")
    parser.add_argument(
        "--base-url", help="OpenAI-compatible endpoint for --policy openai (e.g. http://127.0.0.1:8001/v1)"
    )
    parser.add_argument("--model", help="model name for --policy openai")
    parser.add_argument(
        "--api-key", default=os.environ.get("OPENAI_API_KEY"), help="endpoint key (default $OPENAI_API_KEY)"
    )
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0)")
    parser.add_argument("--max-steps", type=int, default=100, help="hard stop on steps per episode (default 100)")
    parser.add_argument("--out", default="eval-results", help="output folder (default ./eval-results)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    """Run the evaluation, write results.json, report.md and the plots, print a summary."""
    from toolgym.envs.evaluation.report import write_report

    try:
        config = EvalConfig(
            env_id=args.env_id,
            policy=args.policy,
            tasks=args.tasks,
            samples=args.samples,
            concurrency=args.concurrency,
            seed=args.seed,
            env_kwargs=args.env_kwargs,
            budget=args.budget,
            faults=args.faults,
            fault_rates=args.fault_rates,
            remote_url=args.remote,
            remote_api_key=args.remote_api_key,
            base_url=args.base_url,
            model=args.model,
            api_key=args.api_key,
            temperature=args.temperature,
            max_steps=args.max_steps,
        )
        results = run_eval(config, show_progress=not args.no_progress)
    except (ValueError, TypeError, KeyError, RuntimeError, httpx.HTTPError) as error:
        sys.stderr.write(f"toolgym eval: {error}\n")
        return 2
    paths = write_report(results, args.out)
    for run_ in results["runs"]:
        m = run_["metrics"]
        sys.stdout.write(
            f"fault rate {run_['fault_rate']:g}: success {m['success_rate']:.3f}, "
            f"pass^{config.samples} {m[f'pass^{config.samples}']:.3f}, PRR {_opt(m['prr'])}, "
            f"budget exhausted {m['budget_exhaustion_rate']:.3f}\n"
        )
    sys.stdout.write(f"wrote {paths['json']} and {paths['markdown']}\n")
    return 0


def _opt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"
