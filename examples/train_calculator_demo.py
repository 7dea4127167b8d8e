"""The learning demo (`make demo`): env server + tiny model + SFT warm start + GRPO over HTTP with 2 Ray workers.

Prints `success_rate: <before> -> <after>` and exits 1 if the warm start is outside 10–60% or RL gained < 0.25.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "calculator_tiny_grpo.yaml"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`toolgym serve` on a free loopback port, SQLite in `folder`; waits for /healthz."""
    port = free_port()
    env = {**os.environ, "TOOLGYM_DATABASE_URL": f"sqlite:///{folder / 'toolgym.db'}"}
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
    with (folder / "server.log").open("wb") as log:
        process = subprocess.Popen(command, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"toolgym serve exited with {process.returncode}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("toolgym serve did not start in 120 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. seed=2")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from toolgym.trainers.config import load_config
    from toolgym.trainers.ray.driver import train

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="toolgym-demo-") as tmp:
        server, url = start_server(Path(tmp))
        try:
            name = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
            cfg = load_config(CONFIG, [f"env.server_url={url}", f"name={name}", *args.overrides])
            print(f"env server: {url}; run: {cfg.run_dir}", flush=True)
            result = train(cfg, progress=True, on_line=lambda line: print(line, flush=True))
        except BaseException:
            print(f"server exit code: {server.poll()}; server log tail:", flush=True)
            print((Path(tmp) / "server.log").read_text(errors="replace")[-3000:], flush=True)
            raise
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
    minutes = (time.perf_counter() - start) / 60
    before, after = result.success_before, result.success_after
    print(f"SFT steps {result.sft_steps}, RL steps {result.steps}, {minutes:.1f} min in all")
    print(f"reward curve: {result.run_dir / 'reward_curve.png'}")
    ok = 0.10 <= before <= 0.60 and after - before >= 0.25
    print("demo thresholds met" if ok else "demo thresholds NOT met (warm start 10-60%, RL gain >= 0.25)")
    print(f"success_rate: {before:.3f} -> {after:.3f}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
