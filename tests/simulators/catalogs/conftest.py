"""Fixtures: a real MCP server (the mcp SDK's MCPServer) over stdio and over streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVER = Path(__file__).with_name("mcp_demo_server.py")
DATA = Path(__file__).with_name("data")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"MCP demo server exited early: {process.stderr.read().decode() if process.stderr else ''}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"MCP demo server did not listen on port {port}")


@pytest.fixture(scope="session")
def mcp_stdio_source() -> str:
    """A catalog source that launches the demo server as a subprocess speaking MCP over stdio."""
    return f"mcp+stdio:{sys.executable} {SERVER} stdio --ttl 120"


@pytest.fixture(scope="session")
def mcp_http_source() -> Iterator[str]:
    """The demo server on 127.0.0.1 over streamable HTTP, for the whole session (stopped at the end)."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port), "--ttl", "300"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_port(port, process)
        yield f"mcp+http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
