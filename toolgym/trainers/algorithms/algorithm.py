"""Algorithm: a MethodPreset resolved into plug-in objects, with the calls the learner makes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import Tensor

from toolgym.trainers import advantages as adv_mod
from toolgym.trainers import aggregators, losses, regularizers, rewards, samplers
from toolgym.trainers.advantages import AdvantageEstimator, AdvOut, LogprobFn
from toolgym.trainers.aggregators import GlobalCounts
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RegularizerRef
from toolgym.trainers.batch import RolloutBatch


@dataclass(frozen=True)
class BoundRegularizer:
    """A regulariser with its coefficient, config and aggregator resolved."""

    name: str
    reg: regularizers.Regularizer
    coef: float
    cfg: dict[str, Any]
    aggregator: aggregators.Aggregator
    agg_cfg: dict[str, Any]


class Algorithm:
    """The plug-ins of one method. The learner calls, per step:

    1. `batch = algo.transform_rewards(batch)`;
    2. `batch, n_missing = algo.filter_groups(batch)` (regenerate while n_missing > 0);
    3. fill `old_logprobs`, `ref_logprobs` (if `needs_ref`), `values` (if `needs_critic`);
    4. `adv = algo.advantages(batch, state)`;
    5. per (micro-)batch: `loss, metrics = algo.loss(batch, logp, adv, entropy=…, counts=…)`,
       plus `algo.value_loss(new_values, batch, adv)` when `needs_critic`;
    6. after the optimizer step: `algo.update_state(batch, state, post_update_logprobs)`.
    """

    def __init__(self, preset: MethodPreset) -> None:
        self.preset = preset
        self.estimator: AdvantageEstimator = adv_mod.REGISTRY.get(preset.advantage.name)(**preset.advantage.cfg)
        self.loss_fn = losses.REGISTRY.get(preset.loss.name)
        self.loss_cfg = dict(preset.loss.cfg)
        self.aggregator = aggregators.REGISTRY.get(preset.aggregator.name)
        self.agg_cfg = dict(preset.aggregator.cfg)
        self.regularizers = [self._bind(r) for r in preset.regularizers]
        self.reward_transforms = [rewards.REGISTRY.get(r.name)(**r.cfg) for r in preset.reward_transforms]
        self.group_filter = _maybe(samplers.GROUP_FILTERS, preset.group_filter)
        self.prompt_sampler = _maybe(samplers.PROMPT_SAMPLERS, preset.prompt_sampler)

    def _bind(self, ref: RegularizerRef) -> BoundRegularizer:
        agg_name = ref.aggregator or self.preset.aggregator.name
        agg_cfg = self.agg_cfg if ref.aggregator is None else {}
        return BoundRegularizer(
            ref.name,
            regularizers.REGISTRY.get(ref.name),
            ref.coef,
            dict(ref.cfg),
            aggregators.REGISTRY.get(agg_name),
            agg_cfg,
        )

    @property
    def name(self) -> str:
        """The preset's name."""
        return self.preset.name

    @property
    def hparams(self) -> dict[str, Any]:
        """Trainer hyper-parameters (lr, temperature, …) of the preset."""
        return dict(self.preset.hparams)

    @property
    def needs_critic(self) -> bool:
        """Whether the learner must run a value head and fill `batch.values`."""
        return "values" in self.estimator.requires

    @property
    def needs_ref(self) -> bool:
        """Whether the learner must fill `batch.ref_logprobs` (KL loss or KL in reward)."""
        in_loss = any("ref_logp" in r.reg.inputs for r in self.regularizers if r.coef != 0.0)
        return in_loss or float(getattr(self.estimator, "kl_coef", 0.0)) != 0.0

    def init_state(self) -> dict[str, Any]:
        """Fresh persistent state (checkpoint it with the trainer)."""
        return {}

    def transform_rewards(self, batch: RolloutBatch) -> RolloutBatch:
        """Apply the reward transforms in order."""
        for transform in self.reward_transforms:
            batch = transform(batch)
        return batch

    def filter_groups(self, batch: RolloutBatch) -> tuple[RolloutBatch, int]:
        """Apply the group filter: (kept batch, groups to regenerate)."""
        if self.group_filter is None:
            return batch, 0
        kept, missing = self.group_filter.select(batch)
        return kept, int(missing)

    def sample_prompts(
        self, prompt_keys: Sequence[int], state: dict[str, Any], n: int, rng: np.random.Generator
    ) -> list[int]:
        """Indices of `n` prompts to roll out next (uniform without a prompt sampler)."""
        if self.prompt_sampler is None:
            picks = rng.choice(len(prompt_keys), size=n, replace=n > len(prompt_keys))
            return [int(i) for i in picks]
        return [int(i) for i in self.prompt_sampler.sample(prompt_keys, state, n, rng)]

    def advantages(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """Token-level advantages [B, T] (zero off the loss mask)."""
        out = self.estimator.compute(batch, state)
        out.advantages = out.advantages * batch.mask
        return out

    def update_state(
        self,
        batch: RolloutBatch,
        state: dict[str, Any],
        post_update_logprobs: Tensor | None = None,
        logprob_fn: LogprobFn | None = None,
    ) -> None:
        """Let a stateful estimator update after the actor step (see `Estimator.update_state`)."""
        self.estimator.update_state(batch, state, post_update_logprobs, logprob_fn)

    def loss(
        self,
        batch: RolloutBatch,
        logp: Tensor,
        adv: AdvOut,
        *,
        entropy: Tensor | None = None,
        values: Tensor | None = None,
        counts: GlobalCounts | Mapping[str, GlobalCounts] | None = None,
    ) -> tuple[Tensor, dict[str, float]]:
        """Scalar loss = agg(policy loss) + Σ coef·agg(regulariser), and metrics.

        logp [B, T] is π_θ with grad; old logprobs come from `batch.old_logprobs`, else
        `batch.rollout_logprobs`, else logp.detach() (on-policy, one update). The policy term
        uses `adv.policy_mask` when set (rows an estimator excludes from the PG loss).
        `counts`: a GlobalCounts for the policy mask, or `global_counts(batch, adv)` (per mask);
        without counts every term is normalized over this (micro-)batch alone.
        """
        mask = batch.mask
        pmask = mask if adv.policy_mask is None else adv.policy_mask.to(mask.dtype)
        old = _old_logprobs(batch, logp)
        by_mask = _counts_by_mask(counts)
        mat = self.loss_fn(logp, old, adv.advantages, pmask, **self.loss_cfg)
        if adv.token_weights is not None:
            mat = mat * adv.token_weights
        is_weights = self._rollout_is(batch, old, pmask)
        if is_weights is not None:
            mat = mat * is_weights
        total = self.aggregator(mat, pmask, by_mask.get("mask"), **self.agg_cfg)
        metrics = {"losses/policy": float(total.detach())}
        inputs = _reg_inputs(batch, logp, old, adv, mask, entropy, values)
        for reg in self.regularizers:
            value = self._regularizer_value(reg, inputs, by_mask.get(reg.reg.mask_key))
            total = total + reg.coef * value
            metrics[f"losses/{reg.name}"] = float(value.detach())
        metrics["losses/total"] = float(total.detach())
        return total, metrics

    def _rollout_is(self, batch: RolloutBatch, old: Tensor, mask: Tensor) -> Tensor | None:
        """hparams "rollout_is" ("token" | "sequence") with "rollout_is_threshold": TIS weights."""
        level = self.preset.hparams.get("rollout_is")
        if not level or batch.rollout_logprobs is None:
            return None
        threshold = float(self.preset.hparams.get("rollout_is_threshold", 2.0))
        return losses.rollout_is_weights(old, batch.rollout_logprobs, mask, level, threshold)

    def _regularizer_value(self, reg: BoundRegularizer, inputs: dict[str, Any], counts: GlobalCounts | None) -> Tensor:
        missing = [k for k in (*reg.reg.inputs, reg.reg.mask_key) if inputs.get(k) is None]
        if missing:
            raise ValueError(f"regularizer {reg.name!r} needs {missing}")
        term = reg.reg.fn(**{k: inputs[k] for k in reg.reg.inputs}, **reg.cfg)
        mask = inputs[reg.reg.mask_key].to(term.dtype)
        return reg.aggregator(term, mask, counts, **reg.agg_cfg)

    def global_counts(self, batch: RolloutBatch, adv: AdvOut, max_len: int | None = None) -> dict[str, GlobalCounts]:
        """Normalizers of the whole mini-batch for `loss(counts=…)` under gradient accumulation.

        Key "mask" is the policy term's mask (`adv.policy_mask` or the loss mask); each
        regulariser with its own mask (e.g. "teacher_mask") gets its own counts, where
        num_seqs counts the rows that have any token of that mask.
        """
        mask = batch.mask
        if adv.policy_mask is None:
            out = {"mask": GlobalCounts.from_mask(mask, max_len)}
        else:
            out = {"mask": _nonempty_counts(adv.policy_mask.to(mask.dtype), max_len)}
        for reg in self.regularizers:
            key = reg.reg.mask_key
            if key != "mask" and isinstance(adv.aux.get(key), Tensor):
                out[key] = _nonempty_counts(adv.aux[key].to(mask.dtype), max_len)
        return out

    def value_loss(
        self,
        new_values: Tensor,
        batch: RolloutBatch,
        adv: AdvOut,
        counts: GlobalCounts | Mapping[str, GlobalCounts] | None = None,
        clip_value: float | None = None,
    ) -> Tensor:
        """Clipped critic loss, token-mean. new_values [B, T] from the value head (with grad).

        clip_value defaults to the preset's hparams["value_clip"], else 0.5.
        """
        if batch.values is None or adv.returns is None:
            raise ValueError("value_loss needs batch.values and AdvOut.returns")
        eps = float(self.preset.hparams.get("value_clip", 0.5)) if clip_value is None else clip_value
        mat = losses.value_loss_clipped(new_values, batch.values, adv.returns, batch.mask, eps)
        return aggregators.token_mean(mat, batch.mask, _counts_by_mask(counts).get("mask"))


def _nonempty_counts(mask: Tensor, max_len: int | None) -> GlobalCounts:
    return GlobalCounts(float(mask.sum()), float((mask.sum(dim=1) > 0).sum()), max_len)


def _counts_by_mask(
    counts: GlobalCounts | Mapping[str, GlobalCounts] | None,
) -> Mapping[str, GlobalCounts]:
    if counts is None:
        return {}
    if isinstance(counts, GlobalCounts):
        return {"mask": counts}
    return counts


def _maybe(registry: Any, ref: PluginRef | None) -> Any:
    return None if ref is None else registry.get(ref.name)(**ref.cfg)


def _old_logprobs(batch: RolloutBatch, logp: Tensor) -> Tensor:
    if batch.old_logprobs is not None:
        return batch.old_logprobs
    if batch.rollout_logprobs is not None:
        return batch.rollout_logprobs
    return logp.detach()


def _reg_inputs(
    batch: RolloutBatch,
    logp: Tensor,
    old: Tensor,
    adv: AdvOut,
    mask: Tensor,
    entropy: Tensor | None,
    values: Tensor | None,
) -> dict[str, Any]:
    base = {
        "logp": logp,
        "old_logp": old,
        "ref_logp": batch.ref_logprobs,
        "rollout_logp": batch.rollout_logprobs,
        "advantages": adv.advantages,
        "mask": mask,
        "entropy": entropy if entropy is not None else batch.entropy,
        "values": values,
    }
    return {**base, **{k: v for k, v in adv.aux.items() if isinstance(v, Tensor)}}
