"""RolloutBatch: the token-level record of a batch of episodes that every trainer plug-in reads."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import torch
from torch import Tensor


class SpanType(IntEnum):
    """What a token is (`RolloutBatch.span_type`)."""

    PROMPT = 0
    REASON = 1
    TEXT = 2
    TOOL_CALL = 3
    ANSWER = 4
    OBS = 5
    PAD = 6
    FOLD = 7


class Role(IntEnum):
    """Which role produced a sequence (`RolloutBatch.role`); MATPO uses planner/worker."""

    POLICY = 0
    PLANNER = 1
    WORKER = 2


class Path(IntEnum):
    """Whether tools were on for the episode (`RolloutBatch.path`); AKBE and EAPO use tools_off."""

    TOOLS_ON = 0
    TOOLS_OFF = 1


@dataclass(frozen=True)
class ToolCallRecord:
    """One parsed tool call of a sequence; `start`/`end` are token positions (end exclusive)."""

    turn: int
    name: str
    arguments: dict[str, Any]
    exec_ok: bool = True
    start: int = -1
    end: int = -1
    correct: bool | None = None


@dataclass(frozen=True)
class TurnReward:
    """A reward for assistant turn `turn`; `components` holds labels such as a judge's scores."""

    turn: int
    reward: float
    components: dict[str, float] = field(default_factory=dict)


def stable_key(text: str) -> int:
    """A process-independent 63-bit hash of a prompt, for `RolloutBatch.prompt_key`."""
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


_LIST_FIELDS = (
    "finish_reason",
    "turn_rewards",
    "tool_calls",
    "gold",
    "response_text",
    "answers",
    "infos",
)


@dataclass
class RolloutBatch:
    """A batch of B trainable sequences of length T (methods.md §5.1).

    Every [B, T] tensor is aligned with `input_ids`: position t describes token `input_ids[:, t]`,
    and a logprob at t is `log π(input_ids[:, t] | input_ids[:, :t])`. Prompt, observation and
    padding tokens have `loss_mask == 0`; position 0 is never trainable. [B] tensors hold one
    value per sequence; list fields hold one entry per sequence.
    """

    input_ids: Tensor  # [B, T] long
    attention_mask: Tensor  # [B, T] 1 = real token
    loss_mask: Tensor  # [B, T] 1 = policy-generated, trainable
    reward: Tensor  # [B] float, scalar outcome reward
    group_id: Tensor  # [B] long, prompt uid (rollouts of the same prompt share it)
    prompt_len: Tensor | None = None  # [B] long
    position_ids: Tensor | None = None  # [B, T] long
    span_type: Tensor | None = None  # [B, T] int8, SpanType
    turn_idx: Tensor | None = None  # [B, T] int16, assistant turn k, -1 elsewhere
    rollout_logprobs: Tensor | None = None  # [B, T] behaviour policy μ, 0 where mask 0
    old_logprobs: Tensor | None = None  # [B, T] π_old recomputed by the trainer
    ref_logprobs: Tensor | None = None  # [B, T] reference policy
    values: Tensor | None = None  # [B, T] critic values (PPO/GAE)
    entropy: Tensor | None = None  # [B, T]
    token_rewards: Tensor | None = None  # [B, T] dense rewards (GAE/REINFORCE++ input)
    ref_topk_ids: Tensor | None = None  # [B, T, K]
    ref_topk_probs: Tensor | None = None  # [B, T, K]
    hidden_pool: Tensor | None = None  # [B, H]
    policy_version: Tensor | None = None  # [B] long
    sample_id: Tensor | None = None  # [B] long, unique per sequence
    parent_id: Tensor | None = None  # [B] long, sample_id of the parent, -1 if none
    branch_point: Tensor | None = None  # [B] long, token index of a fork, -1 if none
    role: Tensor | None = None  # [B] long, Role
    path: Tensor | None = None  # [B] long, Path
    prompt_key: Tensor | None = None  # [B] long, stable_key(prompt text)
    correct: Tensor | None = None  # [B] bool
    truncated: Tensor | None = None  # [B] bool
    num_tool_calls: Tensor | None = None  # [B] long
    num_turns: Tensor | None = None  # [B] long
    resp_len: Tensor | None = None  # [B] long, response length in tokens (model + tool)
    reward_vector: Tensor | None = None  # [B, d]
    reward_components: dict[str, Tensor] = field(default_factory=dict)  # name -> [B]
    finish_reason: list[str] | None = None
    turn_rewards: list[list[TurnReward]] | None = None
    tool_calls: list[list[ToolCallRecord]] | None = None
    gold: list[Any] | None = None  # e.g. {"calls": [{"name":…, "arguments":…}], "answer": "…"}
    response_text: list[str] | None = None  # decoded trace (model + tool text), for text rewards
    answers: list[str | None] | None = None  # extracted final answers
    infos: list[Any] | None = None  # per-sequence list of per-turn env info dicts
    meta: dict[str, Any] = field(default_factory=dict)  # batch-level extras (not per row)

    def __post_init__(self) -> None:
        """Check the required shapes agree."""
        b, t = self.input_ids.shape
        for name in ("attention_mask", "loss_mask"):
            if tuple(getattr(self, name).shape) != (b, t):
                raise ValueError(f"{name} must have shape {(b, t)}")
        for name in ("reward", "group_id"):
            if getattr(self, name).shape[0] != b:
                raise ValueError(f"{name} must have length {b}")

    @property
    def batch_size(self) -> int:
        """B."""
        return int(self.input_ids.shape[0])

    @property
    def seq_len(self) -> int:
        """T."""
        return int(self.input_ids.shape[1])

    @property
    def mask(self) -> Tensor:
        """The loss mask as float, [B, T]."""
        return self.loss_mask.to(torch.float32)

    def num_model_tokens(self) -> Tensor:
        """|o_i|: trainable tokens per sequence, [B] float."""
        return self.mask.sum(dim=1)

    def replace(self, **changes: Any) -> RolloutBatch:
        """A shallow copy with some fields replaced."""
        return dataclasses.replace(self, **changes)

    def select(self, indices: Sequence[int] | Tensor) -> RolloutBatch:
        """The sub-batch of rows `indices` (any order, repeats allowed; a bool mask also works)."""
        idx = row_index(indices)
        rows = idx.tolist()
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Tensor):
                changes[f.name] = value[idx]
            elif f.name in _LIST_FIELDS and value is not None:
                changes[f.name] = [value[i] for i in rows]
        changes["reward_components"] = {k: v[idx] for k, v in self.reward_components.items()}
        return dataclasses.replace(self, **changes)

    def to(self, device: torch.device | str) -> RolloutBatch:
        """The batch with every tensor moved to `device`."""
        changes: dict[str, Any] = {
            f.name: getattr(self, f.name).to(device)
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), Tensor)
        }
        changes["reward_components"] = {k: v.to(device) for k, v in self.reward_components.items()}
        return dataclasses.replace(self, **changes)


def row_index(indices: Sequence[int] | Sequence[bool] | Tensor) -> Tensor:
    """Row indices as a 1-D long tensor; a bool mask becomes the indices of its True rows."""
    idx = torch.as_tensor(indices)
    if idx.dtype == torch.bool:
        return torch.nonzero(idx.reshape(-1)).squeeze(1)
    return idx.to(torch.long).reshape(-1)


def concat(batches: Sequence[RolloutBatch], pad_id: int = 0) -> RolloutBatch:
    """Stack batches along B, right-padding [B, T] tensors to the longest T.

    An optional field must be set in all batches or in none.
    """
    if not batches:
        raise ValueError("concat needs at least one batch")
    t_max = max(b.seq_len for b in batches)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(RolloutBatch):
        values = [getattr(b, f.name) for b in batches]
        if f.name == "meta":
            out["meta"] = dict(batches[0].meta)
        elif f.name == "reward_components":
            keys = set(values[0])
            if any(set(v) != keys for v in values):
                raise ValueError("reward_components keys differ between batches")
            out[f.name] = {k: torch.cat([v[k] for v in values]) for k in keys}
        else:
            out[f.name] = _concat_field(f.name, values, t_max, pad_id)
    return RolloutBatch(**out)


def _concat_field(name: str, values: list[Any], t_max: int, pad_id: int) -> Any:
    if all(v is None for v in values):
        return None
    if any(v is None for v in values):
        raise ValueError(f"field {name} is set in some batches but not all")
    if isinstance(values[0], Tensor):
        if values[0].dim() >= 2 and name not in ("reward_vector", "hidden_pool"):
            fill = pad_id if name == "input_ids" else (-1 if name == "turn_idx" else 0)
            values = [_pad_right(v, t_max, fill) for v in values]
        return torch.cat(values)
    return [x for v in values for x in v]


def _pad_right(x: Tensor, t_max: int, fill: int) -> Tensor:
    # x: [B, T, ...] -> [B, t_max, ...]
    pad = t_max - x.shape[1]
    if pad == 0:
        return x
    shape = (x.shape[0], pad, *x.shape[2:])
    return torch.cat([x, torch.full(shape, fill, dtype=x.dtype, device=x.device)], dim=1)


def last_token_index(mask: Tensor) -> Tensor:
    """Index of the last position with mask 1 per row, -1 for empty rows. mask [B, T] -> [B]."""
    t = mask.shape[1]
    pos = torch.arange(t, device=mask.device).expand_as(mask)
    return torch.where(mask > 0, pos, torch.full_like(pos, -1)).max(dim=1).values


def turn_spans(loss_mask: Tensor) -> Tensor:
    """Turn index of each trainable token from contiguous runs of mask 1; -1 elsewhere.

    loss_mask [B, T] -> [B, T] long. Used when `turn_idx` is absent (MatchTIR's rule).
    """
    m = (loss_mask > 0).long()
    starts = m * (1 - torch.nn.functional.pad(m, (1, 0))[:, :-1])  # 1 at the first token of a run
    run_id = torch.cumsum(starts, dim=1) - 1
    return torch.where(m > 0, run_id, torch.full_like(run_id, -1))


def turn_index(batch: RolloutBatch) -> Tensor:
    """The batch's turn ids on trainable tokens, [B, T] long (-1 elsewhere)."""
    if batch.turn_idx is None:
        return turn_spans(batch.loss_mask)
    tid = batch.turn_idx.long()
    return torch.where(batch.loss_mask > 0, tid, torch.full_like(tid, -1))
