"""CAPO (experimental): mask the tokens a last-layer curvature model predicts to dominate the update.

arXiv 2510.00819; abstract-level only: the estimator and threshold are ASSUMED. For a softmax LM
head with features h, the squared gradient norm of token t's loss w.r.t. the head is
A²·‖h‖²·‖e_y − p‖² ≥ A²·‖h‖²·(1 − p_y)²; that bound is the predicted contribution, and the
`reject_frac` largest are masked (the abstract reports < 8% of tokens rejected).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch

CAPO_REJECT = 0.08  # share of model tokens masked (ASSUMED from "<8% tokens rejected")


def predicted_contribution(adv: Tensor, old_logp: Tensor, mask: Tensor, feat_sq: Tensor) -> Tensor:
    """A²·‖h‖²·(1 − p)² per model token. [B, T], [B] -> [B, T]."""
    return adv**2 * feat_sq.unsqueeze(1) * (1.0 - torch.exp(old_logp)) ** 2 * mask


def curvature_mask(score: Tensor, mask: Tensor, reject_frac: float = CAPO_REJECT) -> Tensor:
    """1 except on the top `reject_frac` share of model tokens by score (floor of the count). [B, T]."""
    n = int(mask.sum())
    k = int(n * reject_frac)
    keep = mask.clone()
    if k == 0:
        return keep
    flat = torch.where(mask > 0, score, torch.full_like(score, -1.0)).flatten()
    keep.view(-1)[torch.topk(flat, k).indices] = 0.0
    return keep


class CAPO(Estimator):
    """Inner estimator (GroupZ) whose token_weights drop the predicted-unstable tokens."""

    def __init__(
        self, inner: str = "grpo", inner_cfg: Mapping[str, Any] | None = None, reject_frac: float = CAPO_REJECT
    ) -> None:
        self.inner = ESTIMATORS.get(inner)(**dict(inner_cfg or {}))
        self.stateful = bool(self.inner.stateful)  # type: ignore[misc]
        self.requires = frozenset(self.inner.requires)  # type: ignore[misc]
        self.reject_frac = reject_frac

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """Inner advantages + curvature mask as token_weights [B, T]."""
        out = self.inner.compute(batch, state)
        old = batch.old_logprobs if batch.old_logprobs is not None else batch.rollout_logprobs
        if old is None:
            raise ValueError("CAPO needs batch.old_logprobs or batch.rollout_logprobs")
        feat = (
            (batch.hidden_pool.float() ** 2).sum(dim=1)
            if batch.hidden_pool is not None
            else torch.ones(batch.batch_size)
        )
        keep = curvature_mask(
            predicted_contribution(out.advantages, old, batch.mask, feat), batch.mask, self.reject_frac
        )
        out.token_weights = keep if out.token_weights is None else out.token_weights * keep
        return out

    def update_state(
        self, batch: RolloutBatch, state: dict[str, Any], post_update_logprobs: Any = None, logprob_fn: Any = None
    ) -> None:
        """Delegate to the inner estimator."""
        self.inner.update_state(batch, state, post_update_logprobs, logprob_fn)


ESTIMATORS.register("capo", CAPO)

register_preset(
    MethodPreset(
        name="capo",
        advantage=PluginRef("capo", {"reject_frac": CAPO_REJECT}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.2}),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="Stabilizing Policy Gradients for Sample-Efficient RL in LLM Reasoning (CAPO)",
        arxiv="2510.00819",
        evidence="[ABS]+[SEC] last-layer curvature model masks unstable tokens; ASSUMED score A²‖h‖²(1−p)² "
        "(pooled h per sequence), reject the top 8%",
        tier="C",
        experimental=True,
    )
)
