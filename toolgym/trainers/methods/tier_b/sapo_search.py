"""SAPO (search agents): conditional token-level KL(π_old‖π_θ) on positive, pushed-down tokens (arXiv 2603.10069).

Not Qwen's Soft Adaptive PO, which shares the acronym.
"""

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
from toolgym.trainers.losses import token_log_ratio
from toolgym.trainers.regularizers import REGISTRY as REGULARIZERS
from toolgym.trainers.regularizers import Regularizer

SAPO_BETA = 0.1  # β: not retrieved (ASSUMED)
SAPO_DELTA = 0.2  # condition r < 1 − δ, δ = PPO's lower clip ε: not retrieved (ASSUMED)


def shifted_positive_tokens(logp: Tensor, old_logp: Tensor, advantages: Tensor, delta: float) -> Tensor:
    """1[A > 0 ∧ r < 1 − δ]: positive tokens the policy pushed down too far (ISDD). [B, T] -> [B, T]."""
    ratio = torch.exp(token_log_ratio(logp.detach(), old_logp))
    return ((advantages > 0) & (ratio < 1.0 - delta)).to(logp.dtype)


def kl_old_to_new(logp: Tensor, old_logp: Tensor) -> Tensor:
    """k3 estimate of KL(π_old‖π_θ) from tokens sampled by π_old: (r − 1) − log r ≥ 0. [B, T] -> [B, T]."""
    log_r = token_log_ratio(logp, old_logp)
    return torch.exp(log_r) - 1.0 - log_r


def conditional_kl(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, mask: Tensor, delta: float = SAPO_DELTA, **_: object
) -> Tensor:
    """The one-line change: KL(π_old‖π_θ) only where A > 0 and r < 1 − δ. [B, T] -> [B, T]."""
    return kl_old_to_new(logp, old_logp) * shifted_positive_tokens(logp, old_logp, advantages, delta) * mask


REGULARIZERS.register(
    "sapo_cond_kl",
    Regularizer(
        conditional_kl, ("logp", "old_logp", "advantages", "mask"), description="KL(old‖θ) on A>0, r<1−δ tokens"
    ),
)

register_preset(
    MethodPreset(
        name="sapo_search",
        advantage=PluginRef("grpo"),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        regularizers=(RegularizerRef("sapo_cond_kl", SAPO_BETA, {"delta": SAPO_DELTA}),),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="Improving Search Agent with One Line of Code (SAPO)",
        arxiv="2603.10069",
        evidence="[ABS]+[SEC] conditional KL on A>0 low-ratio tokens; ASSUMED k3 estimator of KL(π_old‖π_θ), "
        "β=0.1, δ=0.2, token-mean over all model tokens",
        tier="B",
    )
)
