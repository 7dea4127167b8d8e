"""`toolgym envs`: list the registered environment ids with their summaries."""

from __future__ import annotations

import argparse
import json

import gymnasium as gym

import toolgym  # noqa: F401 - registers the ids
from toolgym.envs.registration import ENV_IDS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `toolgym envs`."""
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    """List every registered toolgym id."""
    rows = [{"id": env_id, "summary": _summary(env_id)} for env_id in ENV_IDS]
    text = json.dumps(rows, indent=2) if args.json else "\n".join(f"{r['id']:32} {r['summary']}" for r in rows)
    print(text)  # noqa: T201 - CLI output
    return 0


def _summary(env_id: str) -> str:
    entry = gym.spec(env_id).entry_point
    module_name, _, class_name = str(entry).partition(":")
    import importlib

    doc = getattr(importlib.import_module(module_name), class_name).__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
