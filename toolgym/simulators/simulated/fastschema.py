"""Compiled validity checks for the common JSON Schema subset (jsonschema stays the reference and the explainer)."""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import Any, cast

JsonDict = dict[str, Any]
Check = Callable[[Any], bool]
ANNOTATIONS = frozenset({"description", "title", "format", "examples", "default", "$comment", "$schema", "deprecated"})
_NUMERIC = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


class Unsupported(Exception):
    """The schema uses a keyword outside the compiled subset."""


def is_number(value: Any) -> bool:
    """An int or float that is not a bool (JSON numbers)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": is_number,
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but True != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) and isinstance(a, str) == isinstance(b, str)


def compile_schema(schema: Any) -> Check | None:
    """A function telling whether a value is valid, or None when the schema leaves the subset."""
    try:
        return _compile(schema)
    except Unsupported:
        return None


def _compile(schema: Any) -> Check:
    if schema is True or schema == {}:
        return lambda value: True
    if schema is False:
        return lambda value: False
    if not isinstance(schema, dict):
        raise Unsupported(repr(schema))
    checks: list[Check] = []
    for key, argument in schema.items():
        if key in ANNOTATIONS:
            continue
        builder = _BUILDERS.get(key)
        if builder is None:
            raise Unsupported(key)
        checks.append(builder(argument, schema))
    return lambda value: all(check(value) for check in checks)


def _type(argument: Any, schema: JsonDict) -> Check:
    names = [argument] if isinstance(argument, str) else argument
    if not isinstance(names, list) or any(name not in _TYPES for name in names):
        raise Unsupported(f"type {argument!r}")
    tests = [_TYPES[name] for name in names]
    return lambda value: any(test(value) for test in tests)


def _properties(argument: Any, schema: JsonDict) -> Check:
    compiled = {name: _compile(sub) for name, sub in argument.items()}
    return lambda value: (
        not isinstance(value, dict) or all(check(value[name]) for name, check in compiled.items() if name in value)
    )


def _required(argument: Any, schema: JsonDict) -> Check:
    names = list(argument)
    return lambda value: not isinstance(value, dict) or all(name in value for name in names)


def _additional(argument: Any, schema: JsonDict) -> Check:
    if "patternProperties" in schema:
        raise Unsupported("patternProperties")
    known = set(schema.get("properties", {}))
    extra = _compile(argument)
    return lambda value: not isinstance(value, dict) or all(extra(v) for k, v in value.items() if k not in known)


def _items(argument: Any, schema: JsonDict) -> Check:
    if not isinstance(argument, (dict, bool)):
        raise Unsupported("items as a list")
    check = _compile(argument)
    return lambda value: not isinstance(value, list) or all(check(item) for item in value)


def _enum(argument: Any, schema: JsonDict) -> Check:
    options = list(argument)
    return lambda value: any(json_equal(value, option) for option in options)


def _const(argument: Any, schema: JsonDict) -> Check:
    return lambda value: json_equal(value, argument)


def _bound(key: str) -> Callable[[Any, JsonDict], Check]:
    def build(argument: Any, schema: JsonDict) -> Check:
        if not is_number(argument):
            raise Unsupported(key)
        compare: dict[str, Callable[[Any], bool]] = {
            "minimum": lambda v: v >= argument,
            "maximum": lambda v: v <= argument,
            "exclusiveMinimum": lambda v: v > argument,
            "exclusiveMaximum": lambda v: v < argument,
        }
        test = compare[key]
        return lambda value: not is_number(value) or test(value)

    return build


def _length(kind: type, at_least: bool) -> Callable[[Any, JsonDict], Check]:
    def build(argument: Any, schema: JsonDict) -> Check:
        if not isinstance(argument, int) or isinstance(argument, bool):
            raise Unsupported("length bound")
        if at_least:
            return lambda value: not isinstance(value, kind) or len(cast(Sized, value)) >= argument
        return lambda value: not isinstance(value, kind) or len(cast(Sized, value)) <= argument

    return build


def _any_of(argument: Any, schema: JsonDict) -> Check:
    checks = [_compile(sub) for sub in argument]
    return lambda value: any(check(value) for check in checks)


def _all_of(argument: Any, schema: JsonDict) -> Check:
    checks = [_compile(sub) for sub in argument]
    return lambda value: all(check(value) for check in checks)


def _one_of(argument: Any, schema: JsonDict) -> Check:
    checks = [_compile(sub) for sub in argument]
    return lambda value: sum(1 for check in checks if check(value)) == 1


_BUILDERS: dict[str, Callable[[Any, JsonDict], Check]] = {
    "type": _type,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional,
    "items": _items,
    "enum": _enum,
    "const": _const,
    **{key: _bound(key) for key in _NUMERIC},
    "minLength": _length(str, True),
    "maxLength": _length(str, False),
    "minItems": _length(list, True),
    "maxItems": _length(list, False),
    "anyOf": _any_of,
    "allOf": _all_of,
    "oneOf": _one_of,
}
