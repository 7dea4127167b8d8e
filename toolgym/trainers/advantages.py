"""Advantage estimators: pure functions plus the registered, possibly stateful, estimators.

Advantages are always token-level [B, T] and zero where the loss mask is 0; sequence-level
estimators broadcast (methods.md §5.2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import torch
from torch import Tensor

from toolgym.trainers.algorithms.registry import Registry
from toolgym.trainers.batch import RolloutBatch, last_token_index, row_index

GROUP_STD_EPS = 1e-6  # verl: (R − mean)/(std + 1e-6), torch.std unbiased [CODE]
WHITEN_EPS = 1e-8  # verl masked_whiten: rsqrt(var + 1e-8) [CODE]


@dataclass
class AdvOut:
    """What an estimator returns."""

    advantages: Tensor  # [B, T], zero on loss_mask == 0
    returns: Tensor | None = None  # [B, T] critic targets
    token_weights: Tensor | None = None  # [B, T] multiplicative loss weights
    policy_mask: Tensor | None = None  # [B, T] mask of the policy term, if not the loss mask
    aux: dict[str, Any] = field(default_factory=dict)  # extra tensors (e.g. teacher_mask), logs

    def select(self, rows: Tensor | Sequence[int]) -> AdvOut:
        """The rows `rows` of every [B, …] tensor (for micro-batches); other aux values as is."""
        idx = row_index(rows)

        def pick(x: Any) -> Any:
            return x[idx] if isinstance(x, Tensor) else x

        return AdvOut(
            pick(self.advantages),
            pick(self.returns),
            pick(self.token_weights),
            pick(self.policy_mask),
            {k: pick(v) for k, v in self.aux.items()},
        )


LogprobFn = Callable[[RolloutBatch], Tensor]  # batch -> current-policy logprobs [B, T]


class AdvantageEstimator(Protocol):
    """compute(batch, state) -> AdvOut; update_state after the actor update (stateful ones)."""

    requires: ClassVar[frozenset[str]]
    stateful: ClassVar[bool]

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut: ...

    def update_state(
        self,
        batch: RolloutBatch,
        state: dict[str, Any],
        post_update_logprobs: Tensor | None = None,
        logprob_fn: LogprobFn | None = None,
    ) -> None: ...


REGISTRY: Registry[Callable[..., AdvantageEstimator]] = Registry(
    "advantage estimator", autoload=("toolgym.trainers.methods",)
)


class Estimator:
    """Base class: stateless, no state update; subclasses implement `compute`."""

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "group_id"})
    stateful: ClassVar[bool] = False

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """Token-level advantages for `batch`."""
        raise NotImplementedError

    def update_state(
        self,
        batch: RolloutBatch,
        state: dict[str, Any],
        post_update_logprobs: Tensor | None = None,
        logprob_fn: LogprobFn | None = None,
    ) -> None:
        """Update persistent state after the actor update (no-op by default).

        post_update_logprobs [B, T]: the updated policy's logprobs of `batch`; logprob_fn
        scores any RolloutBatch with the updated policy (SPO re-scores stored responses).
        """


# ---------------------------------------------------------------- pure building blocks


def group_index(group_id: Tensor) -> tuple[Tensor, int]:
    """Dense group index 0..G-1 per row and G. [B] -> ([B], int)."""
    _, inverse = torch.unique(group_id, return_inverse=True)
    return inverse, int(inverse.max()) + 1 if inverse.numel() else 0


def group_stats(values: Tensor, group_id: Tensor, weights: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Per-row group mean, unbiased std and (weighted) count. [B] -> ([B], [B], [B]).

    Integer weights w act as w copies of the row (Flow-GRPO's turn-samples).
    """
    idx, g = group_index(group_id)
    w = torch.ones_like(values) if weights is None else weights.to(values.dtype)
    zeros = torch.zeros(g, dtype=values.dtype, device=values.device)
    count = zeros.clone().index_add_(0, idx, w)
    mean = zeros.clone().index_add_(0, idx, w * values) / count
    sq = zeros.clone().index_add_(0, idx, w * (values - mean[idx]) ** 2)
    std = torch.sqrt(sq / (count - 1).clamp(min=1))
    return mean[idx], std[idx], count[idx]


def broadcast(seq_values: Tensor, mask: Tensor) -> Tensor:
    """A per-sequence value on every trainable token. [B], [B, T] -> [B, T]."""
    return seq_values.unsqueeze(1).to(mask.dtype) * mask


def grpo_outcome(
    reward: Tensor,
    group_id: Tensor,
    norm_std: bool = True,
    eps: float = GROUP_STD_EPS,
    weights: Tensor | None = None,
) -> Tensor:
    """(R − mean_G R)/(std_G R + eps), or R − mean_G R (Dr.GRPO). [B] -> [B].

    Single-sample groups get 0 (methods.md §1).
    """
    mean, std, count = group_stats(reward, group_id, weights)
    adv = reward - mean
    if norm_std:
        adv = adv / (std + eps)
    return torch.where(count > 1, adv, torch.zeros_like(adv))


def rloo_outcome(reward: Tensor, group_id: Tensor) -> Tensor:
    """R_i − mean_{j≠i} R_j = (R_i − mean)·G/(G−1); 0 for single groups. [B] -> [B]."""
    mean, _, count = group_stats(reward, group_id)
    scale = count / (count - 1).clamp(min=1)
    return torch.where(count > 1, (reward - mean) * scale, torch.zeros_like(reward))


def masked_whiten(x: Tensor, mask: Tensor, eps: float = WHITEN_EPS) -> Tensor:
    """(x − mean)/sqrt(var + eps) over mask-1 entries (unbiased var), 0 elsewhere. [B, T]."""
    n = mask.sum()
    mean = (x * mask).sum() / n.clamp(min=1)
    var = (((x - mean) ** 2) * mask).sum() / (n - 1).clamp(min=1)
    return (x - mean) * torch.rsqrt(var + eps) * mask


def outcome_token_rewards(reward: Tensor, mask: Tensor) -> Tensor:
    """R on the last trainable token of each sequence. [B], [B, T] -> [B, T]."""
    out = torch.zeros_like(mask, dtype=reward.dtype)
    last = last_token_index(mask)
    rows = torch.nonzero(last >= 0).squeeze(1)
    out[rows, last[rows]] = reward[rows]
    return out


def dense_rewards(batch: RolloutBatch) -> Tensor:
    """`batch.token_rewards` if set, else the outcome on the last model token. [B, T]."""
    if batch.token_rewards is not None:
        return batch.token_rewards.to(torch.float32)
    return outcome_token_rewards(batch.reward.to(torch.float32), batch.mask)


def kl_reward_penalty(old_logp: Tensor, ref_logp: Tensor, mask: Tensor, beta: float) -> Tensor:
    """−β·k1 per model token, for KL in the reward (PPO, REINFORCE++). [B, T] -> [B, T]."""
    return -beta * (old_logp - ref_logp) * mask


def discounted_returns(rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """G_t = Σ_{k≥t, m_k=1} γ^{#model tokens between} r_k, skipping mask-0 tokens. [B, T].

    Unlike verl (which resets the running return at mask 0), the return is carried across
    tool/observation tokens so an outcome reward reaches earlier turns.
    """
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        m = mask[:, t]
        running = torch.where(m > 0, rewards[:, t] + gamma * running, running)
        out[:, t] = running * m
    return out


def gae(rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 1.0) -> tuple[Tensor, Tensor]:
    """GAE over model tokens, carrying nextvalue/lastgaelam across mask-0 positions (verl).

    rewards, values, mask [B, T] -> (advantages [B, T] unwhitened, returns [B, T]).
    """
    b, t_len = rewards.shape
    adv = torch.zeros_like(rewards)
    next_v = torch.zeros(b, dtype=rewards.dtype, device=rewards.device)
    last = torch.zeros_like(next_v)
    for t in reversed(range(t_len)):
        m = mask[:, t]
        delta = rewards[:, t] + gamma * next_v - values[:, t]
        new_last = delta + gamma * lam * last
        next_v = values[:, t] * m + (1 - m) * next_v
        last = new_last * m + (1 - m) * last
        adv[:, t] = last
    returns = (adv + values) * mask
    return adv * mask, returns


# ---------------------------------------------------------------- registered estimators


@REGISTRY.register("grpo")
class GroupZ(Estimator):
    """GRPO: group z-score of R broadcast to tokens [CODE verl compute_grpo_outcome_advantage]."""

    def __init__(self, norm_std: bool = True, eps: float = GROUP_STD_EPS) -> None:
        self.norm_std, self.eps = norm_std, eps

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] rewards -> [B, T] advantages."""
        adv = grpo_outcome(batch.reward.float(), batch.group_id, self.norm_std, self.eps)
        return AdvOut(broadcast(adv, batch.mask))


@REGISTRY.register("dr_grpo")
class GroupMean(GroupZ):
    """Dr.GRPO: R − mean_G R, no std division [DOCS/CODE TRL dr_grpo]."""

    def __init__(self, eps: float = GROUP_STD_EPS) -> None:
        super().__init__(norm_std=False, eps=eps)


@REGISTRY.register("rloo")
class RLOO(Estimator):
    """RLOO leave-one-out baseline [CODE verl compute_rloo_outcome_advantage]."""

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] rewards -> [B, T] advantages."""
        return AdvOut(broadcast(rloo_outcome(batch.reward.float(), batch.group_id), batch.mask))


def _kl_in_reward(batch: RolloutBatch, rewards: Tensor, kl_coef: float) -> Tensor:
    if kl_coef == 0.0:
        return rewards
    if batch.old_logprobs is None or batch.ref_logprobs is None:
        raise ValueError("KL in the reward needs batch.old_logprobs and batch.ref_logprobs")
    return rewards + kl_reward_penalty(batch.old_logprobs, batch.ref_logprobs, batch.mask, kl_coef)


@REGISTRY.register("reinforce_pp")
class ReinforcePP(Estimator):
    """REINFORCE++: r_t = −β·k1 + R at the end; returns; global masked whitening [CODE]."""

    requires = frozenset({"reward"})

    def __init__(self, gamma: float = 1.0, kl_coef: float = 0.0) -> None:
        self.gamma, self.kl_coef = gamma, kl_coef

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B, T] token rewards -> whitened returns [B, T]."""
        rewards = _kl_in_reward(batch, dense_rewards(batch), self.kl_coef)
        returns = discounted_returns(rewards, batch.mask, self.gamma)
        return AdvOut(masked_whiten(returns, batch.mask), returns=returns)


@REGISTRY.register("reinforce_pp_baseline")
class ReinforcePPBaseline(Estimator):
    """REINFORCE++-baseline: R − group mean, broadcast, then global whitening [CODE verl]."""

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] rewards -> [B, T] advantages."""
        centred = grpo_outcome(batch.reward.float(), batch.group_id, norm_std=False)
        return AdvOut(masked_whiten(broadcast(centred, batch.mask), batch.mask))


@REGISTRY.register("gae")
class GAE(Estimator):
    """PPO's GAE on dense rewards with a critic; advantages whitened [CODE verl]."""

    requires = frozenset({"reward", "values"})

    def __init__(self, gamma: float = 1.0, lam: float = 1.0, kl_coef: float = 0.0, whiten: bool = True) -> None:
        self.gamma, self.lam, self.kl_coef, self.whiten = gamma, lam, kl_coef, whiten

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """dense rewards and batch.values [B, T] -> advantages and returns [B, T]."""
        if batch.values is None:
            raise ValueError("GAE needs batch.values (fill them with the value head)")
        rewards = _kl_in_reward(batch, dense_rewards(batch), self.kl_coef)
        adv, returns = gae(rewards, batch.values.float(), batch.mask, self.gamma, self.lam)
        if self.whiten:
            adv = masked_whiten(adv, batch.mask)
        return AdvOut(adv, returns=returns)
