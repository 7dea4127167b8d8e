"""Catalogs from OpenAI JSON, ToolBench JSON, Python modules and real MCP servers; export and round trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import jsonschema
import mcp.types
import pytest

import toolgym  # noqa: F401
from toolgym.schemas import ErrorKind, ToolAnnotations, ToolSpec
from toolgym.simulators import Catalog, load_catalog
from toolgym.simulators.catalogs import (
    WEAK_SCHEMA_COMMENT,
    list_mcp_tools,
    spec_from_mcp,
    spec_from_openai,
    spec_to_mcp,
    spec_to_openai,
)
from toolgym.simulators.simulated import Simulator, audit_catalog

DATA = Path(__file__).with_name("data")
DEMO_TOOLS = {"add_numbers", "create_note", "get_note", "greet"}


def _rich_spec() -> ToolSpec:
    return ToolSpec(
        name="book_room",
        description="Book a meeting room.",
        input_schema={
            "type": "object",
            "properties": {"room": {"type": "string", "enum": ["A", "B"]}, "hours": {"type": "integer", "minimum": 1}},
            "required": ["room"],
        },
        output_schema={"type": "object", "properties": {"booking_id": {"type": "string"}}, "required": ["booking_id"]},
        annotations=ToolAnnotations(
            read_only=False, writes=["bookings"], reads=["rooms"], price=2.5, latency=0.3, tags=["effect:create"]
        ),
    )


def test_openai_json_file(tmp_path: Path) -> None:
    catalog = load_catalog(DATA / "openai_tools.json")
    assert catalog.names == ["get_stock_price", "convert_units"]
    stock = catalog.get("get_stock_price")
    assert stock.input_schema["required"] == ["ticker", "currency"]
    assert stock.output_schema is not None and stock.output_schema["required"] == ["ticker", "price"]
    assert spec_to_openai(stock)["function"]["strict"] is True
    units = catalog.get("convert_units").input_schema  # BFCL type names become JSON Schema
    assert units["type"] == "object" and units["properties"]["value"]["type"] == "number"
    assert units["properties"]["pairs"] == {"type": "array", "items": {"type": "integer"}}
    jsonschema.Draft202012Validator.check_schema(units)


def test_toolbench_file_keeps_template_response_as_weak_schema() -> None:
    catalog = load_catalog(DATA / "toolbench_tool.json")
    assert catalog.names == ["current_weather_data_for_open_weather_map", "add_alert_for_open_weather_map"]
    current = catalog.get("current_weather_data_for_open_weather_map")
    assert current.input_schema["required"] == ["q"]
    assert current.input_schema["properties"]["days"] == {
        "type": "number",
        "description": "forecast days",
        "default": 3,
        "examples": [3],
    }
    assert current.annotations.read_only and "Weather" in current.annotations.tags
    output = current.output_schema or {}
    assert output["$comment"] == WEAK_SCHEMA_COMMENT
    assert output["properties"]["main"]["properties"] == {"temp": {"type": "number"}, "humidity": {"type": "integer"}}
    validator = jsonschema.Draft202012Validator(output)
    assert validator.is_valid({"name": "Oslo", "main": {"temp": 3.5, "humidity": 80}, "weather": []})
    assert not validator.is_valid({"main": {"temp": "cold"}})
    alert = catalog.get("add_alert_for_open_weather_map")
    assert alert.output_schema is None and not alert.annotations.read_only
    # a query file (ToolBench's `api_list` with repeated APIs) loads the same specs, deduplicated
    query = {
        "query": "weather?",
        "api_list": [{**api, "tool_name": "Open Weather Map"} for api in _toolbench_apis()] * 2,
    }
    assert load_catalog(query).names == catalog.names


def test_directory_of_tool_files(tmp_path: Path) -> None:
    (tmp_path / "Weather").mkdir()
    (tmp_path / "Weather" / "open_weather_map.json").write_text((DATA / "toolbench_tool.json").read_text())
    (tmp_path / "finance.json").write_text((DATA / "openai_tools.json").read_text())
    catalog = load_catalog(tmp_path)
    assert catalog.names == [
        "current_weather_data_for_open_weather_map",
        "add_alert_for_open_weather_map",
        "get_stock_price",
        "convert_units",
    ]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no .json files"):
        load_catalog(tmp_path / "empty")


def _toolbench_apis() -> list[dict[str, Any]]:
    return list(json.loads((DATA / "toolbench_tool.json").read_text())["api_list"])


def test_python_module_of_tools_runs_them_for_real() -> None:
    catalog = load_catalog(str(DATA / "python_tools.py"))
    assert catalog.names == ["multiply", "shout", "remember"]
    multiply = catalog.get("multiply")
    assert (multiply.annotations.price, multiply.annotations.latency, multiply.annotations.tags) == (0.5, 0.2, ["math"])
    assert multiply.input_schema["properties"]["a"]["description"] == "the first factor."
    assert catalog.get("shout").annotations.writes == ["greetings"]
    assert "store" not in catalog.get("remember").input_schema["properties"]
    assert set(catalog.implementations) == {"multiply", "shout"}  # remember needs an injected store
    assert catalog.implementations["multiply"]({"a": 6, "b": 7}).content == 42
    bad = catalog.implementations["multiply"]({"a": "six"})
    assert not bad.ok and bad.error_kind is ErrorKind.INVALID_ARGUMENTS
    sim = Simulator(catalog)
    assert sim.call("shout", {"text": "hi", "times": 2}).content == "HI HI"
    assert sim.last_report["source"] == "real"
    assert sim.call("remember", {"key": "k"}).ok and sim.last_report["source"] == "backend"


def test_bad_sources_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_catalog(tmp_path / "missing.json")
    (tmp_path / "odd.json").write_text('[{"hello": 1}]')
    with pytest.raises(ValueError, match="no known tool format"):
        load_catalog(tmp_path / "odd.json")
    with pytest.raises(ValueError, match="cannot tell what catalog source"):
        load_catalog("not a source!")
    with pytest.raises(ValueError, match="duplicate tool name"):
        Catalog([_rich_spec(), _rich_spec().model_copy(update={"description": "other"})])
    with pytest.raises(ConnectionError, match="could not connect to MCP server"):
        load_catalog("mcp+http://127.0.0.1:9/mcp")


def test_mcp_export_is_valid_mcp_and_round_trips_losslessly() -> None:
    spec = _rich_spec()
    exported = spec_to_mcp(spec)
    wire = mcp.types.Tool.model_validate(exported).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["inputSchema"] == spec.input_schema and wire["outputSchema"] == spec.output_schema
    assert wire["annotations"] == {"readOnlyHint": False, "destructiveHint": False}
    assert spec_from_mcp(wire) == spec
    # a plain MCP tool (no toolgym _meta) still maps its read-only hint
    plain = {"name": "ping", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
    assert spec_from_mcp(plain).annotations.read_only is True


def test_openai_export_round_trips_and_catalog_files_reload(tmp_path: Path) -> None:
    spec = _rich_spec()
    definition = spec_to_openai(spec, output_schema=True)
    assert definition["type"] == "function" and definition["function"]["parameters"] == spec.input_schema
    back = spec_from_openai(json.loads(json.dumps(definition)))
    assert (back.name, back.description, back.input_schema, back.output_schema) == (
        spec.name,
        spec.description,
        spec.input_schema,
        spec.output_schema,
    )
    catalog = load_catalog()
    for form, method in (("openai", catalog.to_openai), ("mcp", catalog.to_mcp), ("toolgym", catalog.to_json)):
        path = tmp_path / f"{form}.json"
        path.write_text(json.dumps(method()))
        reloaded = load_catalog(path)
        assert reloaded.names == catalog.names
        if form != "openai":  # OpenAI's format has no place for annotations; the others are lossless
            assert reloaded.specs == catalog.specs


def test_mcp_over_stdio_lists_and_calls_a_real_server(mcp_stdio_source: str) -> None:
    with load_catalog(mcp_stdio_source) as catalog:
        assert set(catalog.names) == DEMO_TOOLS
        note = catalog.get("create_note")
        assert note.input_schema["required"] == ["title"] and note.output_schema is not None
        assert catalog.get("get_note").annotations.read_only and not note.annotations.read_only
        assert catalog.implementations["add_numbers"]({"a": 2, "b": 40}).content == {"result": 42}
        created = catalog.implementations["create_note"]({"title": "groceries", "body": "eggs"}).content
        assert created == {"note_id": "note_1", "title": "groceries", "body": "eggs"}
        # one server process for the session: its state survives between calls
        assert catalog.implementations["get_note"]({"note_id": "note_1"}).content == created
        missing = catalog.implementations["get_note"]({"note_id": "note_9"})
        assert not missing.ok and "not found" in (missing.error_message or "")
        for spec in catalog:  # real outputs fit the declared output schemas
            assert spec.output_schema is not None
        jsonschema.validate(created, note.output_schema)
    closed = catalog.implementations["add_numbers"]({"a": 1, "b": 1})
    assert not closed.ok and closed.error_kind is ErrorKind.UNAVAILABLE


def test_mcp_over_streamable_http_and_export_parity(mcp_http_source: str) -> None:
    raw = list_mcp_tools(mcp_http_source)
    assert {tool["name"] for tool in raw} == DEMO_TOOLS
    with load_catalog(mcp_http_source) as catalog:
        assert catalog.implementations["greet"]({"name": "Ada", "excited": True}).content == {"result": "Hello, Ada!"}
        by_name = {tool["name"]: tool for tool in raw}
        for exported in catalog.to_mcp():  # export back to MCP form: same schemas as the server's own list
            original = by_name[exported["name"]]
            assert exported["inputSchema"] == original["inputSchema"]
            assert exported.get("outputSchema") == original.get("outputSchema")
            assert exported["annotations"]["readOnlyHint"] == original.get("annotations", {}).get("readOnlyHint", False)
            mcp.types.Tool.model_validate(exported)
        audit_sim = Simulator(catalog, simulate_all=True)  # the simulator answers the same tools offline
        simulated = audit_sim.call("create_note", {"title": "t"})
        assert simulated.ok and audit_sim.last_report["valid"] is True
        assert catalog.implementations["create_note"]({"title": "t"}).content["title"] == simulated.content["title"]
        audit = {r.name: r for r in audit_catalog(catalog, samples=3)}  # simulated vs the real server
        for name in ("add_numbers", "greet"):
            assert audit[name].compared == 3 and audit[name].shape_agreement == 1.0, audit[name]
            assert audit[name].validity == 1.0 and audit[name].final_invalid == 0
        env = gym.make("toolgym/SimulatedAPI-v0", catalog=catalog)  # tasks over the server's tools, simulated
        for index in range(6):
            env.reset(options={"task_id": f"sim-{index}"})
            for action in env.unwrapped.task.gold_actions:
                _, reward, terminated, _, info = env.step(action)
            assert terminated and reward == 1.0, env.unwrapped.task.instruction
