"""Fixtures for eval tests: a fake OpenAI-compatible model server and a real `toolgym serve` process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from eval_fakes import REPO, FakeOpenAI, free_port, wait_ready


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    yield server
    server.close()


@pytest.fixture(scope="module")
def toolgym_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `toolgym serve` subprocess over a temporary SQLite file; stopped at the end of the module."""
    folder = tmp_path_factory.mktemp("server")
    port = free_port()
    env = {**os.environ, "TOOLGYM_DATABASE_URL": f"sqlite:///{folder / 'toolgym.db'}", "PYTHONPATH": str(REPO)}
    env.pop("TOOLGYM_API_KEYS", None)
    command = [sys.executable, "-m", "toolgym.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    log = (folder / "server.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, folder / "server.log")
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()
