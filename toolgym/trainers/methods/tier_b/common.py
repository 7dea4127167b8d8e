"""Plug-ins shared by several Tier B/C methods: an estimator wrapper that exposes turn ids to regularizers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator
from toolgym.trainers.batch import RolloutBatch, turn_index


class WithTurnIds(Estimator):
    """Runs the estimator `inner` and adds `aux["turn_ids"]` ([B, T] long, -1 off the loss mask).

    Regularizers that work per assistant turn (LLDS action gating) read it by name.
    """

    def __init__(self, inner: str = "grpo", inner_cfg: Mapping[str, Any] | None = None) -> None:
        self.inner = ESTIMATORS.get(inner)(**dict(inner_cfg or {}))
        self.requires = frozenset(self.inner.requires)  # type: ignore[misc]
        self.stateful = bool(self.inner.stateful)  # type: ignore[misc]

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """The inner advantages plus turn ids."""
        out = self.inner.compute(batch, state)
        out.aux["turn_ids"] = turn_index(batch)
        return out

    def update_state(
        self, batch: RolloutBatch, state: dict[str, Any], post_update_logprobs: Any = None, logprob_fn: Any = None
    ) -> None:
        """Delegate to the inner estimator."""
        self.inner.update_state(batch, state, post_update_logprobs, logprob_fn)


ESTIMATORS.register("with_turn_ids", WithTurnIds)
