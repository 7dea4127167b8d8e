"""`toolgym export`: write stored trajectories as JSONL (one episode a line) or a `datasets` dataset."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from toolgym.server.db import Store
from toolgym.server.settings import DEFAULT_DATABASE_URL


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `toolgym export`."""
    parser.add_argument(
        "--database-url",
        default=os.environ.get("TOOLGYM_DATABASE_URL") or DEFAULT_DATABASE_URL,
        help="database to read (default: $TOOLGYM_DATABASE_URL or sqlite:///./toolgym.db)",
    )
    parser.add_argument("-o", "--output", default="-", help="JSONL file to write ('-' for stdout)")
    parser.add_argument("--session", action="append", default=[], help="only these session ids (repeatable)")
    parser.add_argument("--env-id", help="only sessions of this env id")
    parser.add_argument("--status", help="only sessions with this status (live, closed, expired, interrupted)")
    parser.add_argument("--hf-dataset", metavar="DIR", help="also save a Hugging Face dataset to DIR")


def episodes(store: Store, session_ids: list[str]) -> Iterator[dict[str, Any]]:
    """Every stored episode of the sessions, one flat record each (session fields included)."""
    for session_id in session_ids:
        row = store.session(session_id)
        if row is None:
            continue
        for episode in store.trajectory(session_id):
            yield {
                "session_id": session_id,
                "env_id": row["env_id"],
                "env_kwargs": json.loads(row["kwargs_json"]),
                "session_status": row["status"],
                "parent_id": row["parent_id"],
                **episode,
            }


def run(args: argparse.Namespace) -> int:
    """Export the selected sessions' episodes."""
    store = Store(args.database_url)
    try:
        if not store.has_tables():
            sys.stderr.write(f"toolgym export: {args.database_url} holds no toolgym sessions (no tables)\n")
            return 1
        ids = args.session or store.session_ids(env_id=args.env_id, status=args.status)
        records = list(episodes(store, ids))
    finally:
        store.dispose()
    _write_jsonl(records, args.output)
    if args.hf_dataset:
        return _write_dataset(records, Path(args.hf_dataset))
    sys.stderr.write(f"exported {len(records)} episodes from {len(ids)} sessions\n")
    return 0


def _write_jsonl(records: list[dict[str, Any]], output: str) -> None:
    lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    if output == "-":
        sys.stdout.write(lines)
    else:
        Path(output).write_text(lines, encoding="utf-8")


def _write_dataset(records: list[dict[str, Any]], directory: Path) -> int:
    try:
        import datasets
    except ImportError:
        sys.stderr.write("--hf-dataset needs the datasets extra: pip install 'toolgym[datasets]'\n")
        return 2
    # nested infos vary between envs: store them as JSON text so every row has one schema
    flat = [
        {
            **{k: v for k, v in r.items() if k not in ("steps", "reset_info", "options", "env_kwargs")},
            "env_kwargs": json.dumps(r["env_kwargs"]),
            "options": json.dumps(r["options"]),
            "reset_info": json.dumps(r["reset_info"]),
            "steps": json.dumps(r["steps"]),
        }
        for r in records
    ]
    datasets.Dataset.from_list(flat).save_to_disk(str(directory))
    sys.stderr.write(f"exported {len(records)} episodes to {directory}\n")
    return 0
