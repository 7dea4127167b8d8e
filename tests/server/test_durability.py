"""Crash safety (SIGKILL mid-episode), idle expiry, the loopback rule, and `toolgym export`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import KEY_A, REPO, Server

CALC = "toolgym/Calculator-v0"
AUTH = {"Authorization": f"Bearer {KEY_A}"}


def drive_until_killed(server: Server, session_id: str, acked: list[dict[str, Any]], stop: threading.Event) -> None:
    """Step a session as fast as possible, remembering every acknowledged step, until the server dies."""
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=10) as client:
        index = 0
        while not stop.is_set():
            action = f'<tool_call>{{"name": "calculator", "arguments": {{"expression": "{index} + 1"}}}}</tool_call>'
            try:
                response = client.post(f"/v1/sessions/{session_id}/step", json={"action": action})
            except httpx.HTTPError:
                return
            if response.status_code != 200:
                return
            acked.append({"index": index, "action": action, "observation": response.json()["observation"]})
            index += 1


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_sigkill_loses_no_acknowledged_step(
    kind: str, database_factory: Callable[[str], str], server_factory: Callable[..., Server], tmp_path: Path
) -> None:
    database_url = database_factory(kind)
    first = server_factory(database_url)
    client = httpx.Client(base_url=first.url, headers=AUTH, timeout=10)
    sessions = []
    for seed in range(4):
        session_id = client.post(
            "/v1/sessions", json={"env_id": CALC, "seed": seed, "kwargs": {"max_turns": 100000}}
        ).json()["session_id"]
        client.post(f"/v1/sessions/{session_id}/reset", json={})
        sessions.append(session_id)
    finished = client.post("/v1/sessions", json={"env_id": CALC}).json()["session_id"]
    client.delete(f"/v1/sessions/{finished}")
    acked: dict[str, list[dict[str, Any]]] = {s: [] for s in sessions}
    stop = threading.Event()
    threads = [threading.Thread(target=drive_until_killed, args=(first, s, acked[s], stop)) for s in sessions]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while min(len(a) for a in acked.values()) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    first.process.send_signal(signal.SIGKILL)  # mid-episode, with requests in flight
    first.process.wait(10)
    stop.set()
    for thread in threads:
        thread.join(10)
    assert min(len(a) for a in acked.values()) >= 20

    second = server_factory(database_url)
    client = httpx.Client(base_url=second.url, headers=AUTH, timeout=10)
    for session_id in sessions:
        assert client.get(f"/v1/sessions/{session_id}").json()["status"] == "interrupted"
        (episode,) = client.get(f"/v1/sessions/{session_id}/trajectory").json()["episodes"]
        assert episode["status"] == "interrupted"
        stored = {s["index"]: s for s in episode["steps"]}
        for step in acked[session_id]:
            assert stored[step["index"]]["action"] == step["action"]
            assert stored[step["index"]]["observation"] == step["observation"]
        assert len(stored) in (len(acked[session_id]), len(acked[session_id]) + 1)  # + one committed, unanswered
    assert client.get(f"/v1/sessions/{finished}").json()["status"] == "closed"
    assert client.post(f"/v1/sessions/{sessions[0]}/step", json={"action": "x"}).status_code == 404
    out = tmp_path / "episodes.jsonl"
    assert _export(database_url, "-o", str(out)).returncode == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    by_session = {r["session_id"]: r for r in records}
    assert set(sessions) <= set(by_session)
    assert len(by_session[sessions[0]]["steps"]) >= len(acked[sessions[0]])


def _export(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "toolgym.cli", "export", "--database-url", database_url, *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120, check=False)


def test_idle_sessions_expire_and_the_session_cap_holds(
    database_factory: Callable[[str], str], server_factory: Callable[..., Server], tmp_path: Path
) -> None:
    server = server_factory(database_factory("sqlite"), session_ttl_s="1", sweep_interval_s="0.2", max_sessions="2")
    client = httpx.Client(base_url=server.url, headers=AUTH, timeout=10)
    idle = client.post("/v1/sessions", json={"env_id": CALC}).json()["session_id"]
    client.post(f"/v1/sessions/{idle}/reset", json={"seed": 1})
    client.post(f"/v1/sessions/{idle}/step", json={"action": "<answer>3</answer>"})
    other = client.post("/v1/sessions", json={"env_id": CALC}).json()["session_id"]
    full = client.post("/v1/sessions", json={"env_id": CALC})
    assert full.status_code == 429 and full.json()["error"]["code"] == "too_many_sessions"

    def statuses() -> list[str]:
        return [client.get(f"/v1/sessions/{s}").json()["status"] for s in (idle, other)]

    deadline = time.monotonic() + 15
    while statuses() != ["expired", "expired"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert statuses() == ["expired", "expired"]
    assert client.post("/v1/sessions", json={"env_id": CALC}).status_code == 201
    metrics = dict(line.rsplit(" ", 1) for line in client.get("/metrics").text.splitlines() if not line.startswith("#"))
    assert int(metrics["toolgym_sessions_expired_total"]) >= 2
    # the expired session's episode is still exported, also as a Hugging Face dataset
    out, dataset_dir = tmp_path / "all.jsonl", tmp_path / "dataset"
    result = _export(server.database_url, "-o", str(out), "--session", idle, "--hf-dataset", str(dataset_dir))
    assert result.returncode == 0, result.stderr
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["session_status"] == "expired" and record["steps"][0]["action"] == "<answer>3</answer>"
    import datasets

    dataset = datasets.load_from_disk(str(dataset_dir))
    assert (
        dataset[0]["session_id"] == idle
        and json.loads(dataset[0]["steps"])[0]["reward"] == record["steps"][0]["reward"]
    )


def test_serve_refuses_public_address_without_keys() -> None:
    env = {**os.environ, "TOOLGYM_API_KEYS": ""}
    command = [sys.executable, "-m", "toolgym.cli", "serve", "--host", "0.0.0.0", "--port", "1"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, timeout=60, check=False)
    assert result.returncode == 2
    assert "refusing to bind 0.0.0.0" in result.stderr and "TOOLGYM_API_KEYS" in result.stderr
