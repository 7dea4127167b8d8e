"""Make generated outputs agree with the state store, and write what they reveal back into it."""

from __future__ import annotations

import json
import random
from functools import lru_cache
from typing import Any

import jsonschema

from toolgym.simulators.simulated.fastschema import compile_schema
from toolgym.simulators.simulated.state import EffectPlan, StateStore, singular
from toolgym.simulators.simulated.values import canonical_json, derive_seed, generate_value, json_copy

JsonDict = dict[str, Any]
SEARCH_KEYS = ("query", "q", "search", "keyword", "keywords", "text")
LIMIT_KEYS = ("limit", "max_results", "page_size", "top_k")
COUNT_KEYS = ("count", "total", "total_count")
CONFIRM_KEYS = ("deleted", "cancelled", "canceled", "closed", "removed", "success", "ok")


class StateConflict(LookupError):
    """A call refers to an entity that does not exist (or creates one that already does)."""


class _Checker:
    """A schema's compiled validity test (when it stays in the common subset) and its jsonschema validator."""

    def __init__(self, schema: JsonDict) -> None:
        self.fast = compile_schema(schema)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        self.validator = cls(schema)

    def valid(self, value: Any) -> bool:
        return self.fast(value) if self.fast is not None else bool(self.validator.is_valid(value))


_BY_ID: dict[int, tuple[JsonDict, _Checker]] = {}


@lru_cache(maxsize=4096)
def _compiled(schema_json: str) -> _Checker:
    return _Checker(json.loads(schema_json))


def _checker(schema: JsonDict) -> _Checker:
    """The checker of a schema: by object identity first (specs keep their schemas), then by content."""
    entry = _BY_ID.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1]
    if len(_BY_ID) > 8192:
        _BY_ID.clear()
    checker = _compiled(canonical_json(schema))
    _BY_ID[id(schema)] = (schema, checker)  # holding the schema keeps its id from being reused
    return checker


def is_valid(value: Any, schema: JsonDict | None) -> bool:
    """Whether `value` conforms to `schema` (None accepts anything)."""
    return schema is None or _checker(schema).valid(value)


def schema_problem(value: Any, schema: JsonDict | None, what: str = "output") -> str | None:
    """A one-line account of why `value` (the `what`) violates `schema`, or None (jsonschema explains)."""
    if schema is None:
        return None
    checker = _checker(schema)
    if checker.valid(value):
        return None
    error = jsonschema.exceptions.best_match(checker.validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join([what, *(str(p) for p in error.absolute_path)])
    return f"{where}: {error.message}"[:300]


def read_view(store: StateStore, plan: EffectPlan, arguments: JsonDict) -> list[JsonDict]:
    """The records a call is about (shown to the backend); raises `StateConflict` for missing ids."""
    if plan.effect == "none" or plan.entity is None or plan.id_key is None:
        return []
    if plan.effect == "create":
        wanted = arguments.get(plan.id_key)
        if wanted is not None and store.get(plan.entity, wanted) is not None:
            raise StateConflict(f"{plan.entity} '{wanted}' already exists")
        return []
    if plan.effect == "list":
        return filter_records(store.records(plan.entity), arguments)
    record = store.get(plan.entity, arguments.get(plan.id_key))
    if record is None:
        raise StateConflict(f"{plan.entity} '{arguments.get(plan.id_key)}' not found")
    return [json_copy(record)]


def filter_records(records: list[JsonDict], arguments: JsonDict) -> list[JsonDict]:
    """Records matching the arguments that name stored fields; search words match any text field."""
    out = records
    for key, wanted in arguments.items():
        if wanted is None or key in LIMIT_KEYS:
            continue
        if key in SEARCH_KEYS and isinstance(wanted, str):
            out = [r for r in out if any(wanted.casefold() in str(v).casefold() for v in r.values())]
        elif any(key in r for r in records):
            out = [r for r in out if _same(r.get(key), wanted)]
    limit = next((arguments[k] for k in LIMIT_KEYS if isinstance(arguments.get(k), int)), None)
    return [json_copy(record) for record in (out[:limit] if limit is not None and limit >= 0 else out)]


def _same(stored: Any, wanted: Any) -> bool:
    if isinstance(stored, str) and isinstance(wanted, str):
        return stored.casefold() == wanted.casefold()
    return bool(stored == wanted)


def apply_effect(store: StateStore, plan: EffectPlan, arguments: JsonDict, output: Any, schema: JsonDict | None) -> Any:
    """Write the call's effect into the store and return the output overlaid with stored values."""
    if plan.effect == "none" or plan.entity is None or plan.id_key is None:
        return echo_arguments(json_copy(output), arguments, schema)
    output = json_copy(output)
    entity, id_key = plan.entity, plan.id_key
    if plan.effect == "delete":
        record = store.delete(entity, arguments[id_key])
        return _confirm(overlay(output, record or {}, schema, plan, write_back=False), schema)
    fields_before = _field_count(store, entity)
    if plan.effect == "list":
        records = filter_records(store.records(entity), arguments)
        output = _overlay_list(store, plan, output, schema, records)
    else:
        output = overlay(output, _target_record(store, plan, arguments), schema, plan)
    if plan.effect in ("create", "update") or _field_count(store, entity) != fields_before:
        store.touch()  # records changed in place (updated, or generated fields pinned)
    return output


def _target_record(store: StateStore, plan: EffectPlan, arguments: JsonDict) -> JsonDict:
    """The stored record a create/get/update call is about (created or updated here)."""
    entity, id_key = plan.entity or "", plan.id_key or ""
    if plan.effect == "create":
        entity_id = arguments.get(id_key) or store.new_id(entity)
        record = {id_key: entity_id, **{k: json_copy(v) for k, v in arguments.items() if v is not None}}
        store.put(entity, str(entity_id), record)
        return record
    record = store.get(entity, arguments[id_key]) or {}
    if plan.effect == "update":
        record.update({k: json_copy(v) for k, v in arguments.items() if v is not None and k != id_key})
    return record


def _field_count(store: StateStore, entity: str) -> int:
    """Fields stored for an entity type: pinning generated fields only ever adds some."""
    return sum(len(record) for record in store.tables.get(entity, {}).values())


def echo_arguments(output: Any, arguments: JsonDict, schema: JsonDict | None) -> Any:
    """Top-level output fields named like an argument repeat the argument (a forecast for the city asked)."""
    properties = (schema or {}).get("properties") or {}
    if isinstance(output, dict):
        for key, value in arguments.items():
            if key in properties and value is not None and is_valid(value, properties[key]):
                output[key] = json_copy(value)
    return output


def _confirm(output: Any, schema: JsonDict | None) -> Any:
    """A delete that happened says so: boolean confirmation flags are set to true."""
    properties = (schema or {}).get("properties") or {}
    if isinstance(output, dict):
        for key in CONFIRM_KEYS:
            if properties.get(key, {}).get("type") == "boolean":
                output[key] = True
    return output


def _entity_slot(schema: JsonDict | None, entity: str) -> tuple[str | None, JsonDict] | None:
    """Where the entity object sits in an output schema: top level (None) or under a property."""
    if not schema or not isinstance(schema.get("properties"), dict):
        return None
    for name, sub in schema["properties"].items():
        if singular(name) == entity and isinstance(sub, dict) and isinstance(sub.get("properties"), dict):
            return name, sub
    return None, schema


def overlay(output: Any, record: JsonDict, schema: JsonDict | None, plan: EffectPlan, write_back: bool = True) -> Any:
    """Replace entity fields in `output` by the record's values (where they fit the schema);
    with `write_back`, fields the record lacks are pinned in it from the output."""
    slot = _entity_slot(schema, plan.entity or "")
    if slot is None or not isinstance(output, dict):
        return output
    name, sub = slot
    target = output if name is None else output.setdefault(name, {})
    if not isinstance(target, dict):
        target = output[name] = {}
    for prop, prop_schema in sub["properties"].items():
        value = record.get(prop, record.get(plan.id_key or "") if prop == "id" else None)
        if value is not None and is_valid(value, prop_schema):
            target[prop] = json_copy(value)
        elif write_back and prop not in record and prop != "id" and target.get(prop) is not None:
            record[prop] = json_copy(target[prop])
    return output


def _array_slot(schema: JsonDict | None, entity: str) -> tuple[str | None, JsonDict] | None:
    if not schema:
        return None
    if schema.get("type") == "array":
        return None, schema.get("items") or {}
    arrays = [
        (n, s) for n, s in (schema.get("properties") or {}).items() if isinstance(s, dict) and s.get("type") == "array"
    ]
    named = [a for a in arrays if singular(a[0]) == entity]
    candidates = named or arrays
    if not candidates:
        return None
    name, array_schema = candidates[0]
    return name, array_schema.get("items") or {}


def _overlay_list(
    store: StateStore, plan: EffectPlan, output: Any, schema: JsonDict | None, records: list[JsonDict]
) -> Any:
    slot = _array_slot(schema, plan.entity or "")
    if slot is None:
        return output
    name, items_schema = slot
    generated = output if name is None else (output.get(name) if isinstance(output, dict) else None)
    generated = generated if isinstance(generated, list) else []
    items = [_list_item(store, plan, items_schema, records, generated, i) for i in range(len(records))]
    if name is None:
        return items
    output = output if isinstance(output, dict) else {}
    output[name] = items
    for key in COUNT_KEYS:
        if key in (schema or {}).get("properties", {}) and is_valid(len(records), schema["properties"][key]):  # type: ignore[index]
            output[key] = len(records)
    return output


def _list_item(
    store: StateStore,
    plan: EffectPlan,
    items_schema: JsonDict,
    records: list[JsonDict],
    generated: list[Any],
    index: int,
) -> Any:
    record = records[index]
    entity_id = record.get(plan.id_key or "")
    if not isinstance(items_schema.get("properties"), dict):
        return entity_id if is_valid(entity_id, items_schema) else record
    stored = store.get(plan.entity or "", entity_id)
    source = stored if stored is not None else record
    get_plan = EffectPlan("get", plan.entity, plan.id_key)
    base = generated[index] if index < len(generated) and isinstance(generated[index], dict) else None
    if base is None:
        shown = _fully_stored(source, items_schema, get_plan)
        if shown is not None:  # every field is stored: nothing to generate (same value, no RNG)
            return shown
        base = generate_value(items_schema, random.Random(derive_seed(plan.entity, entity_id)))
    return overlay(base, source, items_schema, get_plan)


def _fully_stored(record: JsonDict, schema: JsonDict, plan: EffectPlan) -> JsonDict | None:
    """The item built from the record alone, when the record fills every top-level property."""
    slot = _entity_slot(schema, plan.entity or "")
    if slot is None or slot[0] is not None:
        return None
    shown = overlay({}, record, schema, plan, write_back=False)
    return shown if len(shown) == len(schema["properties"]) else None
