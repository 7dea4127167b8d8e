"""Config from YAML with overrides; metrics to jsonl/TensorBoard; the reward-curve PNG."""

from __future__ import annotations

import json

import pytest

from toolgym.trainers.config import TrainConfig, load_config
from toolgym.trainers.logging import MetricsWriter, plot_reward_curve, read_metrics

DEMO = "configs/calculator_tiny_grpo.yaml"


def test_yaml_config_with_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nrollout: {temperature: 0.7, workers: 2}\nalgorithm: {name: grpo}\n")
    cfg = load_config(
        path,
        [
            "rollout.temperature=0.9",
            "steps=5",
            "algorithm.overrides.loss.clip_high=0.28",
            "env.server_url=http://127.0.0.1:1",
        ],
    )
    assert isinstance(cfg, TrainConfig)
    assert cfg.name == "x" and cfg.steps == 5 and cfg.rollout.temperature == 0.9
    assert cfg.algorithm.overrides == {"loss": {"clip_high": 0.28}}
    assert cfg.env.server_url == "http://127.0.0.1:1"
    assert cfg.run_dir == tmp_path.parent / tmp_path.name / ".." / "runs" / "x" or cfg.run_dir.name == "x"


def test_demo_config_loads():
    cfg = load_config(DEMO)
    assert cfg.algorithm.name == "grpo" and cfg.rollout.workers == 2 and cfg.rollout.temperature == 0.7


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rollout.temprature=0.9", "rollout.temprature"),
        ("rollout.workers=many", "rollout.workers"),
        ("steps", "key.path=value"),
        ("rollout.prompts_per_step=3", "divisible"),
    ],
)
def test_bad_config_is_a_clear_error(override, message):
    with pytest.raises(ValueError, match=message):
        load_config(None, [override])


def test_metrics_jsonl_tensorboard_and_png(tmp_path):
    writer = MetricsWriter(tmp_path)
    for step in range(1, 4):
        writer.log(step, {"rollout/reward_mean": step / 4, "losses/policy": 0.1, "tools/error_rate": 0.0})
    writer.log(3, {"eval/success_rate": 0.5})
    with pytest.raises(ValueError, match="namespace"):
        writer.log(4, {"reward": 1.0})
    writer.close()
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3, 3]
    assert records[1]["rollout/reward_mean"] == 0.5
    assert json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])["eval/success_rate"] == 0.5
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    png = plot_reward_curve(tmp_path / "metrics.jsonl", tmp_path / "curve.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_trainers_package_imports_lazily():
    import subprocess
    import sys

    script = (
        "import sys, toolgym.trainers as t\n"
        "cfg = t.TrainConfig()\n"
        "print(sorted(m for m in ('torch', 'ray', 'transformers', 'vllm') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
