"""DCPO: dynamic-adaptive clipping, smooth advantage standardization, OTM loss (2509.02333).

Evidence [CODE] lime-RL/DCPO `verl/trainer/ppo/core_algos.py` (`get_clip_low_high`,
`compute_policy_loss_dcpo`, `compute_dcpo_outcome_advantage`, `get_mean_std`, `agg_loss` OTM)
and `recipe/dcpo/run_dcpo.sh` / `run_base.sh`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from toolgym.trainers import advantages, losses
from toolgym.trainers.advantages import AdvOut, Estimator, LogprobFn, broadcast, group_stats
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.losses import clipped_surrogate


def dynamic_clip_bounds(old_logp: Tensor, eps_low: float, eps_high: float, clip_c: float) -> tuple[Tensor, Tensor]:
    """Ratio bounds from the token prior q = π_old(o_t). [B, T] -> ([B, T], [B, T]).

    low = ½(1 + sqrt(max(0, 1 − 4ε_low/q))), high = min(½(1 + sqrt(1 + 4ε_high/q)), max(c, 10))
    [CODE get_clip_low_high].
    """
    q = torch.exp(old_logp)
    low = 0.5 * (1.0 + torch.sqrt(torch.clamp(1.0 - 4.0 * eps_low / q, min=0.0)))
    high = 0.5 * (1.0 + torch.sqrt(1.0 + 4.0 * eps_high / q))
    return low, torch.clamp(high, max=max(clip_c, 10.0))


def dcpo_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    clip_c: float = 10.0,
    **_: object,
) -> Tensor:
    """max(−Ar, −A·clamp(r, low, high)) with dynamic bounds, dual clip −cA for A<0. [B, T].

    The DCPO code does not clamp the log-ratio here; neither do we. Defaults: ε_high 0.28,
    c 10 [CODE run_dcpo.sh]; ε_low 0.2 [CODE run_base.sh].
    """
    low, high = dynamic_clip_bounds(old_logp, clip_low, clip_high, clip_c)
    ratio = torch.exp(logp - old_logp)
    return clipped_surrogate(ratio, advantages, low, high, clip_c) * mask


def pooled_stats(old_mean: float, old_std: float, times: int, new_mean: float, new_std: float) -> tuple[float, float]:
    """DCPO's running (mean, std) after `times` steps, each step's group weighted once.

    times = previous count + 1; with no history the step's own statistics [CODE get_mean_std].
    """
    old_times = times - 1
    if old_times == 0:
        return new_mean, new_std
    mean = (old_mean * old_times + new_mean) / times
    var = old_times * old_std**2 + new_std**2 + old_times / times * (new_mean - old_mean) ** 2
    return mean, math.sqrt(var / times)


def smooth_advantage(reward: float, new: tuple[float, float], cum: tuple[float, float], count: int) -> float:
    """SA = the smaller-|·| of (1/i)A_tot + (1−1/i)A_new and (1/i)A_new + (1−1/i)A_tot.

    A_new = (R − μ_step)/σ_step, A_tot = (R − μ_cum)/σ_cum (0 when σ = 0), i = count + 1.
    """
    a_new = (reward - new[0]) / new[1] if new[1] > 0 else 0.0
    a_tot = (reward - cum[0]) / cum[1] if cum[1] > 0 else 0.0
    w = 1.0 / (count + 1)
    sa1 = w * a_tot + (1 - w) * a_new
    sa2 = w * a_new + (1 - w) * a_tot
    return sa1 if abs(sa1) < abs(sa2) else sa2


class SmoothAdvStd(Estimator):
    """DCPO's smooth advantage standardization with per-prompt running reward statistics.

    State: state["dcpo"][prompt_key] = (count, mean, std). `compute` reads it; the statistics
    of this step are committed by `update_state` (call it once per rollout step).
    """

    requires = frozenset({"reward", "group_id"})
    stateful = True

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] rewards + history -> [B, T] advantages; aux["dcpo_updates"] = new stats."""
        keys = _keys(batch)
        reward = batch.reward.float()
        mean, std, count = group_stats(reward, batch.group_id)
        history = state.setdefault("dcpo", {})
        adv = torch.zeros_like(reward)
        updates: dict[int, tuple[int, float, float]] = {}
        for i, key in enumerate(keys):
            if count[i] < 2:
                continue
            times, old_mean, old_std = history.get(key, (0, 0.0, 0.0))
            new = (float(mean[i]), float(std[i]))
            cum = pooled_stats(old_mean, old_std, times + 1, *new)
            adv[i] = smooth_advantage(float(reward[i]), new, cum, times)
            updates[key] = (times + 1, *cum)
        return AdvOut(broadcast(adv, batch.mask), aux={"dcpo_updates": updates})

    def update_state(
        self,
        batch: RolloutBatch,
        state: dict[str, Any],
        post_update_logprobs: Tensor | None = None,
        logprob_fn: LogprobFn | None = None,
    ) -> None:
        """Commit this step's pooled statistics per prompt."""
        updates = self.compute(batch, state).aux["dcpo_updates"]
        state.setdefault("dcpo", {}).update(updates)


def _keys(batch: RolloutBatch) -> list[int]:
    source = batch.prompt_key if batch.prompt_key is not None else batch.group_id
    return [int(k) for k in source.tolist()]


losses.REGISTRY.register("dcpo", dcpo_loss)
advantages.REGISTRY.register("dcpo_sas", SmoothAdvStd)

register_preset(
    MethodPreset(
        name="dcpo",
        advantage=PluginRef("dcpo_sas"),
        loss=PluginRef("dcpo", {"clip_low": 0.2, "clip_high": 0.28, "clip_c": 10.0}),
        aggregator=PluginRef("only-token-mean"),
        rollout=RolloutSpec("group", 8),
        hparams={"lr": 1e-6},
        paper="DCPO: Dynamic Clipping Policy Optimization",
        arxiv="2509.02333",
        evidence="[CODE] dynamic clip, SAS, OTM, run_dcpo.sh defaults; ε_low 0.2 from run_base.sh",
        tier="A",
        notes="Needs prompt_key for the running statistics (falls back to group_id).",
    )
)
