"""CPU training smoke test of every Tier B/C method on a tiny random-init Qwen2 model.

The batch is made of real `toolgym/Calculator-v0` episodes (scripted policy, run through each
method's rollout strategy, so EAPO/AXPO/ELPO/ToolExpander batches contain their tools-off rows and
forks). Each method then runs its whole learner path — reward transforms, group filter,
advantages, loss with regularizers, two optimizer steps, state update — and must change the
parameters while keeping the loss finite.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import gymnasium as gym
import pytest
import torch

import toolgym  # noqa: F401  (registers the env ids)
from toolgym.trainers.batch import RolloutBatch
from toolgym.trainers.methods import REGISTRY, build_algorithm
from toolgym.trainers.methods.strategies import ForkRunner, make_strategy, run_group
from toolgym.trainers.methods.trace_batch import TraceFormat, traces_to_batch
from toolgym.trainers.tiny import TINY_FORMAT

METHODS = sorted(name for name in REGISTRY.names() if REGISTRY.get(name).tier in ("B", "C"))


def method_batch(name: str, policy_cls: Any, tokenizer: Any) -> RolloutBatch:
    """Two groups of 4 Calculator episodes through the method's strategy: group 0 half wrong, group 1 all wrong."""
    strategy = make_strategy(dict(REGISTRY.get(name).rollout.options))
    traces = []
    for gid, policy in enumerate((policy_cls(wrong_calls={3, 4}), policy_cls(n_wrong=4))):
        run = ForkRunner(lambda: gym.make("toolgym/Calculator-v0"), policy, max_turns=3)
        traces += run_group(run, strategy, seed=100 + gid, group_id=gid, n=4)
    encode = lambda text: list(tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    return traces_to_batch(traces, encode, TraceFormat.of(TINY_FORMAT), pad_id=tokenizer.pad_token_id)


def token_logprobs(model: Any, batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """log π(input_ids[:, t] | prefix) aligned with input_ids (0 at t=0), and pooled hidden states."""
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_hidden_states=True)
    logp_all = torch.log_softmax(out.logits[:, :-1].float(), dim=-1)  # [B, T-1, V]
    logp = logp_all.gather(2, batch.input_ids[:, 1:, None]).squeeze(2)
    m = batch.mask.unsqueeze(2)
    pooled = (out.hidden_states[-1] * m).sum(1) / m.sum(1).clamp(min=1)
    return torch.nn.functional.pad(logp, (1, 0)) * batch.mask, pooled


def fill_learner_fields(model: Any, batch: RolloutBatch) -> RolloutBatch:
    """What the learner fills before the update: old/ref/behaviour logprobs, values, hidden pool, ref top-K."""
    with torch.no_grad():
        logp, pooled = token_logprobs(model, batch)
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        topk = torch.nn.functional.pad(logits[:, :-1].topk(8, dim=-1).indices, (0, 0, 1, 0))
    return batch.replace(
        old_logprobs=logp,
        rollout_logprobs=logp,
        ref_logprobs=logp,
        values=torch.zeros_like(logp),
        hidden_pool=pooled,
        ref_topk_ids=topk,
        policy_version=torch.zeros(batch.batch_size, dtype=torch.long),
    )


@pytest.mark.parametrize("name", METHODS)
def test_method_trains_tiny_model(name: str, tiny_small: Any, ScriptedCalculatorPolicy: Any) -> None:
    tokenizer, model = tiny_small[0], copy.deepcopy(tiny_small[1])
    before = [p.detach().clone() for p in model.parameters()]
    algo = build_algorithm(name, {"hparams": {"lr": 1e-2}})
    state = algo.init_state()
    step_meta = {"step": 30, "policy_version": 0}  # the learner's step counter and policy version
    batch = algo.transform_rewards(method_batch(name, ScriptedCalculatorPolicy, tokenizer).replace(meta=step_meta))
    batch, _ = algo.filter_groups(batch)
    assert batch.batch_size > 0
    batch = fill_learner_fields(model, batch)
    adv = algo.advantages(batch, state)
    assert torch.isfinite(adv.advantages).all() and adv.advantages.abs().sum() > 0
    opt = torch.optim.Adam(model.parameters(), lr=algo.hparams["lr"])
    for _ in range(2):
        logp, _ = token_logprobs(model, batch)
        loss, metrics = algo.loss(batch, logp, adv)
        assert torch.isfinite(loss), metrics
        opt.zero_grad()
        loss.backward()
        opt.step()
    algo.update_state(batch, state, token_logprobs(model, batch)[0].detach())
    changed = sum(not torch.equal(a, p.detach()) for a, p in zip(before, model.parameters(), strict=True))
    assert changed > 0


@pytest.mark.parametrize("name", ["eapo", "axpo", "hispo", "vspo"])
def test_method_through_the_project_learner(name: str, tiny_small: Any, ScriptedCalculatorPolicy: Any) -> None:
    """The same batches through `toolgym.trainers.learner.Learner.rl_step` (what `toolgym train` runs)."""
    from toolgym.trainers.learner import Learner, LearnerConfig

    tokenizer, model = tiny_small[0], copy.deepcopy(tiny_small[1])
    before = [p.detach().clone() for p in model.parameters()]
    learner = Learner(model, build_algorithm(name), LearnerConfig(lr=1e-2, max_grad_norm=0.0))
    batch = method_batch(name, ScriptedCalculatorPolicy, tokenizer)
    with torch.no_grad():
        logp, _ = token_logprobs(model, batch)
    batch = batch.replace(
        rollout_logprobs=logp,
        policy_version=torch.zeros(batch.batch_size, dtype=torch.long),
        meta={"step": 30, "policy_version": 0},
    )
    metrics = learner.rl_step(batch)
    assert "losses/skipped" not in metrics and math.isfinite(metrics["losses/total"])
    assert any(not torch.equal(a, p.detach()) for a, p in zip(before, model.parameters(), strict=True))
