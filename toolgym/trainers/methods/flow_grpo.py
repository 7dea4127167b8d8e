"""Flow-GRPO (AgentFlow, 2510.05592): the trajectory outcome broadcast to every planner turn.

Evidence [CODE] lupantech/AgentFlow `agentflow/verl/daemon.py::get_train_data_batch` (each
planner turn becomes its own sample with reward R(τ) and uid = data_id, so verl's GRPO
normalizes over all turn-samples of the group) and `train/config.yaml`; paper objective [PRIOR].
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from toolgym.trainers import advantages
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import (
    MethodPreset,
    PluginRef,
    RegularizerRef,
    RolloutSpec,
    register_preset,
)
from toolgym.trainers.batch import RolloutBatch, turn_index


def turns_per_row(tid: Tensor) -> Tensor:
    """Number of distinct turns with trainable tokens per row. tid [B, T] -> [B] float."""
    k = int(tid.max()) + 1 if tid.numel() and int(tid.max()) >= 0 else 1
    present = torch.nn.functional.one_hot(tid.clamp(min=0), k) * (tid >= 0).unsqueeze(-1)
    return (present.sum(dim=1) > 0).sum(dim=1).to(torch.float32)


def split_turns(batch: RolloutBatch) -> RolloutBatch:
    """One sample per (rollout, turn): the row cut after the turn, loss mask on that turn only.

    A causal model's logprobs up to the turn's end do not depend on later tokens, so each
    sample keeps the row's tensors with attention and loss masks cut; `parent_id` holds the
    source row's `sample_id` (its index when unset). [B, T] -> [Σ_i T_i, T].
    """
    tid = turn_index(batch)
    rows, turns = [], []
    for i in range(batch.batch_size):
        for k in sorted(set(tid[i][tid[i] >= 0].tolist())):
            rows.append(i)
            turns.append(k)
    out = batch.select(rows)
    dev = tid.device
    turn_tid = tid[rows]
    sel = torch.tensor(turns, dtype=torch.long, device=dev).unsqueeze(1)
    on_turn = (turn_tid == sel).to(batch.loss_mask.dtype)
    pos = torch.arange(batch.seq_len, device=dev).expand(len(rows), -1)
    end = torch.where(turn_tid == sel, pos, torch.full_like(pos, -1)).max(dim=1).values
    keep = (pos <= end.unsqueeze(1)).to(batch.attention_mask.dtype)
    source = batch.sample_id if batch.sample_id is not None else torch.arange(batch.batch_size, device=dev)
    return out.replace(
        loss_mask=out.loss_mask * on_turn,
        attention_mask=out.attention_mask * keep,
        parent_id=source[rows],
        sample_id=torch.arange(len(rows), device=dev),
    )


class TurnBroadcastGroupZ(Estimator):
    """GRPO z-score of R(τ) with each rollout counted once per planner turn (turn-samples).

    On `split_turns` output every row has one turn, so this is plain GRPO over turn-samples;
    on whole trajectories it gives the same statistics by weighting rows by their turn count.
    paper_weights=True adds token weights 1/(T_i·|a_i^t|) for the paper's objective
    (use with the seq-mean-token-sum aggregator) [PRIOR].
    """

    def __init__(self, eps: float = 1e-6, paper_weights: bool = False) -> None:
        self.eps, self.paper_weights = eps, paper_weights

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] outcome rewards -> [B, T] advantages (same value on every turn)."""
        tid = turn_index(batch)
        n_turns = turns_per_row(tid)
        adv = grpo_outcome(batch.reward.float(), batch.group_id, eps=self.eps, weights=n_turns)
        out = AdvOut(broadcast(adv, batch.mask))
        if self.paper_weights:
            out.token_weights = paper_token_weights(tid, n_turns)
        return out


def paper_token_weights(tid: Tensor, n_turns: Tensor) -> Tensor:
    """w_{i,j} = 1/(T_i·|a_i^t|) for token j of turn t. [B, T], [B] -> [B, T]."""
    k = int(tid.max()) + 1 if int(tid.max()) >= 0 else 1
    onehot = torch.nn.functional.one_hot(tid.clamp(min=0), k) * (tid >= 0).unsqueeze(-1)
    turn_len = onehot.sum(dim=1).to(torch.float32)  # [B, K]
    length = torch.gather(turn_len, 1, tid.clamp(min=0)).clamp(min=1)
    w = 1.0 / (n_turns.clamp(min=1).unsqueeze(1) * length)
    return torch.where(tid >= 0, w, torch.zeros_like(w))


advantages.REGISTRY.register("flow_grpo", TurnBroadcastGroupZ)

register_preset(
    MethodPreset(
        name="flow_grpo",
        advantage=PluginRef("flow_grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.3}),
        aggregator=PluginRef("token-mean"),
        regularizers=(RegularizerRef("kl_k3", 0.001),),
        rollout=RolloutSpec("per_turn", 8, {"max_turns": 3}),
        hparams={"lr": 1e-6, "temperature": 0.7, "max_response_length": 2048, "train_batch": 32},
        paper="AgentFlow: In-the-Flow Agentic System Optimization (Flow-GRPO)",
        arxiv="2510.05592",
        evidence="[CODE] turn-sample broadcast, config (n 8, clip 0.2/0.3, KL 0.001, temp 0.7, "
        "TOOL_STEPS 3); [PRIOR] paper's 1/T_i weighting (advantage.paper_weights)",
        tier="A",
        notes="Rollouts may stay whole trajectories (turn-weighted statistics) or be split with split_turns(batch).",
    )
)
