"""Fixtures of the trainer tests: the tiny model built locally, one Ray session, a real env server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def tiny() -> tuple[Any, Any]:
    """(tokenizer, random-init tiny model)."""
    pytest.importorskip("torch")
    from toolgym.trainers.tiny import build_tiny_model, build_tokenizer

    tokenizer = build_tokenizer()
    return tokenizer, build_tiny_model(tokenizer, seed=0)


@pytest.fixture(scope="session")
def tiny_small() -> tuple[Any, Any]:
    """(tokenizer, random-init tiny model at its smallest: hidden 32, 1 layer) — deep-copy before training."""
    pytest.importorskip("torch")
    from toolgym.trainers.tiny import build_tiny_model, build_tokenizer

    tokenizer = build_tokenizer()
    return tokenizer, build_tiny_model(tokenizer, hidden=32, layers=1, heads=2, mlp=64, seed=0)


@pytest.fixture(scope="session")
def tiny_path(tiny: tuple[Any, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model saved with `save_pretrained`."""
    from toolgym.trainers.tiny import save_tiny

    tokenizer, model = tiny
    return save_tiny(model, tokenizer, tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """One local Ray (2 CPUs, loopback) shared by every test that needs it."""
    ray = pytest.importorskip("ray")
    from toolgym.trainers.config import RayConfig
    from toolgym.trainers.ray.launcher import init_ray

    started = init_ray(RayConfig(num_cpus=2))
    yield ray
    if started:
        ray.shutdown()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def env_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `toolgym serve` process on a free loopback port (SQLite in a temp folder); yields its URL."""
    pytest.importorskip("fastapi")
    folder = tmp_path_factory.mktemp("server")
    port = _free_port()
    env = {**os.environ, "TOOLGYM_DATABASE_URL": f"sqlite:///{folder / 'toolgym.db'}"}
    env.pop("TOOLGYM_API_KEYS", None)
    log = (folder / "server.log").open("wb")
    command = [
        sys.executable,
        "-m",
        "toolgym.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


def _wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("server did not start")
