"""The learner: policy log-probs over whole episodes, SFT and RL steps through an `Algorithm`, checkpoints."""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from toolgym.trainers.aggregators import GlobalCounts
from toolgym.trainers.batch import RolloutBatch

logger = logging.getLogger(__name__)
FORBIDDEN_LOGIT = -1e9


@dataclass(frozen=True)
class LearnerConfig:
    """Optimisation settings of the learner."""

    lr: float = 1e-4
    """AdamW learning rate"""
    weight_decay: float = 0.0
    """AdamW weight decay"""
    max_grad_norm: float = 1.0
    """gradient clipping (0 = off)"""
    temperature: float = 1.0
    """log-probs are computed at the sampling temperature, like the behaviour log-probs"""
    micro_batch_size: int = 64
    """sequences at most per forward/backward (gradient accumulation over a step)"""
    micro_batch_tokens: int = 8192
    """padded tokens at most per forward/backward: rows are sorted by length, so padding stays small"""
    drop_zero_advantage: bool = True
    """drop sequences whose advantages are all zero (groups with one reward) before the update"""
    recompute_old_logprobs: bool = False
    """recompute π_old with the learner instead of trusting the engine's behaviour log-probs"""
    device: str = "cpu"
    """torch device of the learner"""
    forbidden_ids: tuple[int, ...] = ()
    """ids the sampler may not emit: removed here too, so π_θ and the behaviour policy are the same distribution"""
    critic_lr: float | None = None
    """learning rate of the value head (methods with a critic); None: the preset's hparams["critic_lr"], else lr"""


def token_logprobs(
    model: Any,
    batch: RolloutBatch,
    temperature: float = 1.0,
    with_entropy: bool = False,
    forbidden_ids: tuple[int, ...] = (),
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(input_ids[t] | input_ids[<t]) at every position t (0 at t=0); optionally the entropy.

    Same distribution as the sampler: logits / temperature, with `forbidden_ids` removed.
    """
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids)
    return logprobs_from_logits(out.logits, batch.input_ids, temperature, with_entropy, forbidden_ids)


def logprobs_from_logits(
    logits: torch.Tensor,
    input_ids: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    forbidden_ids: tuple[int, ...] = (),
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`token_logprobs` from the model's logits [B, T, V] -> logp [B, T] (0 at t=0), entropy [B, T] or None."""
    logits = logits[:, :-1, :].float() / temperature  # (B, T-1, V): predicts tokens 1..T-1
    if forbidden_ids:  # finite, so masked positions holding such a token give 0 (not nan) in any product
        logits[..., list(forbidden_ids)] = FORBIDDEN_LOGIT
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(2, input_ids[:, 1:, None]).squeeze(2)  # (B, T-1)
    logp = torch.nn.functional.pad(logp, (1, 0))  # (B, T)
    if not with_entropy:
        return logp, None
    entropy = torch.special.entr(logp_all.exp()).sum(-1)  # (B, T-1); entr(0) = 0
    return logp, torch.nn.functional.pad(entropy, (1, 0))


class Learner:
    """Owns the trainable policy, its optimizer and the algorithm's persistent state."""

    def __init__(self, model: Any, algorithm: Any, config: LearnerConfig) -> None:
        self.config = config
        self.model = model.to(config.device).train()
        self.algorithm = algorithm
        self.algo_state: dict[str, Any] = algorithm.init_state() if algorithm is not None else {}
        self.ref_model = self._make_ref() if algorithm is not None and algorithm.needs_ref else None
        self.value_head = self._make_value_head() if algorithm is not None and algorithm.needs_critic else None
        self.optimizer = torch.optim.AdamW(self._param_groups(), lr=config.lr, weight_decay=config.weight_decay)
        self.step = 0
        self.version = 0

    def _make_value_head(self) -> Any:
        from toolgym.trainers.value_head import ValueHead

        return ValueHead(int(self.model.config.hidden_size)).to(self.config.device).train()

    def _param_groups(self) -> list[dict[str, Any]]:
        """The policy's parameters, and the value head's with the critic learning rate."""
        groups: list[dict[str, Any]] = [{"params": list(self.model.parameters())}]
        if self.value_head is not None:
            lr = self.config.critic_lr or float(self.algorithm.hparams.get("critic_lr", self.config.lr))
            groups.append({"params": list(self.value_head.parameters()), "lr": lr})
        return groups

    def _parameters(self) -> list[torch.nn.Parameter]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def _make_ref(self) -> Any:
        ref = copy.deepcopy(self.model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    # ------------------------------------------------------------------ weights
    def state_dict(self) -> dict[str, torch.Tensor]:
        """Policy weights on CPU (what the engines load)."""
        return {k: v.detach().to("cpu").clone() for k, v in self.model.state_dict().items()}

    def set_lr(self, lr: float) -> None:
        """Change the learning rate (e.g. SFT → RL)."""
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    # ------------------------------------------------------------------ steps
    def sft_step(self, batch: RolloutBatch) -> dict[str, float]:
        """One supervised step: token-mean NLL of the trainable (model) tokens."""
        batch = batch.to(self.config.device)
        logp, _ = token_logprobs(self.model, batch)
        mask = batch.mask
        loss = -(logp * mask).sum() / mask.sum().clamp(min=1)
        self._apply(loss)
        return {"sft/loss": float(loss.detach())}

    def rl_step(self, batch: RolloutBatch) -> dict[str, float]:
        """One policy update on a batch of episodes; returns namespaced metrics."""
        algo, cfg = self.algorithm, self.config
        meta = {"step": self.step, "policy_version": self.version, **batch.meta}  # VSPO's stage, HisPO's staleness
        batch = algo.transform_rewards(batch.to(cfg.device).replace(meta=meta))
        batch, _missing = algo.filter_groups(batch)
        batch = _as_samples(algo, batch)
        batch = self._fill_fields(batch)
        _check_required(algo, batch)
        adv = algo.advantages(batch, self.algo_state)
        metrics = {"rollout/sequences": float(batch.batch_size)}
        if cfg.drop_zero_advantage:
            keep = _rows_with_signal(algo, adv).nonzero().flatten()
            metrics["rollout/kept_fraction"] = float(len(keep)) / max(batch.batch_size, 1)
            if len(keep) == 0:
                return {**metrics, "losses/skipped": 1.0}
            batch, adv = batch.select(keep), _select_adv(adv, keep)
        metrics.update(self._update(batch, adv))
        algo.update_state(batch, self.algo_state, None, logprob_fn=self._current_logprobs)
        return metrics

    def _current_logprobs(self, batch: RolloutBatch) -> torch.Tensor:
        """log π_θ of a batch with the current weights, without grad (stateful estimators, e.g. SPO's ρ)."""
        with torch.no_grad():
            logp: torch.Tensor = self._logprobs(self.model, batch.to(self.config.device))[0]
        return logp

    def _fill_fields(self, batch: RolloutBatch) -> RolloutBatch:
        """What the algorithm needs from the models before advantages: π_old, π_ref, V, pooled states, ref top-K."""
        changes: dict[str, Any] = {}
        requires = self.algorithm.estimator.requires
        options = self.algorithm.preset.rollout.options
        with torch.no_grad():
            if self.config.recompute_old_logprobs or batch.rollout_logprobs is None:
                changes["old_logprobs"] = self._logprobs(self.model, batch)[0]
            elif batch.old_logprobs is None:  # π_old is the behaviour policy (estimators with KL in the reward read it)
                changes["old_logprobs"] = batch.rollout_logprobs
            if self.ref_model is not None:
                changes["ref_logprobs"] = self._logprobs(self.ref_model, batch)[0]
            if self.value_head is not None:
                from toolgym.trainers.value_head import token_values

                changes["values"] = token_values(self.model, self.value_head, batch)
            if batch.hidden_pool is None and ("hidden_pool" in requires or options.get("hidden_pool")):
                changes["hidden_pool"] = pooled_hidden(self.model, batch)
            if batch.ref_topk_ids is None and "ref_topk_ids" in requires:
                ref = self.ref_model if self.ref_model is not None else self.model
                changes["ref_topk_ids"] = topk_ids(ref, batch, int(options.get("ref_topk", 8)))
        return batch.replace(**changes) if changes else batch

    def _logprobs(self, model: Any, batch: RolloutBatch, with_entropy: bool = False) -> tuple[Any, Any]:
        return token_logprobs(model, batch, self.config.temperature, with_entropy, self.config.forbidden_ids)

    def _update(self, batch: RolloutBatch, adv: Any) -> dict[str, float]:
        """Gradient accumulation over micro-batches with global counts, then one optimizer step."""
        counts = GlobalCounts.from_mask(batch.mask, max_len=batch.seq_len)
        algo_counts = self.algorithm.global_counts(batch, adv, max_len=batch.seq_len)
        sums: dict[str, float] = {}
        self.optimizer.zero_grad(set_to_none=True)
        for rows in micro_batches(
            batch.attention_mask.sum(dim=1), self.config.micro_batch_size, self.config.micro_batch_tokens
        ):
            micro, micro_adv = _trim(batch.select(rows), _select_adv(adv, rows))
            logp, entropy, values = self._forward(micro)
            loss, metrics = self.algorithm.loss(micro, logp, micro_adv, entropy=entropy, counts=algo_counts)
            if values is not None:
                value_loss = self.algorithm.value_loss(values, micro, micro_adv, counts=algo_counts)
                loss = loss + float(self.algorithm.hparams.get("vf_coef", 0.5)) * value_loss
                metrics["losses/value"] = float(value_loss.detach())
            loss.backward()
            metrics["losses/entropy"] = float((entropy.detach() * micro.mask).sum() / counts.num_tokens)
            metrics.update(_ratio_metrics(logp.detach(), micro, counts))
            for k, v in metrics.items():
                sums[k] = sums.get(k, 0.0) + v
        sums["losses/grad_norm"] = self._clip_and_step()
        return sums

    def _forward(self, micro: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """One forward with grad: log-probs, entropy and (with a value head) values, all [B, T]."""
        if self.value_head is None:
            logp, entropy = self._logprobs(self.model, micro, with_entropy=True)
            return logp, entropy, None
        from toolgym.trainers.value_head import values_for_tokens

        out = self.model(
            input_ids=micro.input_ids,
            attention_mask=micro.attention_mask,
            position_ids=micro.position_ids,
            output_hidden_states=True,
        )
        cfg = self.config
        logp, entropy = logprobs_from_logits(out.logits, micro.input_ids, cfg.temperature, True, cfg.forbidden_ids)
        assert entropy is not None  # with_entropy=True
        return logp, entropy, values_for_tokens(self.value_head(out.hidden_states[-1]))

    def _apply(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self._clip_and_step()

    def _clip_and_step(self) -> float:
        limit = self.config.max_grad_norm if self.config.max_grad_norm > 0 else math.inf  # inf: measured, not clipped
        norm = float(torch.nn.utils.clip_grad_norm_(self._parameters(), limit))
        self.optimizer.step()
        self.step += 1
        self.version += 1
        return norm if math.isfinite(norm) else float("nan")

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: str | Path, tokenizer: Any = None, extra: dict[str, Any] | None = None) -> Path:
        """Model (`save_pretrained`), tokenizer, optimizer, algorithm state and counters."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path)
        if tokenizer is not None:
            tokenizer.save_pretrained(path)
        state = {
            "optimizer": self.optimizer.state_dict(),
            "algo_state": self.algo_state,
            "value_head": None if self.value_head is None else self.value_head.state_dict(),
            "step": self.step,
            "version": self.version,
            "extra": extra or {},
        }
        torch.save(state, path / "trainer_state.pt")
        return path

    def load(self, path: str | Path) -> dict[str, Any]:
        """Restore what `save` wrote; returns its `extra`."""
        from transformers import AutoModelForCausalLM

        path = Path(path)
        loaded = AutoModelForCausalLM.from_pretrained(str(path))
        self.model.load_state_dict(loaded.state_dict())
        state = torch.load(path / "trainer_state.pt", weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        if self.value_head is not None:
            if state.get("value_head") is None:
                raise ValueError(f"checkpoint {path} has no value head, but {self.algorithm.name!r} needs one")
            self.value_head.load_state_dict(state["value_head"])
        self.algo_state, self.step, self.version = state["algo_state"], state["step"], state["version"]
        return dict(state.get("extra", {}))


def micro_batches(lengths: torch.Tensor, max_rows: int, max_tokens: int) -> list[torch.Tensor]:
    """Row indices grouped into micro-batches of similar length: rows × longest ≤ max_tokens (and ≤ max_rows)."""
    order = torch.argsort(lengths, descending=True).tolist()
    groups: list[list[int]] = []
    for row in order:
        longest = int(lengths[groups[-1][0]]) if groups else 0
        if groups and len(groups[-1]) < max_rows and (len(groups[-1]) + 1) * longest <= max_tokens:
            groups[-1].append(row)
        else:
            groups.append([row])
    return [torch.tensor(sorted(g)) for g in groups]


def _trim(batch: RolloutBatch, adv: Any) -> tuple[RolloutBatch, Any]:
    """Cut the right padding shared by every row of a micro-batch."""
    width = int(batch.attention_mask.sum(dim=1).max())
    if width == batch.seq_len:
        return batch, adv
    t = batch.seq_len
    changes = {
        f.name: getattr(batch, f.name)[:, :width]
        for f in dataclasses.fields(batch)
        if isinstance(getattr(batch, f.name), torch.Tensor)
        and getattr(batch, f.name).dim() >= 2
        and getattr(batch, f.name).shape[1] == t
    }
    adv = dataclasses.replace(
        adv,
        **{
            f.name: _cut(getattr(adv, f.name), t, width)
            for f in dataclasses.fields(adv)
            if isinstance(getattr(adv, f.name), torch.Tensor)
        },
    )
    adv.aux = {k: _cut(v, t, width) for k, v in adv.aux.items()}
    return batch.replace(**changes), adv


def _cut(x: Any, t: int, width: int) -> Any:
    """x[:, :width] for [B, T, …] tensors, else x."""
    return x[:, :width] if isinstance(x, torch.Tensor) and x.dim() >= 2 and x.shape[1] == t else x


def _select_adv(adv: Any, rows: torch.Tensor) -> Any:
    return adv.select(rows)


def pooled_hidden(model: Any, batch: RolloutBatch) -> torch.Tensor:
    """Mean of the last hidden layer over each row's trainable tokens. -> [B, H] (float32)."""
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        output_hidden_states=True,
    )
    mask = batch.mask.float().unsqueeze(2)  # (B, T, 1)
    pooled: torch.Tensor = (out.hidden_states[-1].float() * mask).sum(1) / mask.sum(1).clamp(min=1)
    return pooled


def topk_ids(model: Any, batch: RolloutBatch, k: int) -> torch.Tensor:
    """The model's top-k token ids for every position t (predicting input_ids[:, t]; id 0 at t=0). -> [B, T, k]."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids)
    ids = out.logits[:, :-1].topk(k, dim=-1).indices  # (B, T-1, k)
    return torch.nn.functional.pad(ids, (0, 0, 1, 0))


def _rows_with_signal(algo: Any, adv: Any) -> torch.Tensor:
    """Rows with a non-zero advantage or a token of a regulariser's own mask (e.g. AKBE's teacher tokens). -> [B] bool."""
    keep: torch.Tensor = adv.advantages.abs().sum(dim=1) > 0
    for reg in algo.regularizers:
        extra = adv.aux.get(reg.reg.mask_key)
        if reg.reg.mask_key != "mask" and isinstance(extra, torch.Tensor) and reg.coef != 0.0:
            keep = keep | (extra.abs().sum(dim=1) > 0)
    return keep


def _check_required(algo: Any, batch: RolloutBatch) -> None:
    """A clear error when the rollouts lack a field the method's estimator reads."""
    missing = sorted(k for k in algo.estimator.requires if getattr(batch, k, None) is None)
    if missing:
        raise ValueError(f"method {algo.name!r} needs batch field(s) {missing} that these rollouts do not provide")


def _ratio_metrics(logp: torch.Tensor, batch: RolloutBatch, counts: GlobalCounts) -> dict[str, float]:
    """Approximate KL to the behaviour policy and clip-relevant ratio stats (summed over micro-batches)."""
    if batch.rollout_logprobs is None:
        return {}
    mask = batch.mask
    log_ratio = torch.where(mask > 0, logp - batch.rollout_logprobs, 0.0)  # (B, T)
    kl = ((log_ratio.exp() - 1) - log_ratio) * mask  # k3 estimate of KL(μ||π)
    return {"losses/approx_kl": float(kl.sum() / counts.num_tokens)}


def _as_samples(algo: Any, batch: RolloutBatch) -> RolloutBatch:
    """The rows the method trains on: whole episodes, or one row per assistant turn (rollout kind "per_turn")."""
    if algo.preset.rollout.kind != "per_turn":
        return batch
    from toolgym.trainers.methods.flow_grpo import split_turns

    return split_turns(batch)  # Flow-GRPO: each turn is a sample of its own, with the episode's reward and group
