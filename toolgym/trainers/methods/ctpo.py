"""CTPO: cumulative-token importance ratios with a position-adaptive log-space clip (2605.07331).

Evidence [CODE] horizon-llm/CTPO `verl/trainer/ppo/core_algos.py`
(`_compute_policy_loss_cum_token_la_impl`, modes `cum-token-cumprod[-la]`,
`cum-token-geomean[-la]`) and `ctpo.sh`; the √t motivation is [ABS].
"""

from __future__ import annotations

import torch
from torch import Tensor

from toolgym.trainers import losses
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.losses import token_log_ratio

LOG_RATIO_MAX = 10.0  # log ρ̃ clamped ≤ 10 [CODE]


def trainable_positions(mask: Tensor) -> Tensor:
    """t' = Σ_{k≤t} m_k, 1-indexed over model tokens (tool tokens do not advance it). [B, T]."""
    return torch.cumsum(mask, dim=1)


def cumulative_log_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor, mode: str) -> Tensor:
    """log ρ̃_t = sg(L_t) + logπ_θ − sg(logπ_θ), clamped ≤ 10. [B, T] -> [B, T].

    L_t = Σ_{k≤t, m_k=1} Δ_k (cumprod) or that sum / n_t (geomean), Δ = clamp(log r, ±20).
    """
    cum = torch.cumsum(token_log_ratio(logp, old_logp) * mask, dim=1)
    if mode == "geomean":
        cum = cum / trainable_positions(mask).clamp(min=1)
    elif mode != "cumprod":
        raise ValueError(f"unknown CTPO mode {mode!r} (cumprod or geomean)")
    return torch.clamp(cum.detach() + logp - logp.detach(), max=LOG_RATIO_MAX)


def ctpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    mode: str = "cumprod",
    c_low: float = 0.025,
    c_high: float = 0.05,
    c_c: float = 0.05,
    p: float | None = None,
    adaptive: bool = True,
    **_: object,
) -> Tensor:
    """CTPO(-LA) per-token loss. [B, T] -> [B, T].

    Bounds: log ρ̂ = clamp(log ρ̃, −c_low·t'^p, c_high·t'^p); loss = max(−Aρ̃, −A·exp(log ρ̂));
    for A<0, dual clip min(·, −A·exp(c_c·t'^p)). Defaults [CODE ctpo.sh]: c_low 0.025,
    c_high 0.05, c_c 0.05, p = +0.5 (cumprod) / −0.5 (geomean); adaptive=False uses p = 0.
    """
    power = (0.5 if mode == "cumprod" else -0.5) if p is None else p
    scale = trainable_positions(mask).clamp(min=1) ** (power if adaptive else 0.0)
    log_rho = cumulative_log_ratio(logp, old_logp, mask, mode)
    log_rho_hat = torch.clamp(log_rho, -c_low * scale, c_high * scale)
    loss = torch.maximum(-advantages * torch.exp(log_rho), -advantages * torch.exp(log_rho_hat))
    dual = torch.minimum(loss, -advantages * torch.exp(c_c * scale))
    return torch.where(advantages < 0, dual, loss) * mask


losses.REGISTRY.register("ctpo", ctpo_loss)

register_preset(
    MethodPreset(
        name="ctpo",
        advantage=PluginRef("grpo"),
        loss=PluginRef("ctpo", {"mode": "cumprod", "c_low": 0.025, "c_high": 0.05, "c_c": 0.05}),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6, "entropy_coef": 0.0, "rollout_is": "sequence", "rollout_is_threshold": 5.0},
        paper="Rethinking Importance Sampling in LLM Policy Optimization: A Cumulative Token Perspective (CTPO)",
        arxiv="2605.07331",
        evidence="[CODE] loss, position-adaptive clip and defaults; [ABS] √t motivation",
        tier="A",
        notes="Sequence-level rollout-IS correction (threshold 5.0) applies when the batch has "
        "rollout_logprobs (μ) and old_logprobs (π_old).",
    )
)
