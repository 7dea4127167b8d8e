"""The explicit entity store behind simulated tools, and which entity each tool reads or writes."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from toolgym.schemas import ToolSpec
from toolgym.simulators.simulated.values import digest, json_copy

JsonDict = dict[str, Any]
Effect = Literal["create", "get", "list", "update", "delete", "none"]
VERBS: dict[str, tuple[str, ...]] = {
    "create": ("create", "add", "new", "register", "book", "insert", "post", "make", "open", "schedule", "place"),
    "update": ("update", "edit", "modify", "set", "rename", "change", "patch", "move", "reschedule"),
    "delete": ("delete", "remove", "cancel", "close", "drop", "archive", "destroy"),
    "get": ("get", "fetch", "read", "retrieve", "show", "lookup", "describe", "view", "check"),
    "list": ("list", "search", "find", "query", "browse", "all"),
}
_VERB_OF = {word: effect for effect, words in VERBS.items() for word in words}
EFFECT_TAG = "effect:"


@dataclass(frozen=True)
class EffectPlan:
    """What a tool does to the store: its effect, the entity type it touches and that entity's id key."""

    effect: Effect
    entity: str | None = None
    id_key: str | None = None


def _tokens(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [t for t in re.split(r"[^a-zA-Z0-9]+", spaced.lower()) if t]


@lru_cache(maxsize=4096)
def singular(word: str) -> str:
    """A naive English singular ("contacts" → "contact", "entries" → "entry")."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _declared_effect(spec: ToolSpec) -> Effect | None:
    for tag in spec.annotations.tags:
        if tag.startswith(EFFECT_TAG) and tag[len(EFFECT_TAG) :] in (*VERBS, "none"):
            return tag[len(EFFECT_TAG) :]  # type: ignore[return-value]
    return None


def _verb_and_rest(spec: ToolSpec) -> tuple[Effect | None, list[str]]:
    """The effect named by the first verb of the name (`create_contact`, `crm_add_lead`,
    `contact_delete`) and the tokens naming the entity (after the verb, else before it)."""
    tokens = _tokens(spec.name)
    declared = _declared_effect(spec)
    at = next((i for i, token in enumerate(tokens) if token in _VERB_OF), None)
    if at is None:
        return declared, tokens
    rest = tokens[at + 1 :] or tokens[:at]
    return declared or _VERB_OF[tokens[at]], rest  # type: ignore[return-value]


def _declared_entity(spec: ToolSpec) -> str | None:
    names = spec.annotations.writes or spec.annotations.reads
    return singular(names[0]) if names else None


def infer_plans(specs: Iterable[ToolSpec]) -> dict[str, EffectPlan]:
    """Effect plans for every spec: annotations first (`writes`/`reads`, `effect:<verb>` tags),
    then names (`create_contact`, `list_contacts`…). Entities are the ones some tool creates."""
    specs = list(specs)
    raw = {s.name: (*_verb_and_rest(s), _declared_entity(s)) for s in specs}
    entities = {entity or singular("_".join(rest)) for effect, rest, entity in raw.values() if effect == "create"}
    entities.discard("")
    plans: dict[str, EffectPlan] = {}
    for spec in specs:
        effect, rest, declared = raw[spec.name]
        entity = declared or _match_entity(rest, entities)
        if effect is None or effect == "none" or entity is None or entity not in entities:
            plans[spec.name] = EffectPlan("none")
        else:
            plans[spec.name] = EffectPlan(effect, entity)
    id_keys = {entity: _id_key(entity, specs, plans) for entity in entities}
    return {s.name: _with_id_key(s, plans[s.name], id_keys) for s in specs}


def _with_id_key(spec: ToolSpec, plan: EffectPlan, id_keys: dict[str, str]) -> EffectPlan:
    """Attach the entity's id key; a get/update/delete tool that takes no id cannot be stateful."""
    if plan.entity is None:
        return plan
    id_key = id_keys[plan.entity]
    if plan.effect in ("get", "update", "delete") and id_key not in spec.input_schema.get("properties", {}):
        return EffectPlan("none")
    return EffectPlan(plan.effect, plan.entity, id_key)


def _match_entity(rest: list[str], entities: set[str]) -> str | None:
    """The longest known entity named by a prefix of the remaining name tokens."""
    for end in range(len(rest), 0, -1):
        candidate = singular("_".join(rest[:end]))
        if candidate in entities:
            return candidate
    return None


def _id_key(entity: str, specs: list[ToolSpec], plans: dict[str, EffectPlan]) -> str:
    preferred = f"{entity}_id"
    keyed = [s for s in specs if plans[s.name].entity == entity and plans[s.name].effect in ("get", "update", "delete")]
    names = [str(k) for s in keyed for k in s.input_schema.get("properties", {})]
    if preferred in names:
        return preferred
    if "id" in names:
        return "id"
    return next((n for n in names if n.endswith("_id")), preferred)


class StateStore:
    """Tables of entity records keyed by id, with deterministic id counters and a canonical digest.

    The digest is cached: `put`, `delete`, `new_id` and `table` (which hands out a mutable table)
    invalidate it; code that edits records in place calls `touch()`.
    """

    def __init__(self, tables: dict[str, dict[str, JsonDict]] | None = None, counters: dict[str, int] | None = None):
        self.tables: dict[str, dict[str, JsonDict]] = tables or {}
        self.counters: dict[str, int] = counters or {}
        self._digest: str | None = None

    def touch(self) -> None:
        """Forget the cached digest (records were changed in place)."""
        self._digest = None

    def new_id(self, entity: str) -> str:
        """The next id for `entity`: `<entity>_<n>`, counting from 1."""
        self.counters[entity] = self.counters.get(entity, 0) + 1
        self._digest = None
        return f"{entity}_{self.counters[entity]}"

    def table(self, entity: str) -> dict[str, JsonDict]:
        """The records of one entity type, by id (created on first use; mutable, so the digest resets)."""
        self._digest = None
        return self.tables.setdefault(entity, {})

    def get(self, entity: str, entity_id: Any) -> JsonDict | None:
        """One record, or None."""
        return self.tables.get(entity, {}).get(str(entity_id))

    def put(self, entity: str, entity_id: str, record: JsonDict) -> None:
        """Insert or replace a record."""
        self.table(entity)[str(entity_id)] = record

    def delete(self, entity: str, entity_id: Any) -> JsonDict | None:
        """Remove a record and return it (None if absent)."""
        self._digest = None
        return self.tables.get(entity, {}).pop(str(entity_id), None)

    def records(self, entity: str) -> list[JsonDict]:
        """All records of one entity type, in id-creation order."""
        return list(self.tables.get(entity, {}).values())

    def digest(self) -> str:
        """Canonical SHA-256 of the whole store (tables and counters)."""
        if self._digest is None:
            self._digest = digest({"tables": self.tables, "counters": self.counters})
        return self._digest

    def to_dict(self) -> JsonDict:
        """JSON-serializable copy of the store."""
        return {"tables": json_copy(self.tables), "counters": dict(self.counters)}

    @classmethod
    def from_dict(cls, data: JsonDict) -> StateStore:
        """Rebuild a store from `to_dict` output."""
        return cls(json_copy(data.get("tables", {})), dict(data.get("counters", {})))
