"""The `toolgym` command line: each subcommand lives in its own module and is imported on use."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# subcommand name -> module defining `add_arguments(parser)` and `run(args) -> int`
SUBCOMMANDS: dict[str, str] = {
    "envs": "toolgym.envs.cli",
    "audit": "toolgym.simulators.simulated.audit_cli",
    "serve": "toolgym.server.serve",
    "export": "toolgym.server.export",
    "train": "toolgym.trainers.cli",
    "eval": "toolgym.envs.evaluation.cli",
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser; subcommand modules are imported only when chosen."""
    parser = argparse.ArgumentParser(
        prog="toolgym", description="toolgym: tool-use RL environments, server and trainers."
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        sub.add_parser(name, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `toolgym` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not args or args[0] not in SUBCOMMANDS:
        parser.parse_args(args)  # prints help / version / an error for unknown commands
        parser.print_help()
        return 2
    module = importlib.import_module(SUBCOMMANDS[args[0]])
    sub_parser = argparse.ArgumentParser(prog=f"toolgym {args[0]}", description=module.__doc__)
    module.add_arguments(sub_parser)
    return int(module.run(sub_parser.parse_args(args[1:])))


def _version() -> str:
    from toolgym import __version__

    return f"toolgym {__version__}"


if __name__ == "__main__":
    raise SystemExit(main())
