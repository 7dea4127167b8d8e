"""Episodes → `RolloutBatch` (methods.md §5.1): right-padded [B, T] tensors plus per-sequence records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from toolgym.trainers.batch import Path, Role, RolloutBatch, SpanType, ToolCallRecord, stable_key
from toolgym.trainers.rollouts.episode import Episode


def _padded(rows: Sequence[Sequence[Any]], width: int, fill: Any, dtype: torch.dtype) -> torch.Tensor:
    out = torch.full((len(rows), width), fill, dtype=dtype)
    for b, row in enumerate(rows):
        out[b, : len(row)] = torch.tensor(list(row), dtype=dtype)
    return out


def _tool_calls(ep: Episode) -> list[ToolCallRecord]:
    return [
        ToolCallRecord(
            turn=int(call["turn"]),
            name=str(call.get("name", "")),
            arguments=call.get("arguments") if isinstance(call.get("arguments"), dict) else {},
            exec_ok=bool(call.get("ok", call.get("error") is None)),
        )
        for call in ep.tool_calls
    ]


def episodes_to_batch(
    episodes: Sequence[Episode], pad_id: int, *, success_key: str = "success", reward_key: str | None = None
) -> RolloutBatch:
    """Stack episodes into one `RolloutBatch`; every [B, T] tensor is aligned with `input_ids`.

    `reward` is the episode's return, or only its `reward_key` component when given (e.g. train on
    "success" without the env's shaping penalties); every component stays in `reward_components`.
    """
    if not episodes:
        raise ValueError("episodes_to_batch needs at least one episode")
    width = max(len(ep.token_ids) for ep in episodes)
    lengths = torch.tensor([len(ep.token_ids) for ep in episodes])
    attention = (torch.arange(width)[None, :] < lengths[:, None]).long()  # (B, T)
    components = sorted({k for ep in episodes for k in ep.reward_components})
    return RolloutBatch(
        input_ids=_padded([ep.token_ids for ep in episodes], width, pad_id, torch.long),
        attention_mask=attention,
        loss_mask=_padded([ep.loss_mask for ep in episodes], width, 0, torch.long),
        reward=torch.tensor([_reward(ep, reward_key) for ep in episodes], dtype=torch.float32),
        group_id=torch.tensor([ep.group_id for ep in episodes], dtype=torch.long),
        prompt_len=torch.tensor([ep.prompt_len for ep in episodes], dtype=torch.long),
        position_ids=(torch.cumsum(attention, dim=1) - 1).clamp(min=0),
        span_type=_padded([ep.span_type for ep in episodes], width, int(SpanType.PAD), torch.int8),
        turn_idx=_padded([ep.turn_idx for ep in episodes], width, -1, torch.int16),
        rollout_logprobs=_padded([ep.logprobs for ep in episodes], width, 0.0, torch.float32),
        policy_version=torch.tensor([ep.policy_version for ep in episodes], dtype=torch.long),
        sample_id=torch.arange(len(episodes), dtype=torch.long),
        prompt_key=torch.tensor([stable_key(ep.prompt_text) for ep in episodes], dtype=torch.long),
        correct=torch.tensor([ep.reward_components.get(success_key, 0.0) > 0 for ep in episodes]),
        truncated=torch.tensor([ep.truncated for ep in episodes]),
        num_tool_calls=torch.tensor([len(ep.tool_calls) for ep in episodes], dtype=torch.long),
        num_turns=torch.tensor([ep.num_turns for ep in episodes], dtype=torch.long),
        parent_id=_parent_rows(episodes),
        role=_roles(episodes),
        branch_point=torch.tensor([ep.branch_point for ep in episodes], dtype=torch.long),
        path=torch.tensor([int(Path.TOOLS_OFF if ep.path == "tools_off" else Path.TOOLS_ON) for ep in episodes]),
        resp_len=lengths - torch.tensor([ep.prompt_len for ep in episodes]),
        reward_components={
            k: torch.tensor([ep.reward_components.get(k, 0.0) for ep in episodes], dtype=torch.float32)
            for k in components
        },
        finish_reason=[ep.finish_reason for ep in episodes],
        tool_calls=[_tool_calls(ep) for ep in episodes],
        answers=[_answer(ep) for ep in episodes],
        response_text=["".join(ep.actions) for ep in episodes],
        gold=_gold(episodes),
        infos=[ep.infos for ep in episodes],
    )


def _parent_rows(episodes: Sequence[Episode]) -> torch.Tensor:
    """Row (= sample_id) of each fork's parent in this batch, -1 for episodes that are not forks. [B]."""
    rows = {ep.seq_id: i for i, ep in enumerate(episodes)}
    return torch.tensor([rows.get(ep.parent_seq_id or "", -1) for ep in episodes], dtype=torch.long)


def _roles(episodes: Sequence[Episode]) -> torch.Tensor | None:
    """Planner / worker role per row when a planner-worker env made the episodes, else None. [B]."""
    if all(ep.role is None for ep in episodes):
        return None
    return torch.tensor([int(Role.WORKER if ep.role == "worker" else Role.PLANNER) for ep in episodes])


def _gold(episodes: Sequence[Episode]) -> list[Any] | None:
    """`{"calls": [...], "answer": ...}` per episode (methods.md §5.1), when every episode knows its task's gold."""
    if any(ep.gold is None for ep in episodes):
        return None
    from types import SimpleNamespace

    from toolgym.trainers.methods.trace_batch import gold_of

    return [gold_of(SimpleNamespace(meta={"gold": ep.gold})) for ep in episodes]  # type: ignore[arg-type]


def _reward(ep: Episode, key: str | None) -> float:
    return ep.reward if key is None else float(ep.reward_components.get(key, 0.0))


def _answer(ep: Episode) -> str | None:
    last = ep.actions[-1] if ep.actions else ""
    start, end = last.find("<answer>"), last.find("</answer>")
    return last[start + len("<answer>") : end] if 0 <= start < end else None
