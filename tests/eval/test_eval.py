"""`toolgym eval`: oracle, random and OpenAI-endpoint policies, locally and over HTTP, with its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_fakes import FakeOpenAI

from toolgym.cli import main
from toolgym.envs.evaluation.report import write_report
from toolgym.envs.evaluation.runner import EvalConfig, run_eval


def test_oracle_solves_every_calendar_task_without_faults() -> None:
    results = run_eval(EvalConfig("toolgym/Calendar-v0", tasks=6, samples=2, concurrency=3), show_progress=False)
    (run,) = results["runs"]
    assert run["metrics"]["success_rate"] == 1.0 and run["metrics"]["pass^2"] == 1.0
    assert len(run["episodes"]) == 12 and len({e["task_id"] for e in run["episodes"]}) == 6
    assert all(e["tool_calls"] >= 1 and e["tokens"] > 0 for e in run["episodes"])


def test_fault_sweep_lowers_success_and_reports_prr() -> None:
    config = EvalConfig(
        "toolgym/Calendar-v0",
        tasks=8,
        samples=2,
        concurrency=2,
        faults={"permanent": 0.6, "solvable": False},
        fault_rates=[0.0, 0.6],
    )
    clean, faulty = run_eval(config, show_progress=False)["runs"]
    assert clean["metrics"]["success_rate"] == 1.0 and clean["metrics"]["prr"] is None
    assert faulty["metrics"]["success_rate"] < 1.0
    assert faulty["metrics"]["perturbed_episodes"] > 0 and faulty["metrics"]["prr"] is not None
    assert faulty["metrics"]["tool_calls_per_success"] > clean["metrics"]["tool_calls_per_success"]


def test_concurrency_does_not_change_results() -> None:
    base = {"tasks": 5, "samples": 2, "faults": {"rate": 0.4}, "policy": "random"}
    serial = run_eval(EvalConfig("toolgym/Calendar-v0", concurrency=1, **base), show_progress=False)
    parallel = run_eval(EvalConfig("toolgym/Calendar-v0", concurrency=4, **base), show_progress=False)
    assert serial["runs"] == parallel["runs"]


def test_random_policy_is_a_weak_baseline() -> None:
    results = run_eval(EvalConfig("toolgym/Calculator-v0", policy="random", tasks=10), show_progress=False)
    assert results["runs"][0]["metrics"]["success_rate"] < 0.5


def test_budget_exhaustion_is_measured() -> None:
    results = run_eval(EvalConfig("toolgym/Calendar-v0", tasks=4, budget={"calls": 1}), show_progress=False)
    metrics = results["runs"][0]["metrics"]
    assert metrics["budget_exhaustion_rate"] == 1.0 and metrics["success_rate"] == 0.0


def test_openai_compatible_endpoint_policy(fake_openai: FakeOpenAI) -> None:
    config = EvalConfig(
        "toolgym/Calculator-v0",
        policy="openai",
        tasks=4,
        concurrency=2,
        base_url=fake_openai.url,
        model="fake-model",
        api_key="sk-test",
    )
    results = run_eval(config, show_progress=False)
    assert results["runs"][0]["metrics"]["success_rate"] == 1.0
    assert "api_key" not in results["config"]
    assert len(fake_openai.requests) == 8  # a tool call and an answer per task
    second = next(r for r in fake_openai.requests if r["body"]["messages"][-1]["role"] == "tool")
    assert second["path"] == "/v1/chat/completions" and second["auth"] == "Bearer sk-test"
    assert second["body"]["model"] == "fake-model" and second["body"]["tools"][0]["function"]["name"] == "calculator"
    roles = [m["role"] for m in second["body"]["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert second["body"]["messages"][3]["tool_call_id"] == second["body"]["messages"][2]["tool_calls"][0]["id"]


def test_eval_against_a_remote_server(toolgym_server: str) -> None:
    config = EvalConfig(
        "toolgym/Calendar-v0",
        tasks=3,
        concurrency=2,
        remote_url=toolgym_server,
        faults={"rate": 0.3, "seed": 4},
        budget={"calls": 30},
    )
    remote = run_eval(config, show_progress=False)["runs"][0]
    assert remote["metrics"]["success_rate"] == 1.0  # solvable by default: the oracle recovers
    local = run_eval(EvalConfig(**{**config.__dict__, "remote_url": None}), show_progress=False)["runs"][0]
    assert [e["faults"] for e in remote["episodes"]] == [e["faults"] for e in local["episodes"]]


def test_cli_writes_json_markdown_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "report"
    code = main(
        [
            "eval",
            "toolgym/Calendar-v0",
            "-n",
            "4",
            "-k",
            "2",
            "-c",
            "2",
            "--fault-rates",
            "0,0.3",
            "--budget",
            '{"calls": 20, "prices": {"create_event": 0.05}}',
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert [r["fault_rate"] for r in results["runs"]] == [0.0, 0.3]
    report = (out / "report.md").read_text()
    assert "| fault rate | episodes | success_rate | pass^2 |" in report
    assert "![success vs fault rate](success_vs_fault_rate.png)" in report
    for name in ("success_vs_fault_rate.png", "cost_vs_success.png"):
        _assert_real_plot(out / name)


def _assert_real_plot(path: Path) -> None:
    import matplotlib.image as mpimg

    image = mpimg.imread(path)
    assert image.shape[0] > 200 and image.shape[1] > 400
    assert image.std() > 0.05  # not a blank canvas


def test_cli_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "toolgym/Calendar-v0", "--budget", "{not json"])
    assert exit_info.value.code == 2
    assert main(["eval", "toolgym/Calendar-v0", "--policy", "openai", "--out", str(tmp_path)]) == 2
    assert "needs a base URL and a model name" in capsys.readouterr().err


def test_cli_reports_an_unreachable_model_endpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from eval_fakes import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    args = ["eval", "toolgym/Calculator-v0", "--policy", "openai", "--base-url", url, "--model", "m", "-n", "1"]
    assert main([*args, "--out", str(tmp_path), "--no-progress"]) == 2
    assert "toolgym eval:" in capsys.readouterr().err


def test_report_from_results_alone(tmp_path: Path) -> None:
    results = run_eval(EvalConfig("toolgym/Calculator-v0", tasks=2), show_progress=False)
    paths = write_report(results, tmp_path)
    assert {p.name for p in paths.values()} == {
        "results.json",
        "report.md",
        "success_vs_fault_rate.png",
        "cost_vs_success.png",
    }
