"""`toolgym audit CATALOG`: simulated-output validity per tool, and agreement with real implementations."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from toolgym.simulators.simulated.audit import ToolAudit, audit_catalog


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `toolgym audit`."""
    parser.add_argument(
        "catalog", help="catalog source: a .json/.py file, a module, 'mcp+stdio:…', 'mcp+http://…', 'default'"
    )
    parser.add_argument(
        "--backend",
        default="offline",
        help="'offline' (default), 'openai' (OPENAI_BASE_URL, TOOLGYM_SIM_MODEL), 'transformers:<dir>' or a JSON object",
    )
    parser.add_argument("--samples", type=int, default=5, help="calls per tool (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed for arguments and generation")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _backend(text: str) -> Any:
    return json.loads(text) if text.lstrip().startswith("{") else text


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(reports: list[ToolAudit]) -> str:
    """A fixed-width table: one row per tool, then a total row."""
    header = f"{'tool':32} {'calls':>5} {'valid@1':>7} {'invalid':>7} {'fallback':>8} {'errors':>6} {'shape':>5} {'exact':>5}"
    rows = [header]
    for r in reports:
        rows.append(
            f"{r.name[:32]:32} {r.calls:5d} {_ratio(r.validity):>7} {r.invalid_outputs:7d} {r.fallbacks:8d} "
            f"{r.errors:6d} {_ratio(r.shape_agreement):>5} {_ratio(r.exact_agreement):>5}"
        )
    calls = sum(r.calls for r in reports)
    first = sum(r.valid_first_try for r in reports)
    rows.append(
        f"{'TOTAL':32} {calls:5d} {_ratio(first / calls if calls else None):>7} "
        f"{sum(r.invalid_outputs for r in reports):7d} {sum(r.fallbacks for r in reports):8d} {sum(r.errors for r in reports):6d}"
    )
    return "\n".join(rows)


def run(args: argparse.Namespace) -> int:
    """Audit the catalog; exit 1 when some simulated output stayed invalid after reconciliation."""
    try:
        reports = audit_catalog(args.catalog, _backend(args.backend), samples=args.samples, seed=args.seed)
    except (ValueError, FileNotFoundError, ImportError, ConnectionError) as error:
        print(f"toolgym audit: {error}", file=sys.stderr)  # noqa: T201 - CLI output
        return 2
    text = json.dumps([r.as_dict() for r in reports], indent=2) if args.json else format_table(reports)
    print(text)  # noqa: T201 - CLI output
    return 1 if any(r.final_invalid for r in reports) else 0
