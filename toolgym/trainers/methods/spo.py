"""SPO: single-stream policy optimization with a KL-adaptive Beta value tracker (2509.13232).

Evidence [CODE] verl-recipe `spo/spo_ray_trainer.py` (`_get_spo_rho`, the tracker, weighted
sampling), `config/spo_trainer.yaml`, `train.sh`. One rollout per prompt, no groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from toolgym.trainers import advantages, samplers
from toolgym.trainers.advantages import AdvOut, Estimator, LogprobFn, broadcast
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch

D_HALF = 0.06  # half-life of the KL-adaptive forgetting [CODE]
RHO_MIN, RHO_MAX = 0.875, 0.96  # ρ clip [CODE spo_trainer.yaml clip_lower, hard-coded 0.96]
EXPLORATION_EPSILON = 0.05  # sampler weight floor [CODE]
ADV_EPS = 1e-8  # (A − mean)/(std + 1e-8), torch.std unbiased [CODE]


@dataclass
class PromptValue:
    """Beta posterior over one prompt's success, and its last response for the KL rule."""

    alpha: float
    beta: float
    response: RolloutBatch | None = None  # one row
    logprobs: Tensor | None = None  # [1, T] updated-policy logprobs when it was stored

    @property
    def p_hat(self) -> float:
        """α/(α+β)."""
        return self.alpha / (self.alpha + self.beta)


def offline_init(scores: Sequence[float], rho_min: float = RHO_MIN) -> PromptValue:
    """α_0, β_0 from N offline binary samples: N_init·(Σs+0.5)/(N+1), N_init·(N−Σs+0.5)/(N+1).

    N_init = 1/(1−ρ_min); with N = 0, α = β = 0.5 [CODE].
    """
    n = len(scores)
    if n == 0:
        return PromptValue(0.5, 0.5)
    s = float(sum(1 for x in scores if x > 0))
    n_init = 1.0 / (1.0 - rho_min)
    return PromptValue(n_init * (s + 0.5) / (n + 1), n_init * (n - s + 0.5) / (n + 1))


def kl_rho(stored: Tensor, current: Tensor, mask: Tensor, rho_min: float = RHO_MIN) -> Tensor:
    """ρ = clip(2^(−D/D_half), ρ_min, 0.96), D = mean_t |logπ_stored − logπ_now|. [N, T] -> [N]."""
    d = ((stored - current).abs() * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    return torch.clamp(torch.pow(2.0, -d / D_HALF), rho_min, RHO_MAX)


def spo_advantages(reward: Tensor, p_hat: Tensor) -> Tensor:
    """A = r − p̂, then global batch normalization (A − mean)/(std + 1e-8). [B] -> [B]."""
    adv = reward - p_hat
    if adv.numel() < 2:
        return adv - adv.mean()
    return (adv - adv.mean()) / (adv.std() + ADV_EPS)


def tracker(state: dict[str, Any]) -> dict[int, PromptValue]:
    """The per-prompt table inside an estimator state."""
    table: dict[int, PromptValue] = state.setdefault("spo", {})
    return table


class SPOTracker(Estimator):
    """Advantage r − p̂(x) from a per-prompt Beta tracker, normalized over the batch.

    `update_state` applies the KL-adaptive forgetting: ρ from the drift of the stored
    response's logprobs (re-scored with `logprob_fn`), then α ← ρα + r, β ← ρβ + (1−r).
    rho_type="constant" uses ρ = rho_value.
    """

    requires = frozenset({"reward", "prompt_key"})
    stateful = True

    def __init__(self, rho_type: str = "kl", rho_value: float = RHO_MIN, rho_min: float = RHO_MIN) -> None:
        if rho_type not in ("kl", "constant"):
            raise ValueError("rho_type must be 'kl' or 'constant'")
        self.rho_type, self.rho_value, self.rho_min = rho_type, rho_value, rho_min

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] binary rewards -> [B, T] advantages (computed before the tracker update)."""
        table = tracker(state)
        p_hat = torch.tensor([_get(table, k).p_hat for k in _keys(batch)], device=batch.reward.device)
        adv = spo_advantages(batch.reward.float(), p_hat)
        return AdvOut(broadcast(adv, batch.mask), aux={"spo_p_hat": p_hat})

    def update_state(
        self,
        batch: RolloutBatch,
        state: dict[str, Any],
        post_update_logprobs: Tensor | None = None,
        logprob_fn: LogprobFn | None = None,
    ) -> None:
        """α, β update with ρ per row; store each row's response and updated logprobs."""
        table, keys = tracker(state), _keys(batch)
        if post_update_logprobs is None and logprob_fn is not None:
            post_update_logprobs = logprob_fn(batch).detach()
        rho = self._rho(batch, table, keys, post_update_logprobs, logprob_fn)
        old = [_get(table, k) for k in keys]
        for i, key in enumerate(keys):
            r = float(batch.reward[i])
            value = PromptValue(float(rho[i]) * old[i].alpha + r, float(rho[i]) * old[i].beta + (1.0 - r))
            if post_update_logprobs is not None:
                value.response = batch.select([i])
                value.logprobs = post_update_logprobs[i : i + 1].detach()
            table[key] = value

    def _rho(
        self,
        batch: RolloutBatch,
        table: dict[int, PromptValue],
        keys: list[int],
        post_update_logprobs: Tensor | None,
        logprob_fn: LogprobFn | None,
    ) -> Tensor:
        if self.rho_type == "constant":
            return torch.full((len(keys),), self.rho_value)
        if logprob_fn is None:
            raise ValueError("SPO's KL-adaptive ρ needs logprob_fn (or rho_type='constant')")
        rho = torch.full((len(keys),), RHO_MAX)  # first sampling: D = 0 -> ρ = clip(1) = 0.96
        for i, key in enumerate(keys):
            prev = table.get(key)
            if prev is None or prev.response is None or prev.logprobs is None:
                continue
            now = logprob_fn(prev.response).detach()
            rho[i] = float(kl_rho(prev.logprobs, now.to(prev.logprobs.device), prev.response.mask, self.rho_min)[0])
        return rho


class PrioritySampler:
    """Draw prompts ∝ sqrt(p̂(1−p̂)) + 0.05; without replacement unless n exceeds the pool."""

    def __init__(self, epsilon: float = EXPLORATION_EPSILON) -> None:
        self.epsilon = epsilon

    def weights(self, prompt_keys: Sequence[int], state: dict[str, Any]) -> np.ndarray:
        """Sampling probabilities of the candidates. [M] -> [M]."""
        table = tracker(state)
        p = np.array([_get(table, int(k)).p_hat for k in prompt_keys], dtype=np.float64)
        w = np.sqrt(p * (1.0 - p)) + self.epsilon
        probs: np.ndarray = w / w.sum()
        return probs

    def sample(
        self,
        prompt_keys: Sequence[int],
        state: dict[str, Any],
        n: int,
        rng: np.random.Generator,
    ) -> list[int]:
        """Indices into prompt_keys."""
        probs = self.weights(prompt_keys, state)
        chosen = rng.choice(len(prompt_keys), size=n, replace=n > len(prompt_keys), p=probs)
        return [int(i) for i in chosen]


def _get(table: dict[int, PromptValue], key: int) -> PromptValue:
    return table.get(key) or PromptValue(0.5, 0.5)


def _keys(batch: RolloutBatch) -> list[int]:
    if batch.prompt_key is None:
        raise ValueError("SPO needs batch.prompt_key (stable_key of the prompt text)")
    return [int(k) for k in batch.prompt_key.tolist()]


advantages.REGISTRY.register("spo", SPOTracker)
samplers.PROMPT_SAMPLERS.register("spo_priority", PrioritySampler)

register_preset(
    MethodPreset(
        name="spo",
        advantage=PluginRef("spo", {"rho_type": "kl"}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.28, "clip_c": 10.0}),
        aggregator=PluginRef("token-mean"),
        prompt_sampler=PluginRef("spo_priority"),
        rollout=RolloutSpec("single_stream", 1, {"gen_batch_factor": 2}),
        hparams={"lr": 1e-6, "offline_N": 8},
        paper="Single-stream Policy Optimization",
        arxiv="2509.13232",
        evidence="[CODE] tracker, ρ rule (D_half 0.06, clip [0.875, 0.96]), sampler, train.sh",
        tier="A",
        notes="Binary reward expected. Offline init: state['spo'][key] = offline_init(scores). "
        "gen_batch_factor (candidate pool / train batch) is an assumption [PRIOR].",
    )
)
