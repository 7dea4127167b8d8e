"""POISE (experimental): a ridge probe on hidden states predicts reward; its value on a paired rollout is the baseline.

arXiv 2605.07579 (the "internal state value estimation" POISE); abstract-level only: features,
probe and pairing are ASSUMED. The baseline of rollout i is the probe applied to another rollout of
the same prompt, so it does not depend on o_i (the cross-rollout construction).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers.advantages import REGISTRY as ESTIMATORS
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch

POISE_RIDGE = 1e-2  # ridge penalty of the probe (ASSUMED)
POISE_BUFFER = 512  # most recent (feature, reward) pairs the probe is fit on (ASSUMED)
STATE_KEY = "poise_probe"


def probe_features(batch: RolloutBatch) -> Tensor:
    """[hidden_pool, mean entropy or −mean old logp, 1] per row. -> [B, H+2]."""
    if batch.hidden_pool is None:
        raise ValueError("POISE needs batch.hidden_pool (pooled hidden states from the forward pass)")
    m = batch.mask
    tok = (
        batch.entropy
        if batch.entropy is not None
        else -(batch.old_logprobs if batch.old_logprobs is not None else torch.zeros_like(m))
    )
    stat = (tok.float() * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)
    return torch.cat([batch.hidden_pool.float(), stat.unsqueeze(1), torch.ones(batch.batch_size, 1)], dim=1)


def fit_ridge(x: Tensor, y: Tensor, ridge: float = POISE_RIDGE) -> Tensor:
    """w = (XᵀX + λI)⁻¹Xᵀy. [N, F], [N] -> [F]."""
    eye = torch.eye(x.shape[1], dtype=x.dtype)
    return torch.linalg.solve(x.T @ x + ridge * eye, x.T @ y)


def paired_rows(group_id: Tensor) -> Tensor:
    """For each row, another row of the same group (the next one, cyclically); itself if alone. [B] -> [B]."""
    partner = torch.arange(group_id.shape[0])
    for g in torch.unique(group_id):
        rows = torch.nonzero(group_id == g).flatten()
        partner[rows] = torch.roll(rows, -1)
    return partner


class POISE(Estimator):
    """A_i = R_i − probe(h_j), j a paired rollout of the same prompt; the probe refits after each step."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id", "hidden_pool"})
    stateful: ClassVar[bool] = True

    def __init__(self, ridge: float = POISE_RIDGE, buffer: int = POISE_BUFFER) -> None:
        self.ridge, self.buffer = ridge, buffer

    def baseline(self, feats: Tensor, group_id: Tensor, state: dict[str, Any]) -> Tensor:
        """V̂_i from the partner's features; 0 before the first fit; a lone row gets the mean target. [B]."""
        probe = state.get(STATE_KEY)
        if probe is None:
            return torch.zeros(feats.shape[0])
        partner = paired_rows(group_id)
        value = feats[partner] @ probe["w"]
        alone = partner == torch.arange(feats.shape[0])
        return torch.where(alone, torch.full_like(value, float(probe["mean"])), value)

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] -> [B, T]."""
        v = self.baseline(probe_features(batch), batch.group_id, state)
        return AdvOut(broadcast(batch.reward.float() - v, batch.mask), aux={"poise_value": v})

    def update_state(
        self, batch: RolloutBatch, state: dict[str, Any], post_update_logprobs: Any = None, logprob_fn: Any = None
    ) -> None:
        """Append this batch to the buffer and refit the ridge probe."""
        x_new, y_new = probe_features(batch), batch.reward.float()
        buf = state.get(STATE_KEY, {"x": x_new[:0], "y": y_new[:0]})
        x = torch.cat([buf["x"], x_new])[-self.buffer :]
        y = torch.cat([buf["y"], y_new])[-self.buffer :]
        state[STATE_KEY] = {"x": x, "y": y, "w": fit_ridge(x, y, self.ridge), "mean": float(y.mean())}


ESTIMATORS.register("poise", POISE)

register_preset(
    MethodPreset(
        name="poise",
        advantage=PluginRef("poise", {"ridge": POISE_RIDGE, "buffer": POISE_BUFFER}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.28}),
        aggregator=PluginRef("token-mean"),
        rollout=RolloutSpec("group", 2, {"hidden_pool": True}),
        hparams={"lr": 1e-6},
        paper="POISE: Policy Optimization with Internal State Value Estimation",
        arxiv="2605.07579",
        evidence="[ABS] hidden-state probe baseline with cross-rollout pairing; ASSUMED ridge probe on "
        "[pooled h, mean entropy, 1], λ=1e-2, buffer 512, pairs of 2 rollouts per prompt",
        tier="C",
        experimental=True,
    )
)
