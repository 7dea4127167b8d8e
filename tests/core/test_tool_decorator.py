"""The @tool decorator: schemas from type hints and docstrings, validation before execution."""

from typing import Literal

from toolgym.schemas import ErrorKind, ToolSpec
from toolgym.simulators import ToolError, tool
from toolgym.simulators.python_tools import parse_google_docstring


@tool(price=0.5, latency=1.5, read_only=False, writes=["orders"])
def place_order(item: str, quantity: int, express: bool = False, note: str | None = None) -> dict[str, int]:
    """Place an order for an item.

    Longer explanation that is part of the description.

    Args:
        item: Name of the item
            (continued on a second line).
        quantity (int): How many to order.
        express: Ship express.
        note: Free text for the warehouse.

    Returns:
        The order id.
    """
    if quantity > 100:
        raise ToolError("too many")
    return {"order_id": quantity * 10}


def test_schema_from_hints_and_docstring() -> None:
    spec = place_order.spec
    assert spec.description == "Place an order for an item.\n\nLonger explanation that is part of the description."
    props = spec.input_schema["properties"]
    assert props["item"] == {"type": "string", "description": "Name of the item (continued on a second line)."}
    assert props["quantity"]["type"] == "integer" and props["quantity"]["description"] == "How many to order."
    assert props["express"]["default"] is False
    assert spec.input_schema["required"] == ["item", "quantity"]
    assert spec.input_schema["additionalProperties"] is False
    assert spec.output_schema == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert spec.annotations.read_only is False and spec.annotations.writes == ["orders"]
    assert spec.annotations.price == 0.5 and spec.annotations.latency == 1.5


def test_openai_export_round_trips() -> None:
    exported = place_order.spec.to_openai()
    assert exported["type"] == "function" and exported["function"]["name"] == "place_order"
    back = ToolSpec.from_openai(exported)
    assert back.input_schema == place_order.spec.input_schema and back.description == place_order.spec.description


def test_invoke_validates_before_running() -> None:
    calls: list[int] = []

    @tool
    def record(n: int) -> int:
        """Record a number."""
        calls.append(n)
        return n

    bad = record.invoke({"n": "three"})
    assert not bad.ok and bad.error_kind is ErrorKind.INVALID_ARGUMENTS and "n" in (bad.error_message or "")
    assert not record.invoke({"n": 1, "extra": 2}).ok
    assert not record.invoke({}).ok
    assert not record.invoke(["not", "a", "dict"]).ok
    assert calls == []
    good = record.invoke({"n": 4})
    assert good.ok and good.content == 4 and calls == [4]


def test_tool_errors_and_crashes_become_results() -> None:
    expected = place_order.invoke({"item": "x", "quantity": 101})
    assert not expected.ok and expected.error_kind is ErrorKind.EXECUTION and expected.error_message == "too many"

    @tool
    def crash() -> None:
        """Always fails."""
        raise RuntimeError("boom")

    crashed = crash.invoke({})
    assert not crashed.ok and crashed.error_message == "RuntimeError: boom"


def test_ok_result_carries_price_and_latency() -> None:
    result = place_order.invoke({"item": "x", "quantity": 2})
    assert result.ok and result.content == {"order_id": 20} and result.cost == 0.5 and result.latency == 1.5


def test_injected_arguments_are_hidden_and_bound() -> None:
    @tool(inject=["store"])
    def get(store: dict[str, int], key: str) -> int:
        """Read a key."""
        return store[key]

    assert set(get.spec.input_schema["properties"]) == {"key"}
    bound = get.bind(store={"a": 1})
    assert bound.invoke({"key": "a"}).content == 1
    assert not bound.invoke({"key": "a", "store": {}}).ok


def test_literal_and_list_types() -> None:
    @tool
    def pick(color: Literal["red", "blue"], tags: list[str]) -> str:
        """Pick a color."""
        return color

    props = pick.spec.input_schema["properties"]
    assert props["color"]["enum"] == ["red", "blue"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert not pick.invoke({"color": "green", "tags": []}).ok
    assert pick.invoke({"color": "red", "tags": ["a"]}).content == "red"


def test_docstring_parser_handles_missing_sections() -> None:
    assert parse_google_docstring(None) == ("", {})
    assert parse_google_docstring("Just a summary.") == ("Just a summary.", {})
