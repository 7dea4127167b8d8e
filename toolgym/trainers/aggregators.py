"""Loss aggregators: reduce a per-token loss matrix [B, T] to a scalar (methods.md §1)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from toolgym.trainers.algorithms.registry import Registry


@dataclass(frozen=True)
class GlobalCounts:
    """Normalizers counted over the whole mini-batch (all micro-batches and ranks).

    With gradient accumulation, pass the mini-batch's counts to every micro-batch: the sum of
    the micro-batch losses then equals the loss of the whole mini-batch.
    """

    num_tokens: float  # Σ_i |o_i|
    num_seqs: float  # B
    max_len: int | None = None  # L_const for seq-mean-token-sum-norm (Dr.GRPO)

    @staticmethod
    def from_mask(mask: Tensor, max_len: int | None = None) -> GlobalCounts:
        """Counts of one local batch. mask [B, T]."""
        return GlobalCounts(float(mask.sum()), float(mask.shape[0]), max_len)


Aggregator = Callable[..., Tensor]  # agg(loss_mat [B, T], mask [B, T], counts, **cfg) -> scalar


REGISTRY: Registry[Aggregator] = Registry("aggregator", autoload=("toolgym.trainers.methods",))


def _counts(mask: Tensor, counts: GlobalCounts | None) -> GlobalCounts:
    return counts if counts is not None else GlobalCounts.from_mask(mask)


def _seq_token_means(loss_mat: Tensor, mask: Tensor) -> Tensor:
    # loss_mat, mask [B, T] -> [B]: (1/|o_i|) Σ_t ℓ_it, 0 for empty rows
    return (loss_mat * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)


def token_mean(loss_mat: Tensor, mask: Tensor, counts: GlobalCounts | None = None, **_: object) -> Tensor:
    """Σ_{i,t} ℓ / Σ_i |o_i| (DAPO, verl default). [B, T] -> []."""
    return (loss_mat * mask).sum() / max(_counts(mask, counts).num_tokens, 1.0)


def seq_mean_token_mean(loss_mat: Tensor, mask: Tensor, counts: GlobalCounts | None = None, **_: object) -> Tensor:
    """(1/B) Σ_i (1/|o_i|) Σ_t ℓ (original GRPO, GSPO). [B, T] -> []."""
    return _seq_token_means(loss_mat, mask).sum() / max(_counts(mask, counts).num_seqs, 1.0)


def seq_mean_token_sum(loss_mat: Tensor, mask: Tensor, counts: GlobalCounts | None = None, **_: object) -> Tensor:
    """(1/B) Σ_i Σ_t ℓ. [B, T] -> []."""
    return (loss_mat * mask).sum() / max(_counts(mask, counts).num_seqs, 1.0)


def seq_mean_token_sum_norm(
    loss_mat: Tensor,
    mask: Tensor,
    counts: GlobalCounts | None = None,
    norm_len: int | None = None,
    **_: object,
) -> Tensor:
    """Σ_{i,t} ℓ / (B · L_const) (Dr.GRPO); L_const = norm_len, counts.max_len, else T."""
    c = _counts(mask, counts)
    length = norm_len or c.max_len or mask.shape[1]
    return (loss_mat * mask).sum() / (max(c.num_seqs, 1.0) * length)


def only_token_mean(loss_mat: Tensor, mask: Tensor, counts: GlobalCounts | None = None, **_: object) -> Tensor:
    """Σ_i (1/|o_i|) Σ_t ℓ, no division by B (DCPO's OTM). [B, T] -> []."""
    return _seq_token_means(loss_mat, mask).sum()


def token_sum(loss_mat: Tensor, mask: Tensor, counts: GlobalCounts | None = None, **_: object) -> Tensor:
    """Σ_{i,t} ℓ (for terms that carry their own normalization). [B, T] -> []."""
    return (loss_mat * mask).sum()


_BUILTIN: dict[str, Aggregator] = {
    "token-mean": token_mean,
    "seq-mean-token-mean": seq_mean_token_mean,
    "seq-mean-token-sum": seq_mean_token_sum,
    "seq-mean-token-sum-norm": seq_mean_token_sum_norm,
    "only-token-mean": only_token_mean,
    "token-sum": token_sum,
}
for _name, _fn in _BUILTIN.items():
    REGISTRY.register(_name, _fn)


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of x over mask 1 (0 if the mask is empty). [B, T] -> []."""
    return (x * mask).sum() / mask.sum().clamp(min=1)


__all__ = [
    "REGISTRY",
    "Aggregator",
    "GlobalCounts",
    "masked_mean",
    "only_token_mean",
    "seq_mean_token_mean",
    "seq_mean_token_sum",
    "seq_mean_token_sum_norm",
    "token_mean",
    "token_sum",
]
