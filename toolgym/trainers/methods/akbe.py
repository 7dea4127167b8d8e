"""AKBE: dual-path rollouts and on-policy self-distillation on a chosen teacher (2605.26952).

Evidence [CODE] CuSO4-Chen/AKBE `ray_trainer.py::_construct_sdpo_batch`,
`dual_path_rollout_manager.py`, `dp_actor.py`, `core_algos.compute_sequence_sdpo_loss`,
`scripts/akbe_multihop_qwen3_4B.sh`, `scripts/config/ppo_trainer_dr.yaml`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import torch
from torch import Tensor

from toolgym.trainers import advantages, aggregators, regularizers
from toolgym.trainers.advantages import AdvOut, Estimator
from toolgym.trainers.aggregators import GlobalCounts
from toolgym.trainers.algorithms.preset import (
    MethodPreset,
    PluginRef,
    RegularizerRef,
    RolloutSpec,
    register_preset,
)
from toolgym.trainers.batch import Path, RolloutBatch
from toolgym.trainers.regularizers import Regularizer
from toolgym.trainers.rewards import correctness

W_SD = 0.05  # SDPO weight in the script (yaml default 0.1) [CODE]
TAU_SD = 1.0  # self-distillation temperature [CODE]


class Category(IntEnum):
    """Why a group got a teacher (aux["akbe_category"])."""

    NONE = 0
    EFFICIENCY = 1  # a no-tool rollout is correct and so is a with-tool one
    HALLUCINATION = 2  # a no-tool rollout is correct, no with-tool one is
    CAPABILITY = 3  # only with-tool rollouts are correct, some no-tool one is wrong


def _shortest(rows: Tensor, lengths: Tensor) -> int:
    return int(rows[torch.argmin(lengths[rows])])


def select_teacher(correct: Tensor, tools_off: Tensor, lengths: Tensor) -> tuple[int, Category]:
    """Teacher row (−1 if none) and category for one group. correct, tools_off, lengths [G].

    Shortest correct no-tool rollout if any; else the shortest correct with-tool rollout when
    some no-tool rollout is wrong; else none [CODE _construct_sdpo_batch].
    """
    off_ok = torch.nonzero(correct & tools_off).squeeze(1)
    on_ok = torch.nonzero(correct & ~tools_off).squeeze(1)
    if off_ok.numel():
        cat = Category.EFFICIENCY if on_ok.numel() else Category.HALLUCINATION
        return _shortest(off_ok, lengths), cat
    if on_ok.numel() and bool((~correct & tools_off).any()):
        return _shortest(on_ok, lengths), Category.CAPABILITY
    return -1, Category.NONE


def teacher_mask(batch: RolloutBatch, threshold: float = 1.0) -> tuple[Tensor, Tensor]:
    """Loss mask of each group's teacher row (tool tokens already 0), and per-row category.

    -> ([B, T] float, [B] long). Correct = EM ≥ 1 (`correct`, else reward ≥ threshold).
    """
    ok = correctness(batch, threshold)
    off = _tools_off(batch)
    lengths = _lengths(batch)
    mask = torch.zeros_like(batch.mask)
    category = torch.zeros(batch.batch_size, dtype=torch.long, device=mask.device)
    for g in torch.unique(batch.group_id).tolist():
        rows = torch.nonzero(batch.group_id == g).squeeze(1)
        local, cat = select_teacher(ok[rows], off[rows], lengths[rows])
        category[rows] = int(cat)
        if local >= 0:
            mask[rows[local]] = batch.mask[rows[local]]
    return mask, category


def _tools_off(batch: RolloutBatch) -> Tensor:
    if batch.path is None:
        return torch.zeros(batch.batch_size, dtype=torch.bool, device=batch.reward.device)
    return batch.path == int(Path.TOOLS_OFF)


def _lengths(batch: RolloutBatch) -> Tensor:
    return batch.resp_len.float() if batch.resp_len is not None else batch.num_model_tokens()


class DualPathEstimator(Estimator):
    """A base estimator on the with-tool rollouts only (no_tool_grpo_weight = 0: no-tool rows
    are out of the PG term via `policy_mask`), plus the teacher tokens for the SDPO
    regulariser in aux["teacher_mask"]."""

    def __init__(self, base: str = "grpo", base_cfg: dict[str, Any] | None = None, threshold: float = 1.0) -> None:
        self.base = advantages.REGISTRY.get(base)(**(base_cfg or {}))
        self.threshold = threshold

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B, T] advantages (0 on tools_off rows) and teacher tokens."""
        on = torch.nonzero(~_tools_off(batch)).squeeze(1)
        adv = torch.zeros_like(batch.mask)
        if on.numel():
            sub = self.base.compute(batch.select(on), state)
            adv[on] = sub.advantages
        mask, category = teacher_mask(batch, self.threshold)
        policy_mask = batch.mask * (~_tools_off(batch)).unsqueeze(1)
        aux = {"teacher_mask": mask, "akbe_category": category}
        return AdvOut(adv, policy_mask=policy_mask, aux=aux)


def sdpo_nll(logp: Tensor, teacher_mask: Tensor, tau_sd: float = TAU_SD, **_: object) -> Tensor:
    """−τ_sd·logπ_θ(y_t) on teacher tokens. [B, T] -> [B, T].

    The learner's logp must be computed at temperature τ_sd (1.0 by default).
    """
    return -tau_sd * logp * teacher_mask


def nonempty_seq_mean_token_mean(
    loss_mat: Tensor, mask: Tensor, counts: GlobalCounts | None = None, **_: object
) -> Tensor:
    """Mean over rows with any mask of the per-row token mean (0 if none). [B, T] -> [].

    counts.num_seqs (from `Algorithm.global_counts`) replaces the local row count.
    """
    lengths = mask.sum(dim=1)
    rows = float((lengths > 0).sum()) if counts is None else counts.num_seqs
    per_row = (loss_mat * mask).sum(dim=1) / lengths.clamp(min=1)
    return per_row.sum() / max(rows, 1.0)


advantages.REGISTRY.register("akbe", DualPathEstimator)
regularizers.REGISTRY.register(
    "sdpo_nll",
    Regularizer(sdpo_nll, ("logp", "teacher_mask"), mask_key="teacher_mask", description="AKBE SDPO"),
)
aggregators.REGISTRY.register("nonempty-seq-mean-token-mean", nonempty_seq_mean_token_mean)

register_preset(
    MethodPreset(
        name="akbe",
        advantage=PluginRef("akbe", {"base": "grpo"}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.28}),
        aggregator=PluginRef("token-mean"),
        regularizers=(RegularizerRef("sdpo_nll", W_SD, {"tau_sd": TAU_SD}, "nonempty-seq-mean-token-mean"),),
        rollout=RolloutSpec("dual_path", 16, {"n_tools_off": 8}),
        hparams={"lr": 1e-6},
        paper="Efficient Agentic RL with On-Policy Intrinsic Knowledge Boundary Enhancement (AKBE)",
        arxiv="2605.26952",
        evidence="[CODE] teacher selection, SDPO loss, w_sd 0.05, n 16 + 8 no-tool; "
        "base estimator GRPO instead of the script's igpo (another paper); clip/lr [PRIOR]",
        tier="A",
    )
)
