"""Text-level `Trace`s (with forks) → `RolloutBatch`: token ids, masks, spans, turns and tree fields."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from toolgym.trainers.batch import Path, RolloutBatch, SpanType, ToolCallRecord, stable_key
from toolgym.trainers.methods.strategies import Trace

Encode = Callable[[str], list[int]]
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_SEGMENT = re.compile(r"(<tool_call>.*?</tool_call>|<answer>.*?</answer>)", re.S)


@dataclass(frozen=True)
class TraceFormat:
    """Markers around messages (the model writes `end` after each action)."""

    user: str = "<|user|>"
    assistant: str = "<|assistant|>"
    tool: str = "<|tool|>"
    end: str = "<|eos|>"

    @classmethod
    def of(cls, fmt: Any) -> TraceFormat:
        """The markers of a rollout `ChatFormat` (e.g. the tiny model's `TINY_FORMAT`)."""
        return cls(user=fmt.user, assistant=fmt.assistant, tool=fmt.tool, end=fmt.end_of_turn)


@dataclass
class _Row:
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    span: list[int] = field(default_factory=list)
    turn: list[int] = field(default_factory=list)
    branch_point: int = -1

    def add(self, ids: list[int], trainable: bool, span: SpanType, turn: int) -> None:
        self.ids += ids
        self.mask += [int(trainable)] * len(ids)
        self.span += [int(span)] * len(ids)
        self.turn += [turn if trainable else -1] * len(ids)


def _action_segments(text: str) -> list[tuple[str, SpanType]]:
    """Split an action into reasoning, tool-call and answer pieces."""
    out = []
    for piece in _SEGMENT.split(text):
        if piece:
            kind = (
                SpanType.TOOL_CALL
                if piece.startswith("<tool_call>")
                else (SpanType.ANSWER if piece.startswith("<answer>") else SpanType.REASON)
            )
            out.append((piece, kind))
    return out


def _encode_trace(trace: Trace, encode: Encode, fmt: TraceFormat) -> _Row:
    row = _Row()
    row.add(encode(f"{fmt.user}{trace.prompt}{fmt.assistant}"), False, SpanType.PROMPT, -1)
    for k, turn in enumerate(trace.turns):
        new = trace.branch_turn < 0 or k >= trace.branch_turn
        action = turn.action
        if k == trace.branch_turn and trace.branch_prefix and action.startswith(trace.branch_prefix):
            row.add(encode(trace.branch_prefix), False, SpanType.REASON, -1)  # frozen prefix: not trained
            action = action[len(trace.branch_prefix) :]
        if k == trace.branch_turn:
            row.branch_point = len(row.ids)
        for piece, kind in _action_segments(action + fmt.end):
            row.add(encode(piece), new, kind, k)
        if k < len(trace.turns) - 1:
            row.add(encode(f"{fmt.tool}{turn.observation}{fmt.assistant}"), False, SpanType.OBS, -1)
    return row


def _records(trace: Trace) -> list[ToolCallRecord]:
    return [
        ToolCallRecord(
            turn=k,
            name=str(c.get("name", "")),
            arguments=c["arguments"] if isinstance(c.get("arguments"), dict) else {},
            exec_ok=bool(c.get("ok", c.get("error") is None)),
        )
        for k, t in enumerate(trace.turns)
        for c in (t.info.get("tool_calls") or [])
    ]


def gold_of(trace: Trace) -> dict[str, Any] | None:
    """`{"calls": [...], "answer": ...}` from the task's gold actions recorded by the runner, if any."""
    gold = trace.meta.get("gold")
    if gold is None:
        return None
    calls = []
    for action in gold.get("actions", []):
        for body in _CALL.findall(action):
            try:
                call = json.loads(body)
            except ValueError:
                continue
            if isinstance(call, dict) and "name" in call:
                calls.append({"name": call["name"], "arguments": call.get("arguments", {})})
    return {"calls": calls, "answer": gold.get("answer")}


def _components(traces: Sequence[Trace]) -> dict[str, torch.Tensor]:
    sums: list[dict[str, float]] = []
    for tr in traces:
        total: dict[str, float] = {}
        for t in tr.turns:
            for name, v in (t.info.get("reward_components") or {}).items():
                total[name] = total.get(name, 0.0) + float(v)
        total["elpo_critical_turn"] = float(tr.meta.get("critical_turn", -1))
        sums.append(total)
    keys = sorted({k for s in sums for k in s})
    return {k: torch.tensor([s.get(k, 0.0) for s in sums]) for k in keys}


def _pad(rows: Sequence[list[Any]], width: int, fill: Any, dtype: torch.dtype) -> torch.Tensor:
    out = torch.full((len(rows), width), fill, dtype=dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=dtype)
    return out


def traces_to_batch(
    traces: Sequence[Trace], encode: Encode, fmt: TraceFormat | None = None, pad_id: int = 0
) -> RolloutBatch:
    """Stack traces into a batch: a fork's shared turns and frozen prefix have loss mask 0,
    `branch_point` is the token index where its new tokens start, `parent_id` its parent's sample id."""
    if not traces:
        raise ValueError("traces_to_batch needs at least one trace")
    rows = [_encode_trace(t, encode, fmt or TraceFormat()) for t in traces]
    width = max(len(r.ids) for r in rows)
    lengths = torch.tensor([len(r.ids) for r in rows])
    return RolloutBatch(
        input_ids=_pad([r.ids for r in rows], width, pad_id, torch.long),
        attention_mask=(torch.arange(width)[None, :] < lengths[:, None]).long(),
        loss_mask=_pad([r.mask for r in rows], width, 0, torch.long),
        reward=torch.tensor([t.reward for t in traces], dtype=torch.float32),
        group_id=torch.tensor([t.plan.group_id for t in traces]),
        span_type=_pad([r.span for r in rows], width, int(SpanType.PAD), torch.int8),
        turn_idx=_pad([r.turn for r in rows], width, -1, torch.int16),
        sample_id=torch.tensor([t.sample_id for t in traces]),
        parent_id=torch.tensor([t.parent_id for t in traces]),
        branch_point=torch.tensor([r.branch_point for r in rows]),
        path=torch.tensor([int(Path.TOOLS_OFF if t.plan.path == "tools_off" else Path.TOOLS_ON) for t in traces]),
        prompt_key=torch.tensor([stable_key(t.prompt) for t in traces]),
        correct=torch.tensor([t.success for t in traces]),
        num_tool_calls=torch.tensor([t.num_tool_calls for t in traces]),
        num_turns=torch.tensor([len(t.turns) for t in traces]),
        resp_len=torch.tensor([sum(r.mask) for r in rows]),
        reward_components=_components(traces),
        tool_calls=[_records(t) for t in traces],
        response_text=["".join(turn.action for turn in t.turns) for t in traces],
        gold=[gold_of(t) for t in traces],
    )
