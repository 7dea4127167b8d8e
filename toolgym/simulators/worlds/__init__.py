"""Worlds: typed state (tables of records), snapshot/restore, state hash, and rewards computed from state."""

from toolgym.simulators.worlds.evaluation import (
    CallPattern,
    Evaluation,
    Milestone,
    Minefield,
    PolicyRule,
    TraceEvent,
    call_event,
    check_rules,
    evaluate,
    milestones_reached,
    minefields_hit,
    normalize_output,
    outputs_present,
    text_event,
)
from toolgym.simulators.worlds.policy import authenticate_first, confirm_before_write, per_call
from toolgym.simulators.worlds.state import Record, WorldState, canonical_hash, canonical_json

__all__ = [
    "CallPattern",
    "Evaluation",
    "Milestone",
    "Minefield",
    "PolicyRule",
    "Record",
    "TraceEvent",
    "WorldState",
    "authenticate_first",
    "call_event",
    "canonical_hash",
    "canonical_json",
    "check_rules",
    "confirm_before_write",
    "evaluate",
    "milestones_reached",
    "minefields_hit",
    "normalize_output",
    "outputs_present",
    "per_call",
    "text_event",
]
