"""The compiled schema checks agree with jsonschema (the reference) on every value tried."""

from __future__ import annotations

import random
from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st
from simfakes import CRUD_CATALOG

from toolgym.simulators import load_catalog
from toolgym.simulators.simulated import generate_value
from toolgym.simulators.simulated.fastschema import compile_schema, json_equal

HANDMADE: list[Any] = [
    {"enum": [1, "1", True, None, [1], {"a": 1}]},
    {"const": 0},
    {"type": ["integer", "null"], "minimum": -2, "exclusiveMaximum": 3},
    {"type": "number", "exclusiveMinimum": 0.5, "maximum": 10},
    {"type": "string", "minLength": 2, "maxLength": 3},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 2},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False},
    {"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
    {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]},
    {"oneOf": [{"type": "number"}, {"type": "integer"}]},
    {"allOf": [{"type": "object"}, {"required": ["x"]}]},
    {"minimum": 3},
    True,
    {},
]
SCHEMAS: list[Any] = [
    *HANDMADE,
    *(s.input_schema for s in load_catalog()),
    *(s.output_schema for s in load_catalog()),
    *(t["function"]["parameters"] for t in CRUD_CATALOG),
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.floats(-10, 10, allow_nan=False) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "x", "id", "name"]), inner, max_size=3)
    ),
    max_leaves=8,
)


def _agree(schema: Any, value: Any) -> None:
    check = compile_schema(schema)
    assert check is not None, schema
    assert check(value) == jsonschema.Draft202012Validator(schema).is_valid(value), (schema, value)


@settings(max_examples=150, deadline=None)
@given(index=st.integers(0, len(HANDMADE) - 1), value=JSON)
def test_random_values_against_handmade_schemas(index: int, value: Any) -> None:
    _agree(HANDMADE[index], value)


def test_generated_and_mutated_values_against_catalog_schemas() -> None:
    rng = random.Random(0)
    for schema in SCHEMAS:
        for _ in range(5):
            value = generate_value(schema if isinstance(schema, dict) else {}, rng)
            _agree(schema, value)
            if isinstance(value, dict) and value:
                key = rng.choice(sorted(value))
                _agree(schema, {**value, key: rng.choice([None, "x", 1.5, [], {}])})
                _agree(schema, {k: v for k, v in value.items() if k != key})


def test_unsupported_keywords_fall_back() -> None:
    assert compile_schema({"type": "string", "pattern": "^a"}) is None
    assert compile_schema({"$ref": "#/$defs/x"}) is None
    assert json_equal(1, 1.0) and not json_equal(True, 1) and not json_equal("1", 1)
