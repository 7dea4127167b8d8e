"""Cache record/replay/off, `generate_text`, and the audit (library and `toolgym audit` CLI)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from simfakes import CRUD_CATALOG, FakeOpenAI

from toolgym.cli import main as cli_main
from toolgym.schemas import ErrorKind
from toolgym.simulators.simulated import (
    ReplayMiss,
    SimCache,
    Simulator,
    audit_catalog,
    cache_key,
    generate_text,
)
from toolgym.simulators.simulated.text import _backend as text_backend

REPO = Path(__file__).resolve().parents[3]
PY_TOOLS = REPO / "tests/simulators/catalogs/data/python_tools.py"
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("add_book", {"title": "Dune", "author": "Herbert"}),
    ("add_book", {"title": "Emma", "author": "Austen", "year": 1815}),
    ("get_book", {"book_id": "book_1"}),
    ("list_books", {}),
    ("get_book", {"book_id": "book_1"}),  # same call, same state: a cache hit in record mode
    ("update_book", {"book_id": "book_2", "shelf": "C"}),
    ("remove_book", {"book_id": "book_1"}),
    ("list_books", {"author": "Austen"}),
]


def _run(sim: Simulator) -> tuple[str, list[str]]:
    """The outputs as bytes-exact JSON text, and each call's cache outcome."""
    outputs, caches = [], []
    for name, arguments in SCRIPT:
        result = sim.call(name, arguments)
        outputs.append(result.content if result.ok else f"{result.error_kind}: {result.error_message}")
        caches.append(sim.last_report["cache"])
    return json.dumps(outputs, ensure_ascii=False), caches


def test_record_then_replay_is_byte_identical_without_the_backend(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    path = tmp_path / "sim-cache.sqlite"
    recorded, caches = _run(Simulator(CRUD_CATALOG, fake_openai.backend(), {"mode": "record", "path": str(path)}))
    assert caches == ["miss", "miss", "miss", "miss", "hit", "miss", "miss", "miss"]
    served = len(fake_openai.requests)
    assert served == 7
    fake_openai.responder = lambda body: (500, '{"error": "the backend must not be asked during replay"}')
    replay = Simulator(CRUD_CATALOG, fake_openai.backend(), {"mode": "replay", "path": str(path)})
    replayed, caches = _run(replay)
    assert replayed == recorded  # byte for byte, key order included
    assert caches == ["hit"] * len(SCRIPT) and len(fake_openai.requests) == served
    assert replay.counts["cache_hits"] == len(SCRIPT) and replay.counts["backend_calls"] == 0
    # a different seed is a different content address: replay has nothing for it
    other = Simulator(CRUD_CATALOG, fake_openai.backend(), {"mode": "replay", "path": str(path)}, seed=1)
    missed = other.call("add_book", {"title": "Dune", "author": "Herbert"})
    assert not missed.ok and missed.error_kind is ErrorKind.UNAVAILABLE and "replay" in (missed.error_message or "")
    assert other.counts["replay_misses"] == 1 and other.last_report["cache"] == "miss"


def test_replay_survives_a_new_process(tmp_path: Path) -> None:
    path = tmp_path / "offline.sqlite"
    recorded, _ = _run(Simulator(CRUD_CATALOG, "offline", {"mode": "record", "path": str(path)}, seed=5))
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[2]);"
        "from simfakes import CRUD_CATALOG; from test_sim_cache_audit import _run;"
        "from toolgym.simulators.simulated import Simulator;"
        "print(_run(Simulator(CRUD_CATALOG, 'offline', {'mode': 'replay', 'path': sys.argv[1]}, seed=5))[0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.strip() == recorded


def test_cache_off_always_generates_and_stores_nothing(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    path = tmp_path / "off.sqlite"
    sim = Simulator(CRUD_CATALOG, fake_openai.backend(), {"mode": "off", "path": str(path)})
    _, caches = _run(sim)
    assert set(caches) <= {"off", "none"} and sim.counts["cache_hits"] == sim.counts["cache_misses"] == 0
    assert len(fake_openai.requests) == 8 and len(SimCache(path)) == 0


def test_cache_keys_address_every_part() -> None:
    base = {"tool": "t", "spec": "s", "arguments": {"a": 1, "b": 2}, "state": "x", "backend": "offline"}
    base |= {"prompt": "sim-v1", "seed": 0}
    key = cache_key(**base)
    assert key == cache_key(**{**base, "arguments": {"b": 2, "a": 1}})  # canonical arguments
    for part, other in [("arguments", {"a": 2, "b": 2}), ("state", "y"), ("backend", "openai:m"), ("seed", 1)]:
        assert cache_key(**{**base, part: other}) != key, part
    assert cache_key(**{**base, "prompt": "sim-v2"}) != key
    with pytest.raises(ValueError, match="cache mode"):
        SimCache(mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown cache options"):
        SimCache.from_config({"mode": "record", "file": "x"})


def test_generate_text_with_every_backend_and_the_cache(
    fake_openai: FakeOpenAI, braces_lm: Path, tmp_path: Path
) -> None:
    messages = [{"role": "system", "content": "You are a customer."}, {"role": "user", "content": "How can I help?"}]
    offline = [generate_text("offline", messages, seed) for seed in range(6)]
    assert offline == [generate_text(None, messages, seed) for seed in range(6)] and len(set(offline)) > 1
    cache = SimCache(tmp_path / "text.sqlite")
    first = generate_text(fake_openai.backend(), messages, 3, cache=cache)
    assert first == "fake reply to: How can I help?" and len(fake_openai.requests) == 1
    assert "response_format" not in fake_openai.requests[0]  # free text, not JSON mode
    assert generate_text(fake_openai.backend(), messages, 3, cache=cache) == first
    assert len(fake_openai.requests) == 1  # the second answer came from the cache
    replay = SimCache(tmp_path / "text.sqlite", mode="replay")
    assert generate_text(fake_openai.backend(), messages, 3, cache=replay) == first
    with pytest.raises(ReplayMiss):
        generate_text(fake_openai.backend(), messages, 4, cache=replay)
    model = {"kind": "transformers", "path": str(braces_lm), "max_new_tokens": 4}
    assert generate_text(model, messages, 0) == "{}" == generate_text(model, messages, 1)
    assert text_backend(model) is text_backend(dict(model))  # the model is loaded once per process


def test_audit_counts_validity_fallbacks_and_real_agreement(fake_openai: FakeOpenAI) -> None:
    reports = {r.name: r for r in audit_catalog(str(PY_TOOLS), samples=4)}
    multiply, shout = reports["multiply"], reports["shout"]
    assert multiply.calls == 4 and multiply.validity == 1.0 and multiply.fallbacks == 0
    assert multiply.compared == 4 and multiply.shape_agreement == 1.0  # an integer, like the real one
    assert multiply.exact_agreement is not None and multiply.exact_agreement < 1.0  # but not the product
    assert shout.shape_agreement == 1.0 and reports["remember"].compared == 0  # no real implementation
    assert reports["remember"].shape_agreement is None
    fake_openai.responder = lambda body: (200, "not json at all")
    garbage = {r.name: r for r in audit_catalog(CRUD_CATALOG, fake_openai.backend(), samples=2)}
    for report in garbage.values():
        assert report.validity == 0.0 and report.final_invalid == 0
        assert report.fallbacks == report.calls and report.invalid_outputs == 3 * report.calls
        assert report.problems and "not JSON" in report.problems[0]


def _audit_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolgym.cli", "audit", *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


def test_toolgym_audit_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    as_json = _audit_cli(str(PY_TOOLS), "--json", "--samples", "3", "--seed", "2")  # a real subprocess
    assert as_json.returncode == 0, as_json.stderr
    rows = {row["name"]: row for row in json.loads(as_json.stdout)}
    assert rows["multiply"]["shape_agreement"] == 1.0 and rows["multiply"]["validity"] == 1.0
    assert rows["remember"]["exact_agreement"] is None
    catalog = tmp_path / "crud.json"
    catalog.write_text(json.dumps(CRUD_CATALOG))
    assert cli_main(["audit", str(catalog), "--samples", "2"]) == 0  # the same entry point, in process
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["tool", "calls", "valid@1"] and lines[-1].startswith("TOTAL")
    assert {line.split()[0] for line in lines[1:-1]} == {
        "add_book",
        "get_book",
        "update_book",
        "remove_book",
        "list_books",
    }
    assert cli_main(["audit", str(tmp_path / "nope.json")]) == 2
    assert "not found" in capsys.readouterr().err
