"""The Ray trainer end to end with tiny budgets: local envs, HTTP envs (real server), resume, and the CLI."""

from __future__ import annotations

import re

import httpx
import pytest

pytest.importorskip("torch")
pytest.importorskip("ray")

from toolgym.cli import main  # noqa: E402
from toolgym.trainers.config import load_config  # noqa: E402
from toolgym.trainers.logging import read_metrics  # noqa: E402
from toolgym.trainers.ray.driver import train  # noqa: E402

TINY_RUN = [
    "rollout.prompts_per_step=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=8",
    "rollout.max_tokens=160",
    "env.kwargs={max_turns: 2}",
    "eval.tasks=4",
    "eval.max_new_tokens=8",
    "algorithm.overrides={aggregator: token-mean, regularizers: {kl_k3: null}}",
]


def _config(tmp_path, tiny_path, *extra):
    return load_config(None, [*TINY_RUN, f"model.path={tiny_path}", f"output_dir={tmp_path}", *extra])


def _steps_total(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    return float(re.search(r"^toolgym_steps_total (\S+)$", text, re.M).group(1))


@pytest.fixture(scope="module")
def http_run(ray_session, env_server, tiny_path, tmp_path_factory):
    """One RL step over HTTP with 2 rollout workers, checkpointed; returns (config, result, env steps sent)."""
    before = _steps_total(env_server)
    out = tmp_path_factory.mktemp("runs")
    cfg = _config(
        out,
        tiny_path,
        "name=http",
        "steps=1",
        "checkpoint_every=1",
        f"env.server_url={env_server}",
        "rollout.workers=2",
    )
    result = train(cfg, progress=False)
    return cfg, result, _steps_total(env_server) - before


def test_train_over_http_with_two_workers(http_run):
    cfg, result, env_steps = http_run
    assert result.steps == 1 and 0.0 <= result.success_before <= 1.0
    records = read_metrics(cfg.run_dir / "metrics.jsonl")
    train_record = next(r for r in records if "rollout/reward_mean" in r)
    assert train_record["rollout/episodes"] == 4
    for key in ("rollout/tokens_per_s", "tools/calls_per_episode", "perf/learner_step_s", "rollout/kept_fraction"):
        assert key in train_record
    assert sum("eval/success_rate" in r for r in records) == 2
    train_turns = train_record["rollout/turns_mean"] * train_record["rollout/episodes"]
    assert env_steps >= train_turns + 2 * cfg.eval.tasks  # every env step went over HTTP
    assert (cfg.run_dir / "reward_curve.png").exists() and (cfg.run_dir / "config.yaml").exists()
    assert list((cfg.run_dir / "tensorboard").glob("events.*"))
    assert [p.name for p in (cfg.run_dir / "checkpoints").iterdir()] == ["step_000001"]


def test_cli_resumes_with_local_envs_and_prints_the_success_line(http_run, tiny_path, capsys):
    cfg, result, _ = http_run
    args = [
        "train",
        *TINY_RUN,
        f"model.path={tiny_path}",
        f"output_dir={cfg.output_dir}",
        "name=http",
        "steps=2",
        "rollout.workers=1",
        "--resume",
        "--no-progress",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "resumed from" in out and "step_000001" in out
    assert re.search(r"^success_rate: \d\.\d{3} -> \d\.\d{3}$", out, re.M)
    assert f"success_rate: {result.success_before:.3f}" in out  # the pre-RL number survives the resume
    steps = [r["step"] for r in read_metrics(cfg.run_dir / "metrics.jsonl") if "rollout/reward_mean" in r]
    assert steps == [1, 2]


def test_cli_rejects_a_bad_override(tmp_path, capsys):
    assert main(["train", "rollout.nope=1", f"output_dir={tmp_path}"]) == 2
    assert "rollout.nope" in capsys.readouterr().err


def test_joins_an_existing_cluster_with_address(ray_session):
    import subprocess
    import sys

    address = ray_session.get_runtime_context().gcs_address
    script = (
        "import ray\n"
        "from toolgym.trainers.config import RayConfig\n"
        "from toolgym.trainers.ray.launcher import init_ray\n"
        f"started = init_ray(RayConfig(address={address!r}))\n"
        "print(started, ray.get_runtime_context().gcs_address, ray.cluster_resources().get('CPU'))\n"
        "ray.shutdown()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["False", address, "2.0"]
