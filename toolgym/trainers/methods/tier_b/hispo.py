"""HisPO: staleness-aware gradient masking for asynchronous rollouts (toolgym's reading; no public formula).

Every constant here is ASSUMED: the mechanism named in the issue is "staleness-aware gradient
masking". A sequence is dropped when it is more than `max_staleness` policy versions old, and a
token is masked when its behaviour logprob (μ, at rollout time) and the proximal logprob (π_old,
recomputed by the learner) disagree by more than a threshold that tightens with staleness s:
|log π_old − log μ| > δ / (1 + κ·s).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch

HISPO_MAX_STALENESS = 4  # SkyRL / TRL async default max staleness [DOCS trainers.md]
HISPO_DELTA = 0.5  # δ, log-ratio tolerance at staleness 0 (ASSUMED)
HISPO_KAPPA = 0.5  # κ, how fast the tolerance tightens per version (ASSUMED)


def staleness(policy_version: Tensor, current_version: int) -> Tensor:
    """s_i = current − version of the policy that sampled row i (≥ 0). [B] -> [B] float."""
    return (current_version - policy_version.to(torch.float32)).clamp(min=0.0)


def staleness_mask(
    old_logp: Tensor,
    rollout_logp: Tensor,
    mask: Tensor,
    stale: Tensor,
    max_staleness: int = HISPO_MAX_STALENESS,
    delta: float = HISPO_DELTA,
    kappa: float = HISPO_KAPPA,
) -> Tensor:
    """1 where a token may carry gradient. [B, T], [B] -> [B, T].

    Rows older than `max_staleness` are masked whole; tokens whose |log π_old − log μ| exceeds
    δ/(1 + κ·s) are masked.
    """
    tol = (delta / (1.0 + kappa * stale)).unsqueeze(1)  # [B, 1]
    drift = (old_logp - rollout_logp).abs()
    fresh = (stale <= max_staleness).to(mask.dtype).unsqueeze(1)
    return (drift <= tol).to(mask.dtype) * fresh * mask


class HisPO(Estimator):
    """Wraps an estimator (GRPO by default) and returns the staleness mask as `token_weights`.

    The current policy version is `batch.meta["policy_version"]` (set by the learner) or, failing
    that, the newest version in the batch.
    """

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id", "policy_version", "rollout_logprobs"})

    def __init__(
        self,
        inner: str = "grpo",
        inner_cfg: Mapping[str, Any] | None = None,
        max_staleness: int = HISPO_MAX_STALENESS,
        delta: float = HISPO_DELTA,
        kappa: float = HISPO_KAPPA,
    ) -> None:
        self.inner = ESTIMATORS.get(inner)(**dict(inner_cfg or {}))
        self.stateful = bool(self.inner.stateful)  # type: ignore[misc]
        self.max_staleness, self.delta, self.kappa = max_staleness, delta, kappa

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """Inner advantages; token_weights = staleness mask [B, T]."""
        if batch.policy_version is None or batch.rollout_logprobs is None:
            raise ValueError("HisPO needs batch.policy_version and batch.rollout_logprobs")
        out = self.inner.compute(batch, state)
        current = int(batch.meta.get("policy_version", int(batch.policy_version.max())))
        stale = staleness(batch.policy_version, current)
        old = batch.old_logprobs if batch.old_logprobs is not None else batch.rollout_logprobs
        keep = staleness_mask(
            old, batch.rollout_logprobs, batch.mask, stale, self.max_staleness, self.delta, self.kappa
        )
        weights = keep if out.token_weights is None else out.token_weights * keep
        out.token_weights = weights
        out.aux["hispo_kept_fraction"] = float(keep.sum() / batch.mask.sum().clamp(min=1))
        return out

    def update_state(
        self, batch: RolloutBatch, state: dict[str, Any], post_update_logprobs: Any = None, logprob_fn: Any = None
    ) -> None:
        """Delegate to the inner estimator."""
        self.inner.update_state(batch, state, post_update_logprobs, logprob_fn)


ESTIMATORS.register("hispo", HisPO)

register_preset(
    MethodPreset(
        name="hispo",
        advantage=PluginRef(
            "hispo", {"max_staleness": HISPO_MAX_STALENESS, "delta": HISPO_DELTA, "kappa": HISPO_KAPPA}
        ),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.28}),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec("group", 8, {"async": True, "max_staleness": HISPO_MAX_STALENESS}),
        hparams={"lr": 1e-6},
        paper="HisPO (staleness-aware gradient masking for asynchronous rollouts)",
        arxiv="",
        evidence="no paper text retrieved: ASSUMED every formula and constant (max staleness 4 from SkyRL/TRL "
        "[DOCS], δ=0.5, κ=0.5, clip 0.2/0.28)",
        tier="B",
    )
)
