"""Regularisers: pure per-token terms [B, T], each aggregated under its own mask (methods.md §1).

A registered `Regularizer` names the inputs its function needs; `Algorithm.loss` passes them
by keyword from the available tensors: `logp`, `old_logp`, `ref_logp`, `rollout_logp`,
`advantages`, `mask`, `entropy`, `values`, plus the tensors in `AdvOut.aux`
(e.g. AKBE's `teacher_mask`). `mask_key` names the tensor the term is aggregated over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from toolgym.trainers.algorithms.registry import Registry

KL_CLAMP = 10.0  # verl clamps k3 to [−10, 10] [CODE verl kl_penalty]


@dataclass(frozen=True)
class Regularizer:
    """A per-token term `fn(**inputs, **cfg) -> [B, T]` and what it needs."""

    fn: Callable[..., Tensor]
    inputs: tuple[str, ...]
    mask_key: str = "mask"
    description: str = ""


REGISTRY: Registry[Regularizer] = Registry("regularizer", autoload=("toolgym.trainers.methods",))


def kl_k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1 = Δ, Δ = logπ_θ − logπ_ref. [B, T] -> [B, T]."""
    return logp - ref_logp


def kl_k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k2 = ½Δ². [B, T] -> [B, T]."""
    return 0.5 * (logp - ref_logp) ** 2


def kl_k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 ("low_var_kl") = exp(−Δ) + Δ − 1, clamped to [−10, 10]. [B, T] -> [B, T]."""
    delta = logp - ref_logp
    return torch.clamp(torch.exp(-delta) + delta - 1.0, -KL_CLAMP, KL_CLAMP)


def kl_k3_plus(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """verl's "k3+": the k3 value with the k2 gradient (straight-through). [B, T] -> [B, T]."""
    k2 = kl_k2(logp, ref_logp)
    return kl_k3(logp, ref_logp).detach() + k2 - k2.detach()


def kl_term(logp: Tensor, ref_logp: Tensor, mask: Tensor, kind: str = "k3") -> Tensor:
    """The KL estimator `kind` ∈ {k1, k2, k3, k3+} on model tokens. [B, T] -> [B, T]."""
    fns = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3, "k3+": kl_k3_plus}
    if kind not in fns:
        raise ValueError(f"unknown KL estimator {kind!r}; known: {sorted(fns)}")
    return fns[kind](logp, ref_logp) * mask


def entropy_bonus(entropy: Tensor, mask: Tensor) -> Tensor:
    """−H per token: adding coef·this to the loss maximizes entropy. [B, T] -> [B, T]."""
    return -entropy * mask


def _kl(kind: str) -> Callable[..., Tensor]:
    def fn(logp: Tensor, ref_logp: Tensor, mask: Tensor, **_: object) -> Tensor:
        return kl_term(logp, ref_logp, mask, kind)

    fn.__name__ = f"kl_{kind}"
    return fn


for _kind in ("k1", "k2", "k3", "k3+"):
    REGISTRY.register(
        f"kl_{_kind}",
        Regularizer(_kl(_kind), ("logp", "ref_logp", "mask"), description=f"KL {_kind} to ref"),
    )
REGISTRY.register(
    "entropy",
    Regularizer(lambda entropy, mask, **_: entropy_bonus(entropy, mask), ("entropy", "mask")),
)
