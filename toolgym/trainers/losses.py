"""Policy losses: pure functions returning the per-token loss matrix [B, T] (methods.md §1-2).

Every loss has the signature `loss(logp, old_logp, advantages, mask, **cfg) -> Tensor [B, T]`:
logp is π_θ (with grad), old_logp is π_old, advantages are token-level, mask is the loss mask.
The result is zero where mask is 0 and is NOT aggregated (see `aggregators`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from toolgym.trainers.algorithms.registry import Registry

LOG_RATIO_CLAMP = 20.0  # verl clamps the token log-ratio to ±20 [CODE verl core_algos]


PolicyLoss = Callable[..., Tensor]  # loss(logp, old_logp, advantages, mask, **cfg) -> [B, T]


REGISTRY: Registry[PolicyLoss] = Registry("policy loss", autoload=("toolgym.trainers.methods",))


def token_log_ratio(logp: Tensor, old_logp: Tensor) -> Tensor:
    """log r = clamp(logπ_θ − logπ_old, ±20). [B, T] -> [B, T]."""
    return torch.clamp(logp - old_logp, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def clipped_surrogate(
    ratio: Tensor,
    advantages: Tensor,
    low: Tensor | float,
    high: Tensor | float,
    clip_c: float | None,
) -> Tensor:
    """−min(rA, clip(r, low, high)A), then dual-clip min(·, −cA) where A<0. [B, T] -> [B, T]."""
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, low, high)  # type: ignore[arg-type]
    loss = torch.maximum(unclipped, clipped)
    if clip_c is not None:
        dual = torch.minimum(loss, -advantages * clip_c)
        loss = torch.where(advantages < 0, dual, loss)
    return loss


def ppo_clip(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    clip_c: float | None = 3.0,
    **_: object,
) -> Tensor:
    """PPO-clip with asymmetric bounds (DAPO clip-higher) and dual clip. [B, T] -> [B, T].

    Defaults are verl's actor.yaml (0.2/0.2, clip_ratio_c 3.0) [CODE]; clip_c=None disables it.
    """
    ratio = torch.exp(token_log_ratio(logp, old_logp))
    loss = clipped_surrogate(ratio, advantages, 1.0 - clip_low, 1.0 + clip_high, clip_c)
    return loss * mask


def gspo(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 3e-4,
    clip_high: float = 4e-4,
    **_: object,
) -> Tensor:
    """GSPO-token: s_it = sg[s_i]·π_θ/sg[π_θ], s_i the length-normalized sequence ratio.

    log s_i = mean over model tokens of log r (mask, so tool tokens do not dilute it), clamped
    ≤ 10 as in verl [CODE verl compute_policy_loss_gspo]; ε 3e-4/4e-4 [DOCS]. [B, T] -> [B, T].
    """
    log_r = (logp - old_logp) * mask
    log_s = log_r.sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp(min=1)  # [B, 1]
    log_s_tok = torch.clamp(log_s.detach() + logp - logp.detach(), max=10.0)
    ratio = torch.exp(log_s_tok)
    loss = clipped_surrogate(ratio, advantages, 1.0 - clip_low, 1.0 + clip_high, None)
    return loss * mask


def cispo(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float | None = None,
    clip_high: float = 5.0,
    **_: object,
) -> Tensor:
    """CISPO: −sg(clip(r, 1−ε_low, 1+ε_high))·A·logπ_θ. [B, T] -> [B, T].

    TRL clips above only, ε_high 5.0 per ScaleRL [DOCS]; set clip_low for verl's two-sided clip.
    """
    ratio = torch.exp(token_log_ratio(logp, old_logp)).detach()
    low = 0.0 if clip_low is None else 1.0 - clip_low
    weight = torch.clamp(ratio, low, 1.0 + clip_high)
    return -weight * advantages * logp * mask


def vanilla_pg(logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, **_: object) -> Tensor:
    """REINFORCE with importance ratio, no clipping: −r·A. [B, T] -> [B, T]."""
    return -torch.exp(token_log_ratio(logp, old_logp)) * advantages * mask


def value_loss_clipped(
    values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor, clip_value: float = 0.5
) -> Tensor:
    """PPO critic loss ½·max((V−R)², (clip(V, V_old±ε_v)−R)²) per token. [B, T] -> [B, T].

    Form [CODE verl compute_value_loss]; ε_v = 0.5 is verl's cliprange_value default [PRIOR].
    """
    v_clipped = old_values + torch.clamp(values - old_values, -clip_value, clip_value)
    loss = 0.5 * torch.maximum((values - returns) ** 2, (v_clipped - returns) ** 2)
    return loss * mask


def rollout_is_weights(
    old_logp: Tensor, rollout_logp: Tensor, mask: Tensor, level: str = "sequence", threshold: float = 2.0
) -> Tensor:
    """Truncated importance weights min(π_old/μ, C) for the rollout-policy mismatch, detached.

    level "token": per token; "sequence": exp(Σ_t m·(logπ_old − logμ)) on every token of the
    row (verl rollout correction, TIS) [CODE verl rollout_corr_helper]. [B, T] -> [B, T].
    """
    log_r = token_log_ratio(old_logp, rollout_logp) * mask
    if level == "sequence":
        log_r = torch.clamp(log_r.sum(dim=1, keepdim=True), -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP).expand_as(mask)
    elif level != "token":
        raise ValueError(f"rollout IS level must be 'token' or 'sequence', not {level!r}")
    return torch.clamp(torch.exp(log_r), max=threshold).detach() * mask


def clip_fraction(logp: Tensor, old_logp: Tensor, mask: Tensor, low: float, high: float) -> Tensor:
    """Share of model tokens whose ratio left [1−low, 1+high]. [B, T] -> []."""
    ratio = torch.exp(token_log_ratio(logp.detach(), old_logp))
    out = ((ratio < 1.0 - low) | (ratio > 1.0 + high)).to(mask.dtype) * mask
    return out.sum() / mask.sum().clamp(min=1)


_BUILTIN: dict[str, PolicyLoss] = {
    "ppo_clip": ppo_clip,
    "gspo": gspo,
    "cispo": cispo,
    "vanilla_pg": vanilla_pg,
}
for _name, _fn in _BUILTIN.items():
    REGISTRY.register(_name, _fn)
