"""Write eval results: `results.json`, a Markdown `report.md` and matplotlib plots (success vs fault rate, cost vs success)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from toolgym.envs.metrics import FAULT_CATEGORIES

JsonDict = dict[str, Any]
SUCCESS_PLOT = "success_vs_fault_rate.png"
COST_PLOT = "cost_vs_success.png"


def write_report(results: JsonDict, out_dir: str | Path) -> dict[str, Path]:
    """Write the JSON, the plots and the Markdown report into `out_dir`; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "results.json", "markdown": out / "report.md"}
    paths["json"].write_text(json.dumps(results, indent=2, default=str))
    paths["success_plot"] = plot_success_vs_fault_rate(results, out / SUCCESS_PLOT)
    paths["cost_plot"] = plot_cost_vs_success(results, out / COST_PLOT)
    paths["markdown"].write_text(markdown(results))
    return paths


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError("eval plots need matplotlib: pip install 'toolgym[eval]'") from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _k(results: JsonDict) -> int:
    return int(results["config"]["samples"])


def plot_success_vs_fault_rate(results: JsonDict, path: Path) -> Path:
    """Success rate, pass^k and PRR against the fault rate (one point per run)."""
    plt = _pyplot()
    runs = sorted(results["runs"], key=lambda r: r["fault_rate"] or 0.0)
    rates = [r["fault_rate"] or 0.0 for r in runs]
    fig, ax = plt.subplots(figsize=(6, 4))
    series = [("success rate", "success_rate", "o-"), (f"pass^{_k(results)}", f"pass^{_k(results)}", "s--")]
    series.append(("PRR (episodes that met a fault)", "prr", "^:"))
    for label, key, style in series:
        values = [r["metrics"].get(key) for r in runs]
        points = [(x, y) for x, y in zip(rates, values, strict=True) if y is not None]
        if points:
            ax.plot(*zip(*points, strict=True), style, label=label)
    ax.set(xlabel="fault rate", ylabel="rate", ylim=(-0.05, 1.05), title=_title(results, "success vs fault rate"))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_cost_vs_success(results: JsonDict, path: Path) -> Path:
    """Money and tokens per episode against success rate: a large marker per run, small dots per task."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for index, run in enumerate(sorted(results["runs"], key=lambda r: r["fault_rate"] or 0.0)):
        tasks: dict[str, list[JsonDict]] = defaultdict(list)
        for episode in run["episodes"]:
            tasks[episode["task_id"]].append(episode)
        success = [sum(e["success"] for e in eps) / len(eps) for eps in tasks.values()]
        for ax, key in zip(axes, ("cost", "tokens"), strict=True):
            xs = [sum(e[key] for e in eps) / len(eps) for eps in tasks.values()]
            ax.scatter(xs, success, s=12, alpha=0.35, color=f"C{index}")
            mean = sum(e[key] for e in run["episodes"]) / max(1, len(run["episodes"]))
            label = f"fault rate {run['fault_rate']:g}"
            ax.scatter(
                [mean], [run["metrics"]["success_rate"]], s=90, color=f"C{index}", edgecolors="black", label=label
            )
    axes[0].set(xlabel="mean cost per episode ($, tool prices)", ylabel="success rate", ylim=(-0.05, 1.05))
    axes[1].set(xlabel="mean tokens per episode (agent actions)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(_title(results, "cost vs success (small dots: tasks)"))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _title(results: JsonDict, what: str) -> str:
    config = results["config"]
    return f"{config['env_id']} [{config['policy']}]: {what}"


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def markdown(results: JsonDict) -> str:
    """The report: settings, the metrics table, PRR by fault category, the fault kinds met, the plots."""
    config, k = results["config"], _k(results)
    lines = [
        f"# toolgym eval: `{config['env_id']}` — policy `{config['policy']}`",
        "",
        f"{config['tasks']} tasks × {config['samples']} samples, concurrency {config['concurrency']}, seed {config['seed']}"
        + (f", remote `{config['remote_url']}`" if config.get("remote_url") else "")
        + (f", model `{config['model']}`" if config.get("model") else "")
        + ".",
        f"Budget: `{json.dumps(config['budget'])}`. Faults: `{json.dumps(config['faults'])}`.",
        "",
        "## Metrics",
        "",
    ]
    columns = ["success_rate", f"pass^{k}", f"pass@{k}", "tool_calls_per_success", "tool_productivity"]
    columns += ["mean_cost", "cost_of_pass", "perturbed_episodes", "prr", "budget_exhaustion_rate"]
    lines += _table(
        ["fault rate", "episodes", *columns],
        [[r["fault_rate"], r["metrics"]["episodes"], *(r["metrics"][c] for c in columns)] for r in results["runs"]],
    )
    lines += ["", "## Perturbation recovery rate by fault category (ToolMaze 2×2)", ""]
    lines += _table(
        ["fault rate", *FAULT_CATEGORIES],
        [[r["fault_rate"], *(r["metrics"]["prr_by_category"][c] for c in FAULT_CATEGORIES)] for r in results["runs"]],
    )
    lines += ["", "## Fault kinds met (events at step ≥ 1)", ""]
    lines += _table(
        ["fault rate", "kinds"],
        [
            [r["fault_rate"], ", ".join(f"{n}: {c}" for n, c in r["metrics"]["fault_kinds"].items()) or "none"]
            for r in results["runs"]
        ],
    )
    lines += [
        "",
        "## Plots",
        "",
        f"![success vs fault rate]({SUCCESS_PLOT})",
        "",
        f"![cost vs success]({COST_PLOT})",
        "",
    ]
    lines += [
        "Metric definitions: pass^k (τ-bench) is the chance that k samples of a task all succeed; tool productivity "
        "(OTC-PO) is successes per tool call; cost of pass is the mean cost per episode over the success rate; PRR "
        "(ToolMaze) is the success rate of the episodes that met at least one fault.",
        "",
    ]
    return "\n".join(lines)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return lines
