"""Training metrics: `metrics.jsonl`, TensorBoard scalars with namespaced keys, and a reward-curve PNG."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

METRIC_NAMESPACES = ("eval/", "rollout/", "losses/", "tools/", "sft/", "perf/", "charts/")


class MetricsWriter:
    """Appends one JSON line per logged step and mirrors every scalar to TensorBoard."""

    def __init__(self, run_dir: str | Path, tensorboard: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "metrics.jsonl"
        self._file = self.path.open("a", encoding="utf-8")
        self._tb: Any = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(log_dir=str(self.run_dir / "tensorboard"))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Write namespaced scalars for `step`."""
        bad = [k for k in metrics if not k.startswith(METRIC_NAMESPACES)]
        if bad:
            raise ValueError(f"metric keys need a namespace {METRIC_NAMESPACES}: {bad}")
        record = {"step": step, "time": time.time(), **{k: float(v) for k, v in metrics.items()}}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if self._tb is not None:
            for key, value in metrics.items():
                self._tb.add_scalar(key, float(value), step)

    def close(self) -> None:
        """Flush and close."""
        self._file.close()
        if self._tb is not None:
            self._tb.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a `metrics.jsonl`."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def plot_reward_curve(metrics_path: str | Path, out_path: str | Path) -> Path:
    """PNG of `rollout/reward_mean` (and `eval/success_rate` points) against the RL step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = read_metrics(metrics_path)
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, style in (("rollout/reward_mean", "-"), ("eval/success_rate", "o--")):
        points = [(r["step"], r[key]) for r in records if key in r]
        if points:
            ax.plot(*zip(*points, strict=True), style, label=key)
    ax.set_xlabel("RL step")
    ax.set_ylabel("reward / success")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    out = Path(out_path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
