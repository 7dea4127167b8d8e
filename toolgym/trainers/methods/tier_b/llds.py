"""LLDS: a hinge on likelihood drops of non-negative-advantage responses against GRPO collapse (arXiv 2512.04220)."""

from __future__ import annotations

import torch
from torch import Tensor

from toolgym.trainers.algorithms.preset import (
    MethodPreset,
    PluginRef,
    RegularizerRef,
    RolloutSpec,
    register_preset,
)
from toolgym.trainers.regularizers import REGISTRY as REGULARIZERS
from toolgym.trainers.regularizers import Regularizer

LLDS_LAMBDA = 0.1  # λ: 0.1 "paper default" in one 3P re-implementation, 0.05 in the other [CODE-3P]


def likelihood_drop(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """max(0, logπ_old − logπ_θ) per model token. [B, T] -> [B, T]."""
    return torch.clamp(old_logp - logp, min=0.0) * mask


def trajectory_gate(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor) -> Tensor:
    """1 for responses with A ≥ 0 whose total log-likelihood fell, per row. [B, T] -> [B] float."""
    has_tokens = mask.sum(dim=1) > 0
    non_negative = (advantages * mask).sum(dim=1) >= 0
    fell = ((old_logp - logp.detach()) * mask).sum(dim=1) > 0
    return (has_tokens & non_negative & fell).to(mask.dtype)


def action_gate(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, turn_ids: Tensor) -> Tensor:
    """v2 gating per assistant turn: 1 on the tokens of turns (A ≥ 0) whose summed likelihood fell. -> [B, T]."""
    gate = torch.zeros_like(mask)
    drop = (old_logp - logp.detach()) * mask
    non_negative = ((advantages * mask).sum(dim=1) >= 0).unsqueeze(1)  # [B, 1]
    for k in torch.unique(turn_ids[turn_ids >= 0]).tolist():
        in_turn = (turn_ids == k).to(mask.dtype) * mask
        fell = ((drop * in_turn).sum(dim=1, keepdim=True) > 0) & non_negative
        gate = gate + in_turn * fell.to(mask.dtype)
    return gate


def llds_term(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    turn_ids: Tensor | None = None,
    gate: str = "trajectory",
    **_: object,
) -> Tensor:
    """Per-token LLDS penalty, already divided by the number of gated responses (aggregate with token-sum).

    L = Σ_i 1[gate_i] Σ_t max(0, logπ_old − logπ_θ) / #gated — normalization of re-implementation (b).
    gate "action" evaluates the gate per assistant turn (v2; needs `turn_ids`). [B, T] -> [B, T].
    """
    if gate == "action":
        if turn_ids is None:
            raise ValueError("LLDS action gating needs turn_ids (use the 'with_turn_ids' estimator)")
        token_gate = action_gate(logp, old_logp, advantages, mask, turn_ids)
        n_gated = (token_gate.sum(dim=1) > 0).sum().clamp(min=1)
    else:
        row_gate = trajectory_gate(logp, old_logp, advantages, mask)
        token_gate = row_gate.unsqueeze(1) * mask
        n_gated = row_gate.sum().clamp(min=1)
    return likelihood_drop(logp, old_logp, mask) * token_gate / n_gated


def _llds_fn(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, **cfg: object) -> Tensor:
    return llds_term(logp, old_logp, advantages, mask, **cfg)  # type: ignore[arg-type]


def _llds_action_fn(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, turn_ids: Tensor, **cfg: object
) -> Tensor:
    return llds_term(logp, old_logp, advantages, mask, turn_ids=turn_ids, gate="action")


REGULARIZERS.register(
    "llds",
    Regularizer(_llds_fn, ("logp", "old_logp", "advantages", "mask"), description="LLDS hinge, trajectory gate"),
)
REGULARIZERS.register(
    "llds_action",
    Regularizer(
        _llds_action_fn,
        ("logp", "old_logp", "advantages", "mask", "turn_ids"),
        description="LLDS hinge, per-turn (action) gate",
    ),
)

_LLDS: dict[str, object] = {
    "paper": "On GRPO Collapse in Agent Search: The Lazy Likelihood-Displacement (LLDS)",
    "arxiv": "2512.04220",
    "tier": "B",
}

register_preset(
    MethodPreset(
        name="llds",
        advantage=PluginRef("grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        regularizers=(RegularizerRef("llds", LLDS_LAMBDA, aggregator="token-sum"),),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        evidence="[ABS] gating idea; [CODE-3P] hinge (two re-implementations); "
        "ASSUMED λ=0.1, normalization by #gated responses (3P b), GRPO base without KL",
        **_LLDS,  # type: ignore[arg-type]
    )
)

register_preset(
    MethodPreset(
        name="llds_action",
        advantage=PluginRef("with_turn_ids", {"inner": "grpo"}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        regularizers=(RegularizerRef("llds_action", LLDS_LAMBDA, aggregator="token-sum"),),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        evidence="[ABS] v2 action-level gating; ASSUMED gate per assistant turn, λ=0.1, #gated-turn-rows normalizer",
        **_LLDS,  # type: ignore[arg-type]
    )
)
