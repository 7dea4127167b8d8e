"""The simulator pipeline: argument validation, state consistency with every backend, retries and fallback."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from simfakes import BOOK, CRUD_CATALOG, FakeOpenAI

from toolgym.schemas import ErrorKind
from toolgym.simulators import load_catalog
from toolgym.simulators.simulated import (
    BackendError,
    OpenAIBackend,
    Simulator,
    TransformersBackend,
    generate_value,
    infer_plans,
    make_backend,
    parse_json_reply,
)


def _backend(kind: str, fake_openai: FakeOpenAI, request: pytest.FixtureRequest) -> Any:
    if kind == "openai":
        return fake_openai.backend()
    if kind.startswith("transformers"):
        model = request.getfixturevalue("braces_lm" if kind.endswith("braces") else "tiny_lm")
        return {"kind": "transformers", "path": str(model), "max_new_tokens": 8}
    return kind


def test_names_and_annotations_decide_effects() -> None:
    plans = infer_plans(load_catalog(CRUD_CATALOG).specs)
    assert {n: (p.effect, p.entity, p.id_key) for n, p in plans.items()} == {
        "add_book": ("create", "book", "book_id"),
        "get_book": ("get", "book", "book_id"),
        "update_book": ("update", "book", "book_id"),
        "remove_book": ("delete", "book", "book_id"),
        "list_books": ("list", "book", "book_id"),
    }
    lead = {"type": "object", "properties": {"lead_id": {"type": "string"}, "name": {"type": "string"}}}
    named = [
        {"name": "crm_create_lead", "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}},
        {"name": "leadGet", "parameters": {"type": "object", "properties": {"lead_id": {"type": "string"}}}},
        {"name": "crmListLeads", "parameters": {"type": "object", "properties": {}}},
        {"name": "lead_delete", "parameters": {"type": "object", "properties": {"lead_id": {"type": "string"}}}},
        {"name": "get_lead_by_name", "parameters": {"type": "object", "properties": {"name": {"type": "string"}}}},
        {"name": "weather_now", "parameters": {"type": "object", "properties": {}}, "output_schema": lead},
    ]
    assert {n: (p.effect, p.entity) for n, p in infer_plans(load_catalog(named).specs).items()} == {
        "crm_create_lead": ("create", "lead"),
        "leadGet": ("get", "lead"),
        "crmListLeads": ("list", "lead"),
        "lead_delete": ("delete", "lead"),
        "get_lead_by_name": ("none", None),  # a get without the id cannot be kept consistent
        "weather_now": ("none", None),
    }
    default = infer_plans(load_catalog().specs)
    assert default["book_flight"].entity == "booking"  # from annotations.writes, not the name
    assert default["close_account"].effect == "delete"
    assert default["get_weather_forecast"].effect == "none"


@pytest.mark.parametrize("kind", ["offline", "openai", "transformers", "transformers-braces"])
def test_state_is_consistent_with_every_backend(
    kind: str, fake_openai: FakeOpenAI, request: pytest.FixtureRequest
) -> None:
    """openai: a server that lies (valid values contradicting the state); transformers: a random
    model (garbage, so offline fallbacks) and a programmed one whose `{}` is valid for some tools."""
    sim = Simulator(CRUD_CATALOG, _backend(kind, fake_openai, request), max_retries=1)
    first = sim.call("add_book", {"title": "Dune", "author": "Herbert", "year": 1965}).content
    second = sim.call("add_book", {"title": "Emma", "author": "Austen"}).content
    assert (first["book_id"], first["title"], first["author"], first["year"]) == ("book_1", "Dune", "Herbert", 1965)
    assert second["book_id"] == "book_2"
    got = sim.call("get_book", {"book_id": "book_1"}).content
    assert got == first  # every field, generated ones included, is pinned by the store
    listed = sim.call("list_books", {}).content
    assert [b["book_id"] for b in listed["books"]] == ["book_1", "book_2"] and listed["count"] == 2
    assert listed["books"][0] == first
    assert [b["title"] for b in sim.call("list_books", {"author": "austen"}).content["books"]] == ["Emma"]
    updated = sim.call("update_book", {"book_id": "book_2", "shelf": "B4", "year": 1815}).content
    assert (updated["shelf"], updated["year"], updated["title"]) == ("B4", 1815, "Emma")
    assert sim.call("get_book", {"book_id": "book_2"}).content["shelf"] == "B4"
    assert sim.call("remove_book", {"book_id": "book_1"}).content == {"removed": True}
    gone = sim.call("get_book", {"book_id": "book_1"})
    assert not gone.ok and gone.error_kind is ErrorKind.EXECUTION and "not found" in (gone.error_message or "")
    assert [b["book_id"] for b in sim.call("list_books", {}).content["books"]] == ["book_2"]
    assert not sim.call("update_book", {"book_id": "book_9", "shelf": "X"}).ok
    assert sim.counts["final_invalid"] == 0
    if kind != "offline":
        assert sim.backend.name.startswith(kind.split("-")[0])
    if kind == "openai":  # every lie was valid, so no fallback: consistency came from the store
        assert sim.counts["fallbacks"] == 0 and sim.counts["backend_calls"] > 0
    if kind == "transformers-braces":  # `{}` fits list_books/remove_book outputs, not BOOK
        assert 0 < sim.counts["fallbacks"] < sim.counts["final_valid"]


def test_programmed_transformers_model_answers_are_used(braces_lm: Path) -> None:
    sim = Simulator(CRUD_CATALOG, {"kind": "transformers", "path": str(braces_lm), "max_new_tokens": 4})
    assert sim.call("add_book", {"title": "Dune", "author": "Herbert"}).ok
    assert sim.last_report["source"] == "offline_fallback"  # `{}` lacks BOOK's required fields
    listed = sim.call("list_books", {})
    assert sim.last_report["source"] == "backend" and sim.last_report["attempts"] == 1
    assert listed.content["count"] == 1 and listed.content["books"][0]["title"] == "Dune"


def test_invalid_arguments_never_reach_the_backend(fake_openai: FakeOpenAI) -> None:
    sim = Simulator(CRUD_CATALOG, fake_openai.backend())
    for arguments in ({"title": "x"}, {"title": 3, "author": "y"}, "not an object"):
        result = sim.call("add_book", arguments)
        assert not result.ok and result.error_kind is ErrorKind.INVALID_ARGUMENTS
    assert sim.call("no_such_tool", {}).error_kind is ErrorKind.UNKNOWN_TOOL
    assert fake_openai.requests == [] and sim.counts["invalid_arguments"] == 3


def test_malformed_then_invalid_then_valid_reply_is_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.script = [
        (200, "Sure! Here is the JSON you asked for: {not json"),
        (200, '{"title": 42}'),
        (200, '```json\n{"book_id": "zzz", "title": "Dune", "author": "F. Herbert", "year": 1965}\n```'),
    ]
    sim = Simulator(CRUD_CATALOG, fake_openai.backend(), max_retries=2)
    result = sim.call("add_book", {"title": "Dune", "author": "Herbert"})
    assert result.ok and result.content["book_id"] == "book_1" and result.content["author"] == "Herbert"
    assert sim.last_report["source"] == "backend" and sim.last_report["attempts"] == 3
    assert sim.counts["invalid_outputs"] == 2 and sim.counts["retries"] == 2 and sim.counts["fallbacks"] == 0
    assert len(fake_openai.requests) == 3
    assert len({r["seed"] for r in fake_openai.requests}) == 3  # each attempt has its own derived seed


def test_persistent_garbage_falls_back_to_offline_and_is_counted(fake_openai: FakeOpenAI) -> None:
    fake_openai.responder = lambda body: (200, '{"year": "nineteen sixty-five"}')
    sim = Simulator(CRUD_CATALOG, fake_openai.backend(), max_retries=1)
    result = sim.call("add_book", {"title": "Dune", "author": "Herbert"})
    assert result.ok and jsonschema.Draft202012Validator(BOOK).is_valid(result.content)
    assert sim.last_report["source"] == "offline_fallback" and sim.last_report["valid"] is True
    assert sim.counts["invalid_outputs"] == 2 and sim.counts["fallbacks"] == 1
    assert all("required property" in p or "year" in p for p in sim.last_report["problems"])


def test_http_errors_are_counted_and_fall_back(fake_openai: FakeOpenAI) -> None:
    fake_openai.responder = lambda body: (503, '{"error": "overloaded"}')
    sim = Simulator(CRUD_CATALOG, fake_openai.backend(), max_retries=1)
    assert sim.call("get_book", {"book_id": "nope"}).error_kind is ErrorKind.EXECUTION  # state answers first
    result = sim.call("list_books", {})
    assert result.ok and sim.counts["backend_errors"] == 2 and sim.counts["fallbacks"] == 1
    with pytest.raises(BackendError, match="HTTP 503"):
        OpenAIBackend(fake_openai.base_url, "m").chat([{"role": "user", "content": "hi"}], seed=1)
    with pytest.raises(BackendError, match="failed"):  # nothing listens there
        OpenAIBackend("http://127.0.0.1:9/v1", "m", timeout=2).chat([{"role": "user", "content": "hi"}], seed=1)


def test_broken_completions_are_backend_errors_then_retried(fake_openai: FakeOpenAI) -> None:
    sim = Simulator(CRUD_CATALOG, fake_openai.backend(), max_retries=2)
    sim.call("add_book", {"title": "Dune", "author": "Herbert"})  # answered by the liar (valid)
    fake_openai.script = [(200, "RAW:{not json"), (200, 'RAW:{"choices": []}'), (200, '{"removed": true}')]
    result = sim.call("remove_book", {"book_id": "book_1"})
    assert result.ok and result.content == {"removed": True}
    assert sim.last_report["source"] == "backend" and sim.last_report["attempts"] == 3
    assert sim.counts["backend_errors"] == 2 and sim.counts["fallbacks"] == 0
    assert any("malformed chat-completions response" in p for p in sim.last_report["problems"])


def test_openai_backend_from_environment(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    monkeypatch.setenv("TOOLGYM_SIM_MODEL", "sim-model-7b")
    backend = make_backend("openai")
    assert backend.name == "openai:sim-model-7b"
    Simulator(CRUD_CATALOG, backend).call("add_book", {"title": "Dune", "author": "Herbert"})
    body, headers = fake_openai.requests[0], fake_openai.headers[0]
    assert body["model"] == "sim-model-7b" and body["temperature"] == 0.0 and isinstance(body["seed"], int)
    assert body["response_format"] == {"type": "json_object"}
    assert headers["Authorization"] == "Bearer sk-test-123"
    assert '"arguments": {"author": "Herbert", "title": "Dune"}' in body["messages"][1]["content"]
    constrained = Simulator(CRUD_CATALOG, fake_openai.backend(json_mode="schema"))
    constrained.call("get_book", {"book_id": "book_1"})  # not found: answered by the state, no request
    constrained.call("add_book", {"title": "Emma", "author": "Austen"})
    response_format = fake_openai.requests[-1]["response_format"]
    assert response_format["type"] == "json_schema" and response_format["json_schema"]["schema"] == BOOK
    with pytest.raises(ValueError, match="json_mode"):
        make_backend(fake_openai.backend(json_mode="grammar"))
    monkeypatch.delenv("TOOLGYM_SIM_MODEL")
    with pytest.raises(ValueError, match="TOOLGYM_SIM_MODEL"):
        make_backend("openai")


def test_tiny_transformers_model_garbage_is_retried_then_replaced(tiny_lm: Path) -> None:
    backend = make_backend(f"transformers:{tiny_lm}")
    assert isinstance(backend, TransformersBackend)
    backend.max_new_tokens = 8
    sim = Simulator(CRUD_CATALOG, backend, max_retries=1)
    for title in ("Dune", "Emma"):
        assert sim.call("add_book", {"title": title, "author": "X"}).ok
    assert sim.counts["backend_calls"] == 4 and sim.counts["invalid_outputs"] == 4
    assert sim.counts["retries"] == 2 and sim.counts["fallbacks"] == 2
    assert sim.last_report["source"] == "offline_fallback" and sim.last_report["problems"]


def test_unknown_backends_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown backend kind"):
        make_backend({"kind": "anthropic"})
    with pytest.raises(FileNotFoundError):
        make_backend({"kind": "transformers", "path": str(tmp_path / "missing")})


def test_offline_values_fit_every_default_output_schema() -> None:
    for spec in load_catalog():
        validator = jsonschema.Draft202012Validator(spec.output_schema or {})
        for seed in range(5):
            value = generate_value(spec.output_schema, random.Random(seed))
            assert validator.is_valid(value), (spec.name, value)


def test_parse_json_reply_tolerates_fences_and_prose() -> None:
    assert parse_json_reply('```json\n{"a": 1}\n```') == ({"a": 1}, None)
    assert parse_json_reply("Result: [1, 2] hope that helps") == ([1, 2], None)
    assert parse_json_reply("no json here")[1] is not None
