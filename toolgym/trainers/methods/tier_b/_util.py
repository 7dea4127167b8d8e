"""Batch helpers shared by the Tier B/C methods: tool-call counts, spans, masked group statistics."""

from __future__ import annotations

import torch
from torch import Tensor

from toolgym.trainers.advantages import GROUP_STD_EPS, group_stats
from toolgym.trainers.batch import RolloutBatch, SpanType
from toolgym.trainers.rewards import correctness


def tool_call_counts(batch: RolloutBatch) -> Tensor:
    """m_i: tool calls per sequence from `num_tool_calls`, else `tool_calls`, else 0. -> [B] float."""
    if batch.num_tool_calls is not None:
        return batch.num_tool_calls.to(torch.float32)
    if batch.tool_calls is not None:
        return torch.tensor([float(len(c)) for c in batch.tool_calls])
    return torch.zeros(batch.batch_size)


def tool_span_mask(batch: RolloutBatch) -> Tensor:
    """1 on trainable tokens inside tool-call spans (span_type, else `tool_calls` start/end). -> [B, T]."""
    if batch.span_type is not None:
        return (batch.span_type.long() == int(SpanType.TOOL_CALL)).to(torch.float32) * batch.mask
    out = torch.zeros_like(batch.mask)
    for i, calls in enumerate(batch.tool_calls or []):
        for call in calls:
            if 0 <= call.start < call.end:
                out[i, call.start : call.end] = 1.0
    return out * batch.mask


def first_tool_call_position(batch: RolloutBatch) -> Tensor:
    """Index of the first tool-call token among the sequence's model tokens, -1 if none. -> [B] float.

    Counted over model tokens only (tool/observation tokens do not advance it), so it is the
    number of tokens the policy wrote before its first call.
    """
    spans = tool_span_mask(batch)  # [B, T]
    model_pos = torch.cumsum(batch.mask, dim=1) - 1  # position among model tokens
    big = torch.full_like(model_pos, float("inf"))
    first = torch.where(spans > 0, model_pos, big).min(dim=1).values
    return torch.where(torch.isinf(first), torch.full_like(first, -1.0), first)


def member_z(values: Tensor, group_id: Tensor, member: Tensor, eps: float = GROUP_STD_EPS) -> Tensor:
    """z-score of `values` within each group over member rows only; 0 for non-members. [B] -> [B].

    A group with fewer than two members gives 0 (no baseline), as GRPO does for single samples.
    """
    w = member.to(values.dtype)
    mean, std, count = group_stats(values, group_id, weights=w)
    z = (values - mean) / (std + eps)
    return torch.where((w > 0) & (count > 1), z, torch.zeros_like(z))


def format_ok(batch: RolloutBatch) -> Tensor:
    """R_fmt: `reward_components["format"]` if present, else 1 unless an `invalid_call/*` penalty fired. -> [B]."""
    comps = batch.reward_components
    if "format" in comps:
        return comps["format"].to(torch.float32)
    bad = torch.zeros(batch.batch_size, dtype=torch.bool)
    for name, value in comps.items():
        if name.startswith("invalid_call"):
            bad |= value.to(torch.float32) < 0
    return (~bad).to(torch.float32)


def answer_score(batch: RolloutBatch) -> Tensor:
    """R_ans: `reward_components["success"]` if present, else correctness as 0/1. -> [B] float."""
    if "success" in batch.reward_components:
        return batch.reward_components["success"].to(torch.float32)
    return correctness(batch).to(torch.float32)


def turn_values_to_tokens(values: Tensor, turn_ids: Tensor) -> Tensor:
    """Spread per-turn values onto the tokens of each turn. values [B, K], turn_ids [B, T] (-1 off) -> [B, T]."""
    if values.shape[1] == 0:
        return torch.zeros(turn_ids.shape, dtype=values.dtype)
    idx = turn_ids.clamp(min=0, max=values.shape[1] - 1)
    return torch.where(turn_ids >= 0, values.gather(1, idx), torch.zeros_like(idx, dtype=values.dtype))


def turns_per_sequence(turn_ids: Tensor) -> Tensor:
    """K_i: number of assistant turns with trainable tokens. [B, T] -> [B] long."""
    return (turn_ids.max(dim=1).values + 1).clamp(min=0)
