"""Typed world state: tables of pydantic records, snapshot and restore, a canonical state hash."""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

JsonDict = dict[str, Any]
W = TypeVar("W", bound="WorldState")
FLOAT_DIGITS = 6


class Record(BaseModel):
    """One row of a world table; assignments are validated so tools cannot corrupt types."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class WorldState(BaseModel):
    """A world: every field is a table, a `dict[str, Record]` keyed by record id, or a scalar setting.

    Tools mutate a world in place; `snapshot()` / `restore()` round-trip it through JSON and
    `state_hash()` is equal for two worlds exactly when their canonical JSON is equal.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def snapshot(self) -> JsonDict:
        """The world as plain JSON data (what `restore` accepts)."""
        return self.model_dump(mode="json")

    @classmethod
    def restore(cls: type[W], data: JsonDict) -> W:
        """Rebuild a world from `snapshot()` output, validating every record."""
        return cls.model_validate(data)

    def clone(self: W) -> W:
        """An independent deep copy (through JSON: faster than `copy.deepcopy` for large worlds)."""
        return type(self).model_validate_json(self.model_dump_json())

    def state_hash(self) -> str:
        """sha256 of the canonical JSON form (sorted keys, rounded floats)."""
        return canonical_hash(self.snapshot())

    def tables(self) -> dict[str, dict[str, Any]]:
        """The world's tables by name (fields that are dicts of records)."""
        return {name: value for name, value in self if isinstance(value, dict)}

    def diff(self, other: WorldState) -> dict[str, JsonDict]:
        """Per table, the record ids added, removed and changed going from `self` to `other`."""
        mine, theirs = self.snapshot(), other.snapshot()
        changes: dict[str, JsonDict] = {}
        for name in sorted(set(mine) | set(theirs)):
            entry = _table_diff(mine.get(name), theirs.get(name))
            if entry:
                changes[name] = entry
        return changes


def _table_diff(before: Any, after: Any) -> JsonDict:
    if not isinstance(before, dict) or not isinstance(after, dict):
        return {} if canonical_json(before) == canonical_json(after) else {"value": {"from": before, "to": after}}
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if canonical_json(before[k]) != canonical_json(after[k]))
    return {k: v for k, v in (("added", added), ("removed", removed), ("changed", changed)) if v}


def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        rounded = round(value, FLOAT_DIGITS)
        return int(rounded) if rounded.is_integer() else rounded
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def canonical_json(data: Any) -> str:
    """Canonical JSON text: sorted keys, no whitespace, floats rounded to 6 digits."""
    return json.dumps(_canonical(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_hash(data: Any) -> str:
    """sha256 hex digest of `canonical_json(data)`."""
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()
