"""Benchmark of the env server: REST, WebSocket, batch and 16 concurrent clients, as ratios to a bare
FastAPI echo and to OpenEnv's server, measured side by side in the same run.

    .venv/bin/python bench/server.py            # needs .venv-openenv (see --help) for the OpenEnv columns

All servers run as uvicorn subprocesses on 127.0.0.1 with the same settings (one worker, no access log).
toolgym persists every step to a SQLite file before answering; the echo persists nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import websockets

REPO = Path(__file__).resolve().parent.parent
TOOL_CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "(12 + 7) * 3 - 5"}}</tool_call>'
ANSWER = "<answer>52</answer>"
CALC = "toolgym/Calculator-v0"
TICKS = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------- servers
@dataclass
class Proc:
    """A server subprocess."""

    name: str
    url: str
    process: subprocess.Popen[bytes]

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def status(self, key: str) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise KeyError(key)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(name: str, command: list[str], env: dict[str, str], health: str) -> Proc:
    port = free_port()
    command = [part.replace("{port}", str(port)) for part in command]
    process = subprocess.Popen(command, env={**os.environ, **env}, cwd=REPO, stdout=subprocess.DEVNULL)
    proc = Proc(name, f"http://127.0.0.1:{port}", process)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} server exited with {process.returncode}")
        try:
            if httpx.get(proc.url + health, timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{name} server did not start")


def start_servers(args: argparse.Namespace, workdir: Path) -> dict[str, Proc]:
    servers = {
        "echo": start("echo", [sys.executable, "bench/_echo_server.py", "{port}"], {}, "/healthz"),
        "toolgym": start(
            "toolgym",
            [sys.executable, "-m", "toolgym.cli", "serve", "--port", "{port}", "--log-level", "warning"],
            {"TOOLGYM_DATABASE_URL": f"sqlite:///{workdir / 'bench.db'}", "TOOLGYM_API_KEYS": ""},
            "/healthz",
        ),
    }
    if Path(args.openenv_python).exists():
        servers["openenv"] = start(
            "openenv", [args.openenv_python, "bench/_openenv_server.py", "{port}"], {"PYTHONPATH": str(REPO)}, "/health"
        )
    else:
        print(f"!! {args.openenv_python} not found: OpenEnv columns skipped (see --help)")
    return servers


# ---------------------------------------------------------------------------------------- clients
def toolgym_session(url: str, max_turns: int = 4) -> str:
    body = {"env_id": CALC, "kwargs": {"max_turns": max_turns}, "seed": 0}
    return str(httpx.post(url + "/v1/sessions", json=body).json()["session_id"])


def episode_messages(kind: str) -> list[str]:
    """One episode (reset, tool call, answer) as the WebSocket messages of each server."""
    if kind == "toolgym":
        return [json.dumps({"op": "reset"})] + [json.dumps({"op": "step", "action": a}) for a in (TOOL_CALL, ANSWER)]
    if kind == "openenv":
        steps = [json.dumps({"type": "step", "data": {"text": a}}) for a in (TOOL_CALL, ANSWER)]
        return [json.dumps({"type": "reset", "data": {}})] + steps
    return [json.dumps({"op": "step", "action": TOOL_CALL})] * 3


def ws_url(proc: Proc, kind: str, session_id: str | None) -> str:
    base = proc.url.replace("http://", "ws://")
    return {"toolgym": f"{base}/v1/sessions/{session_id}/ws", "openenv": f"{base}/ws", "echo": f"{base}/ws"}[kind]


async def ws_loop(url: str, messages: list[str], seconds: float) -> int:
    """Send the episode's messages one at a time for `seconds`; returns how many got answers."""
    count = 0
    async with websockets.connect(url, max_size=None) as socket_:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for message in messages:
                await socket_.send(message)
                reply = await socket_.recv()
                if '"error"' in reply[:12]:
                    raise RuntimeError(reply)
                count += 1
    return count


def rest_loop(proc: Proc, kind: str, seconds: float, session_id: str | None) -> int:
    """Sequential REST requests for `seconds` (toolgym: reset, step, step; echo: a same-size JSON body)."""
    count = 0
    with httpx.Client(base_url=proc.url) as client:
        calls: list[tuple[str, dict[str, Any]]]
        if kind == "toolgym":
            path = f"/v1/sessions/{session_id}"
            calls = [
                (path + "/reset", {}),
                (path + "/step", {"action": TOOL_CALL}),
                (path + "/step", {"action": ANSWER}),
            ]
        else:
            calls = [("/echo", {"action": TOOL_CALL})] * 3
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            for path, body in calls:
                response = client.post(path, json=body)
                if response.status_code != 200:
                    raise RuntimeError(response.text)
                count += 1
    return count


def _idle_session(client: httpx.Client) -> str:
    session_id = str(client.post("/v1/sessions", json={"env_id": CALC}).json()["session_id"])
    client.post(f"/v1/sessions/{session_id}/reset", json={"seed": 1})
    return session_id


def _concurrent_worker(job: tuple[str, list[str], list[str], float, str]) -> int:
    kind, urls, messages, seconds, transport = job
    if transport == "ws":

        async def run() -> list[int]:
            return await asyncio.gather(*(ws_loop(url, messages, seconds) for url in urls))

        return sum(asyncio.run(run()))
    return sum(asyncio.run(_rest_many(urls, seconds)))


async def _rest_many(urls: list[str], seconds: float) -> list[int]:
    async def one(url: str) -> int:
        count = 0
        base, found, session = url.rpartition("/v1/sessions/")
        if not found:  # the bare echo
            base, calls = url, [("/echo", {"action": TOOL_CALL})] * 3
        else:
            path = f"/v1/sessions/{session}"
            calls = [
                (path + "/reset", {}),
                (path + "/step", {"action": TOOL_CALL}),
                (path + "/step", {"action": ANSWER}),
            ]
        async with httpx.AsyncClient(base_url=base) as client:
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                for call_path, body in calls:
                    response = await client.post(call_path, json=body)
                    if response.status_code != 200:
                        raise RuntimeError(response.text)
                    count += 1
        return count

    return await asyncio.gather(*(one(url) for url in urls))


def concurrent(proc: Proc, kind: str, clients: int, seconds: float, transport: str = "ws") -> float:
    """`clients` concurrent clients (4 client processes) driving their own sessions; answers per second."""
    created = [toolgym_session(proc.url) for _ in range(clients)] if kind == "toolgym" else [None] * clients
    if transport == "ws":
        urls = [ws_url(proc, kind, session) for session in created]
    else:
        urls = [f"{proc.url}/v1/sessions/{session}" if session else proc.url for session in created]
    processes = 4
    jobs = [(kind, urls[i::processes], episode_messages(kind), seconds, transport) for i in range(processes)]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        started = time.perf_counter()
        total = sum(pool.map(_concurrent_worker, jobs))
        elapsed = time.perf_counter() - started
    for session in created:
        if session is not None:
            httpx.delete(f"{proc.url}/v1/sessions/{session}")
    return total / elapsed


# ---------------------------------------------------------------------------------------- measures
def cpu_rate(proc: Proc, fn: Callable[[], int]) -> tuple[float, float]:
    """(answers per wall second, server CPU microseconds per answer)."""
    cpu0, started = proc.cpu_seconds(), time.perf_counter()
    count = fn()
    elapsed, cpu = time.perf_counter() - started, proc.cpu_seconds() - cpu0
    return count / elapsed, cpu / max(count, 1) * 1e6


def batch_cpu(proc: Proc, sessions: int, seconds: float) -> tuple[float, float]:
    """Batch steps over `sessions` sessions: (env steps per second, server CPU µs per env step)."""
    ids = [toolgym_session(proc.url, max_turns=10**9) for _ in range(sessions)]
    with httpx.Client(base_url=proc.url, timeout=60) as client:
        for session_id in ids:
            client.post(f"/v1/sessions/{session_id}/reset", json={"seed": 1})
        body = {"steps": [{"session_id": s, "action": TOOL_CALL} for s in ids]}

        def loop() -> int:
            count, deadline = 0, time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                results = client.post("/v1/step", json=body).json()["results"]
                assert all(r["status"] == 200 for r in results), results[0]
                count += len(results)
            return count

        result = cpu_rate(proc, loop)
        for session_id in ids:
            client.delete(f"/v1/sessions/{session_id}")
    return result


def local_step_cpu(steps: int = 3000) -> float:
    """CPU µs of one in-process env step with the same action (what the env itself costs)."""
    import gymnasium as gym

    import toolgym  # noqa: F401

    env = gym.make(CALC, max_turns=10**9)
    env.reset(seed=1)
    started = time.process_time()
    for _ in range(steps):
        env.step(TOOL_CALL)
    return (time.process_time() - started) / steps * 1e6


def idle_memory(proc: Proc, kind: str, sessions: int) -> tuple[float, float]:
    """(KiB of server RSS per idle session, OS threads per idle session) on a fresh server.

    One session is created and reset first, so that imports and caches are not counted.
    """
    if kind == "toolgym":
        with httpx.Client(base_url=proc.url, timeout=60) as client:
            ids = [_idle_session(client) for _ in range(1)]
            rss0, threads0 = proc.status("VmRSS"), proc.status("Threads")
            ids += [_idle_session(client) for _ in range(sessions)]
            time.sleep(1)
            measured = (proc.status("VmRSS") - rss0) / sessions, (proc.status("Threads") - threads0) / sessions
            for session_id in ids:
                client.delete(f"/v1/sessions/{session_id}")
        return measured

    async def hold() -> tuple[float, float]:
        first = await websockets.connect(ws_url(proc, kind, None))
        await first.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        await first.recv()
        rss0, threads0 = proc.status("VmRSS"), proc.status("Threads")
        sockets = [await websockets.connect(ws_url(proc, kind, None)) for _ in range(sessions)]
        for socket_ in sockets:
            await socket_.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            await socket_.recv()
        await asyncio.sleep(1)
        measured = (proc.status("VmRSS") - rss0) / sessions, (proc.status("Threads") - threads0) / sessions
        for socket_ in [first, *sockets]:
            await socket_.close()
        return measured

    return asyncio.run(hold())


# ---------------------------------------------------------------------------------------- report
def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        servers = start_servers(args, Path(tmp))
        try:
            measure(args, servers, results)
        finally:
            for proc in servers.values():
                proc.stop()
    return results


def measure(args: argparse.Namespace, servers: dict[str, Proc], results: dict[str, Any]) -> None:
    s, r = args.seconds, args.rounds
    tg, echo, oe = servers["toolgym"], servers["echo"], servers.get("openenv")
    results["idle_kib_per_session/toolgym"], results["idle_threads_per_session/toolgym"] = (
        [v] for v in idle_memory(tg, "toolgym", args.idle_sessions)
    )
    if oe is not None:
        results["idle_kib_per_session/openenv"], results["idle_threads_per_session/openenv"] = (
            [v] for v in idle_memory(oe, "openenv", min(args.idle_sessions, 200))
        )
    session = toolgym_session(tg.url, max_turns=4)
    for _ in range(r):  # interleaved rounds: load from other processes hits every column alike
        for name, proc, kind in [("echo", echo, "echo"), ("toolgym", tg, "toolgym"), ("openenv", oe, "openenv")]:
            if proc is None:
                continue
            url = ws_url(proc, kind, session)
            messages = episode_messages(kind)
            ws_rate, ws_cpu = cpu_rate(proc, lambda u=url, m=messages: asyncio.run(ws_loop(u, m, s)))
            results.setdefault(f"ws_seq/{name}", []).append(ws_rate)
            results.setdefault(f"ws_cpu_us/{name}", []).append(ws_cpu)
            if kind != "openenv":  # OpenEnv's REST is stateless: no multi-turn episode over REST
                rest_rate, rest_cpu = cpu_rate(proc, lambda p=proc, k=kind: rest_loop(p, k, s, session))
                results.setdefault(f"rest_seq/{name}", []).append(rest_rate)
                results.setdefault(f"rest_cpu_us/{name}", []).append(rest_cpu)
        results.setdefault("conc16_ws/toolgym", []).append(concurrent(tg, "toolgym", 16, s))
        results.setdefault("conc16_rest/toolgym", []).append(concurrent(tg, "toolgym", 16, s, "rest"))
        results.setdefault("conc16_ws/echo", []).append(concurrent(echo, "echo", 16, s))
        results.setdefault("conc16_rest/echo", []).append(concurrent(echo, "echo", 16, s, "rest"))
        if oe is not None:
            results.setdefault("conc16_ws/openenv", []).append(concurrent(oe, "openenv", 16, s))
        rate_, cpu = batch_cpu(tg, args.batch, s)
        results.setdefault("batch/toolgym", []).append(rate_)
        results.setdefault("batch_cpu_us/toolgym", []).append(cpu)
    results["env_step_cpu_us/local"] = [local_step_cpu()]


def report(results: dict[str, Any]) -> None:
    med = {k: statistics.median(v) for k, v in results.items()}
    print("\nmetric                                 value   (median of rounds; per-round values)")
    for key, values in results.items():
        print(f"{key:36} {med[key]:10.1f}   {[round(v, 1) for v in values]}")
    print("\nratios                                                     value   target")
    _ratio(med, "WebSocket sequential / bare WebSocket echo", "ws_seq/toolgym", "ws_seq/echo", 0.9)
    _ratio(med, "OpenEnv WebSocket sequential / bare WebSocket echo", "ws_seq/openenv", "ws_seq/echo", None)
    _ratio(med, "WebSocket sequential / OpenEnv WebSocket", "ws_seq/toolgym", "ws_seq/openenv", None)
    _ratio(med, "stateful REST sequential / bare HTTP echo", "rest_seq/toolgym", "rest_seq/echo", None)
    _ratio(med, "stateful REST sequential / OpenEnv WebSocket", "rest_seq/toolgym", "ws_seq/openenv", 1.0)
    _ratio(med, "  ceiling: bare HTTP echo / OpenEnv WebSocket", "rest_seq/echo", "ws_seq/openenv", None)
    _ratio(med, "16 clients WebSocket / OpenEnv 16 clients WebSocket", "conc16_ws/toolgym", "conc16_ws/openenv", 2.0)
    _ratio(med, "16 clients REST / OpenEnv 16 clients WebSocket", "conc16_rest/toolgym", "conc16_ws/openenv", None)
    _ratio(med, "16 clients WebSocket / bare echo 16 clients", "conc16_ws/toolgym", "conc16_ws/echo", None)
    _ratio(med, "16 clients REST / bare echo 16 clients REST", "conc16_rest/toolgym", "conc16_rest/echo", None)
    _ratio(med, "batch env steps/s / OpenEnv 16 clients WebSocket", "batch/toolgym", "conc16_ws/openenv", None)
    overhead = med["batch_cpu_us/toolgym"] - med["env_step_cpu_us/local"]
    verdict = "ok" if med["batch_cpu_us/toolgym"] <= 50 else ("over (server part ok)" if overhead <= 50 else "over")
    print(f"{'batch: server CPU µs per env step (incl. env)':58} {med['batch_cpu_us/toolgym']:7.1f}   <= 50  {verdict}")
    print(f"{'batch: of which the env itself (in-process step)':58} {med['env_step_cpu_us/local']:7.1f}")
    print(f"{'batch: server overhead per env step (HTTP, JSON, commit)':58} {overhead:7.1f}")


def _ratio(med: dict[str, float], label: str, top: str, bottom: str, target: float | None) -> None:
    if top not in med or bottom not in med:
        print(f"{label:58}     n/a")
        return
    value = med[top] / med[bottom]
    verdict = "" if target is None else (f">= {target:g}  " + ("ok" if value >= target else "MISSED"))
    print(f"{label:58} {value:7.2f}x  {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median reported)")
    parser.add_argument("--batch", type=int, default=64, help="sessions per batch step")
    parser.add_argument("--idle-sessions", type=int, default=500, help="idle sessions for the memory figure")
    parser.add_argument(
        "--openenv-python",
        default=str(REPO / ".venv-openenv/bin/python"),
        help="python of a venv with `pip install openenv==0.10.0 gymnasium` (python -m venv .venv-openenv)",
    )
    parser.add_argument("--json", help="also write the raw results here")
    args = parser.parse_args()
    results = run(args)
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
