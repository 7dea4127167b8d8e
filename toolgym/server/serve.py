"""`toolgym serve`: run the env server under uvicorn (settings from `TOOLGYM_*` variables)."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys

from toolgym.server.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `toolgym serve`."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--access-log", action="store_true", help="log every request")


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    """Start uvicorn with `create_app()`; refuse a public address without API keys."""
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        sys.stderr.write(f"toolgym serve: {exc}\n")
        return 2
    if not settings.api_keys and not is_loopback(args.host):
        sys.stderr.write(
            f"toolgym serve: refusing to bind {args.host}: no API keys are configured, so anyone who can reach "
            "this address could drive and read every session. Set TOOLGYM_API_KEYS=<key>[,<key>...] "
            "or bind a loopback address such as 127.0.0.1.\n"
        )
        return 2
    try:
        import uvicorn
    except ImportError:
        sys.stderr.write("toolgym serve needs the server extra: pip install 'toolgym[server]'\n")
        return 2
    from toolgym.server.app import create_app

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(
        create_app(),  # reads the same TOOLGYM_* variables itself
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=args.access_log,
        ws_max_size=settings.max_request_bytes,
        ws_per_message_deflate=False,  # messages are small JSON: compressing them costs more CPU than it saves
    )
    return 0
