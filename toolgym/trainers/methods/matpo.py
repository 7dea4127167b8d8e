"""MATPO: planner and worker roles in one model; credit flows from the planner's outcome.

Paper arXiv 2510.04678. Evidence [CODE] mzf666/MATPO `verl/workers/reward_manager/subagent_tool.py`,
`ray_trainer.py` (sub-agent rollouts), `protocol.py::broadcast_dataproto_by_uid`, `agg_loss`.

Env side: for each planner tool call to the worker tool (`worker_calls`), the rollout loop runs
a worker sub-episode (its own context, the subtask as prompt) and then calls
`attach_worker_rollouts(planner_batch, worker_batch, parent_rows)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor

from toolgym.trainers import advantages, rewards
from toolgym.trainers.advantages import AdvOut, Estimator, broadcast, grpo_outcome
from toolgym.trainers.algorithms.preset import MethodPreset, PluginRef, RolloutSpec, register_preset
from toolgym.trainers.batch import Role, RolloutBatch, concat

W_ACC, W_FMT = 1.0, 0.1  # combined = w_acc·acc + w_fmt·0.5·(fmt_planner + mean fmt_worker) [CODE]


def worker_calls(batch: RolloutBatch, worker_tool: str = "worker") -> list[tuple[int, int, str]]:
    """(planner row, call index, subtask) for every planner call to the worker tool.

    The subtask is the call's "subtask" (or "task", or "query") argument, else its JSON args.
    """
    out = []
    for row, calls in enumerate(batch.tool_calls or []):
        for j, call in enumerate(calls):
            if call.name == worker_tool:
                args = call.arguments
                task = args.get("subtask") or args.get("task") or args.get("query") or str(args)
                out.append((row, j, str(task)))
    return out


def attach_worker_rollouts(planner: RolloutBatch, workers: RolloutBatch, parent_rows: Sequence[int]) -> RolloutBatch:
    """Planner rows then worker rows; workers take their parent's group_id and sample_id link.

    planner [B_p, T], workers [B_w, T'], parent_rows [B_w] (planner row of each worker).
    """
    if len(parent_rows) != workers.batch_size:
        raise ValueError("one parent row per worker rollout is needed")
    dev = planner.group_id.device
    sample_id = planner.sample_id if planner.sample_id is not None else torch.arange(planner.batch_size, device=dev)
    parents = torch.as_tensor(list(parent_rows), dtype=torch.long, device=dev)
    planner = planner.replace(
        sample_id=sample_id,
        parent_id=torch.full((planner.batch_size,), -1, dtype=torch.long, device=dev),
        role=torch.full((planner.batch_size,), int(Role.PLANNER), dtype=torch.long, device=dev),
    )
    workers = workers.to(dev).replace(
        group_id=planner.group_id[parents],
        parent_id=sample_id[parents],
        sample_id=sample_id.max() + 1 + torch.arange(workers.batch_size, device=dev),
        role=torch.full((workers.batch_size,), int(Role.WORKER), dtype=torch.long, device=dev),
        prompt_key=None if planner.prompt_key is None else planner.prompt_key[parents],
    )
    return concat([planner, _align_optional(workers, planner)])


def _align_optional(workers: RolloutBatch, planner: RolloutBatch) -> RolloutBatch:
    # concat needs the same optional fields set; fill worker gaps with neutral values
    changes: dict[str, Any] = {}
    for name in ("correct", "truncated", "num_tool_calls", "num_turns", "resp_len"):
        if getattr(planner, name) is not None and getattr(workers, name) is None:
            ref = getattr(planner, name)
            changes[name] = torch.zeros(workers.batch_size, dtype=ref.dtype, device=ref.device)
    dev = workers.reward.device
    comps = {k: torch.zeros(workers.batch_size, device=dev) for k in planner.reward_components}
    changes["reward_components"] = {**comps, **workers.reward_components}
    return workers.replace(**changes)


def _roles(batch: RolloutBatch) -> Tensor:
    if batch.role is None:
        return torch.full((batch.batch_size,), int(Role.PLANNER), device=batch.reward.device)
    return batch.role


class PlannerRewardBroadcast:
    """combined = w_acc·acc + w_fmt·½(fmt_planner + mean_j fmt_worker_j), copied to workers.

    acc and fmt come from reward_components (acc falls back to `correct`/reward; a missing fmt
    counts as 1.0, and a planner without workers uses its own fmt) [assumption, see notes].
    """

    requires: ClassVar[frozenset[str]] = frozenset({"reward", "role", "parent_id"})

    def __init__(self, w_acc: float = W_ACC, w_fmt: float = W_FMT, acc_key: str = "acc", fmt_key: str = "fmt") -> None:
        self.w_acc, self.w_fmt, self.acc_key, self.fmt_key = w_acc, w_fmt, acc_key, fmt_key

    def __call__(self, batch: RolloutBatch) -> RolloutBatch:
        """reward [B] <- planner combined reward, broadcast to each worker row."""
        acc = batch.reward_components.get(self.acc_key)
        acc = rewards.correctness(batch).float() if acc is None else acc.float()
        fmt = batch.reward_components.get(self.fmt_key, torch.ones_like(batch.reward)).float()
        roles, ids = _roles(batch), _sample_ids(batch)
        parent = batch.parent_id if batch.parent_id is not None else torch.full_like(ids, -1)
        reward = batch.reward.float().clone()
        for i in torch.nonzero(roles != int(Role.WORKER)).squeeze(1).tolist():
            kids = (parent == ids[i]) & (roles == int(Role.WORKER))
            worker_fmt = fmt[kids].mean() if kids.any() else fmt[i]
            reward[i] = self.w_acc * acc[i] + self.w_fmt * 0.5 * (fmt[i] + worker_fmt)
            reward[kids] = reward[i]
        return batch.replace(reward=reward, reward_components={**batch.reward_components, "matpo_combined": reward})


def _sample_ids(batch: RolloutBatch) -> Tensor:
    if batch.sample_id is not None:
        return batch.sample_id
    return torch.arange(batch.batch_size, device=batch.reward.device)


class UidGroupZ(Estimator):
    """GRPO statistics over every row sharing the uid, planner and worker copies together.

    include_workers=False takes worker rows out of the PG term (`include_subagent_tool_rollout_in_loss`).
    rescale_seq_mean=True weights tokens by B/#planner rows, MATPO's rescale of seq-mean losses.
    """

    def __init__(self, include_workers: bool = True, rescale_seq_mean: bool = False, eps: float = 1e-6) -> None:
        self.include_workers, self.rescale, self.eps = include_workers, rescale_seq_mean, eps

    def compute(self, batch: RolloutBatch, state: dict[str, Any]) -> AdvOut:
        """[B] broadcast rewards -> [B, T] advantages."""
        adv = grpo_outcome(batch.reward.float(), batch.group_id, eps=self.eps)
        workers = _roles(batch) == int(Role.WORKER)
        out = AdvOut(broadcast(adv, batch.mask))
        if not self.include_workers:
            out.advantages = out.advantages * (~workers).unsqueeze(1)
            out.policy_mask = batch.mask * (~workers).unsqueeze(1)
        if self.rescale:
            planners = max(int((~workers).sum()), 1)
            out.token_weights = torch.full_like(out.advantages, batch.batch_size / planners)
        return out


rewards.REGISTRY.register("matpo_reward", PlannerRewardBroadcast)
advantages.REGISTRY.register("matpo", UidGroupZ)

register_preset(
    MethodPreset(
        name="matpo",
        advantage=PluginRef("matpo", {"include_workers": True}),
        loss=PluginRef("ppo_clip", {"clip_low": 0.2, "clip_high": 0.28}),
        aggregator=PluginRef("token-mean"),
        reward_transforms=(PluginRef("matpo_reward", {"w_acc": W_ACC, "w_fmt": W_FMT}),),
        rollout=RolloutSpec("planner_worker", 8, {"worker_tool": "worker"}),
        hparams={"lr": 1e-6},
        paper="MATPO: Multi-Agent Tool-Integrated Policy Optimization",
        arxiv="2510.04678",
        evidence="[CODE] worker reward broadcast, uid grouping, reward weights 1.0/0.1; "
        "[PRIOR] paper normalizer; clip 0.2/0.28 and lr assumed [PRIOR]",
        tier="A",
        notes="Missing fmt component counts as 1.0 (assumption). Use attach_worker_rollouts.",
    )
)
