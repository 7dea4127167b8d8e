"""Deterministic, schema-driven JSON values: the offline backend's generator and argument sampler."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from typing import Any

JsonDict = dict[str, Any]

FIRST_NAMES = ("Ava", "Ben", "Chloe", "Diego", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kira", "Luca")
LAST_NAMES = ("Li", "Novak", "Okafor", "Silva", "Berg", "Tanaka", "Moreau", "Haddad", "Kowalski", "Reyes")
CITIES = ("Lisbon", "Osaka", "Nairobi", "Toronto", "Berlin", "Lima", "Seoul", "Dublin", "Austin", "Cairo")
WORDS = (
    "alpha",
    "amber",
    "bright",
    "cedar",
    "delta",
    "ember",
    "frost",
    "grove",
    "harbor",
    "ivory",
    "juniper",
    "kestrel",
)
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF")


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the form every digest is computed on."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def json_copy(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars): much faster than `copy.deepcopy`."""
    if isinstance(value, dict):
        return {key: json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_copy(item) for item in value]
    return value


def digest(value: Any, length: int = 64) -> str:
    """SHA-256 hex digest of a value's canonical JSON."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]


def derive_seed(*parts: Any) -> int:
    """A 32-bit seed derived from any JSON-able parts (stable across processes and platforms)."""
    return int(digest(list(parts), 8), 16)


def _types(schema: JsonDict) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, list):
        return [str(k) for k in kind]
    if isinstance(kind, str):
        return [kind]
    if "properties" in schema:
        return ["object"]
    if "items" in schema:
        return ["array"]
    return ["string"]


def generate_value(schema: JsonDict | None, rng: random.Random, name: str = "", full: bool = True) -> Any:
    """A value that conforms to `schema`, built from `rng`; property names steer realistic strings.

    `full` fills optional object properties too (otherwise only the required ones).
    """
    schema = schema or {}
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf"):
        options = [s for s in schema.get(key, []) if s.get("type") != "null"]
        if options:
            return generate_value(options[0], rng, name, full)
    if "allOf" in schema and schema["allOf"]:
        return generate_value(schema["allOf"][0], rng, name, full)
    kinds = [k for k in _types(schema) if k != "null"] or ["null"]
    return _GENERATORS.get(kinds[0], _null)(schema, rng, name, full)


def _object(schema: JsonDict, rng: random.Random, name: str, full: bool) -> JsonDict:
    required = set(schema.get("required", []))
    properties: JsonDict = schema.get("properties", {})
    return {key: generate_value(sub, rng, key, full) for key, sub in properties.items() if full or key in required}


def _array(schema: JsonDict, rng: random.Random, name: str, full: bool) -> list[Any]:
    low = int(schema.get("minItems", 1))
    high = max(low, min(int(schema.get("maxItems", 3)), low + 2))
    items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
    singular = name[:-1] if name.endswith("s") else name
    return [generate_value(items, rng, singular, full) for _ in range(rng.randint(low, high))]


def _bound(schema: JsonDict, inclusive: str, exclusive: str, default: float) -> float:
    """A numeric bound of a schema: the inclusive keyword, else the exclusive one, else `default`."""
    for key in (inclusive, exclusive):
        value = schema.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return default


def _exclusive(schema: JsonDict, bound: str) -> bool:
    """Whether the `bound` ("minimum"/"maximum") in force is the exclusive keyword."""
    return bound not in schema and f"exclusive{bound.title()}" in schema


def _number(schema: JsonDict, rng: random.Random, name: str, full: bool, integer: bool) -> float | int:
    low = float(_bound(schema, "minimum", "exclusiveMinimum", 0.0))
    default_high = 5.0 if re.search(r"count|quantity|qty|rating|stars|num|passengers|guests", name) else 500.0
    high = float(_bound(schema, "maximum", "exclusiveMaximum", max(low + 1, default_high)))
    if integer:
        low_i = math.floor(low) + 1 if _exclusive(schema, "minimum") else math.ceil(low)
        high_i = math.ceil(high) - 1 if _exclusive(schema, "maximum") else math.floor(high)
        return rng.randint(low_i, max(low_i, high_i))
    return round(rng.uniform(float(low), float(high)), 2)


def _string(schema: JsonDict, rng: random.Random, name: str, full: bool) -> str:
    text = _format_string(schema.get("format"), rng) or _named_string(name.lower(), rng)
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    text = text.ljust(low, "x")
    return text[: int(high)] if high is not None else text


def _format_string(fmt: Any, rng: random.Random) -> str | None:
    if fmt == "date":
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if fmt == "date-time":
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z"
    if fmt == "email":
        return f"{rng.choice(FIRST_NAMES).lower()}.{rng.choice(LAST_NAMES).lower()}@example.com"
    if fmt in ("uri", "url"):
        return f"https://example.com/{rng.choice(WORDS)}/{rng.randint(1, 999)}"
    if fmt == "uuid":
        return f"{rng.getrandbits(32):08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
    return None


_NAMED: tuple[tuple[str, Any], ...] = (
    ("email", lambda r: f"{r.choice(FIRST_NAMES).lower()}.{r.choice(LAST_NAMES).lower()}@example.com"),
    ("phone", lambda r: f"+1-555-{r.randint(100, 999)}-{r.randint(1000, 9999)}"),
    ("date", lambda r: f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"),
    ("time", lambda r: f"{r.randint(8, 20):02d}:{r.choice(('00', '30'))}"),
    ("currency", lambda r: r.choice(CURRENCIES)),
    ("city", lambda r: r.choice(CITIES)),
    ("origin", lambda r: r.choice(CITIES)),
    ("destination", lambda r: r.choice(CITIES)),
    ("country", lambda r: r.choice(("Portugal", "Japan", "Kenya", "Canada", "Germany", "Peru"))),
    ("url", lambda r: f"https://example.com/{r.choice(WORDS)}/{r.randint(1, 999)}"),
    ("id", lambda r: f"{r.choice(WORDS)}_{r.randint(100, 999)}"),
    ("code", lambda r: f"{r.choice(WORDS)[:3].upper()}{r.randint(10, 99)}"),
    ("name", lambda r: f"{r.choice(FIRST_NAMES)} {r.choice(LAST_NAMES)}"),
    ("title", lambda r: f"{r.choice(WORDS).title()} {r.choice(WORDS)}"),
    ("address", lambda r: f"{r.randint(1, 250)} {r.choice(WORDS).title()} Street, {r.choice(CITIES)}"),
)


def _named_string(name: str, rng: random.Random) -> str:
    for fragment, make in _NAMED:
        if fragment in name:
            return str(make(rng))
    return f"{rng.choice(WORDS)} {rng.choice(WORDS)}"


def _null(schema: JsonDict, rng: random.Random, name: str, full: bool) -> None:
    return None


_GENERATORS: dict[str, Any] = {
    "object": _object,
    "array": _array,
    "integer": lambda s, r, n, f: _number(s, r, n, f, integer=True),
    "number": lambda s, r, n, f: _number(s, r, n, f, integer=False),
    "boolean": lambda s, r, n, f: r.random() < 0.5,
    "string": _string,
    "null": _null,
}
