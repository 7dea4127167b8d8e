"""Every method preset in the registry trains one step through the project `Learner.rl_step`.

Batches are real `toolgym/Calculator-v0` episodes from a scripted policy, run through each
preset's rollout strategy (tools-off rows, forks); the learner fills what the method needs
(π_old, π_ref, critic values, pooled states, ref top-K) and must change the policy with a finite loss.
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
from toolgym.trainers.learner import Learner, LearnerConfig, token_logprobs
from toolgym.trainers.methods import REGISTRY, build_algorithm
from toolgym.trainers.methods.strategies import ForkRunner, make_strategy, run_group
from toolgym.trainers.methods.trace_batch import TraceFormat, traces_to_batch
from toolgym.trainers.tiny import TINY_FORMAT

PRESETS = sorted(REGISTRY.names())
TAGGED_FORMAT = {"autotir", "tapo"}  # rewards read <think>/<answer> tags, not the Calculator's tool-call format


def preset_batch(name: str, policy_cls: Any, tokenizer: Any, model: Any) -> RolloutBatch:
    """Two groups of 4 Calculator episodes through the preset's strategy, with behaviour log-probs."""
    strategy = make_strategy(dict(REGISTRY.get(name).rollout.options))
    traces = []
    for gid, policy in enumerate((policy_cls(wrong_calls={3, 4}), policy_cls(n_wrong=4))):
        run = ForkRunner(lambda: gym.make("toolgym/Calculator-v0"), policy, max_turns=3)
        traces += run_group(run, strategy, seed=100 + gid, group_id=gid, n=4)
    encode = lambda text: list(tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    batch = traces_to_batch(traces, encode, TraceFormat.of(TINY_FORMAT), pad_id=tokenizer.pad_token_id)
    if name in TAGGED_FORMAT:
        batch = batch.replace(response_text=tagged_responses(batch, boxed=name == "autotir"))
    with torch.no_grad():
        logp = token_logprobs(model, batch)[0] * batch.mask
    return batch.replace(
        rollout_logprobs=logp,
        policy_version=torch.zeros(batch.batch_size, dtype=torch.long),
        meta={"step": 30, "policy_version": 0},
    )


def tagged_responses(batch: RolloutBatch, boxed: bool) -> list[str]:
    """The traces in the <think>/<answer> tag format AutoTIR and TAPO score (their papers' search/code format)."""
    answers = [g["answer"] if ok else "0" for g, ok in zip(batch.gold, batch.correct.tolist(), strict=True)]
    wrap = (lambda a: f"\\boxed{{{a}}}") if boxed else (lambda a: a)
    return [f"<think>compute it</think><answer>{wrap(a)}</answer>" for a in answers]


def _changed(before: list[torch.Tensor], module: Any) -> bool:
    return any(not torch.equal(a, p.detach()) for a, p in zip(before, module.parameters(), strict=True))


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_trains_through_the_learner(name: str, tiny_small: Any, ScriptedCalculatorPolicy: Any) -> None:
    tokenizer, model = tiny_small[0], copy.deepcopy(tiny_small[1])
    before = [p.detach().clone() for p in model.parameters()]
    config = LearnerConfig(lr=1e-2, max_grad_norm=1.0, micro_batch_size=3)  # several micro-batches per step
    learner = Learner(model, build_algorithm(name), config)
    batch = preset_batch(name, ScriptedCalculatorPolicy, tokenizer, model)
    metrics = learner.rl_step(batch)
    assert "losses/skipped" not in metrics, metrics
    assert math.isfinite(metrics["losses/total"]), metrics
    assert _changed(before, model)
    if getattr(learner, "value_head", None) is not None:
        assert math.isfinite(metrics["losses/value"])
        assert any(p.detach().abs().sum() > 0 for p in learner.value_head.parameters())  # zero-init moved


def test_spo_updates_its_tracker_with_kl_adaptive_rho(tiny_small: Any, ScriptedCalculatorPolicy: Any) -> None:
    """SPO's default ρ re-scores stored responses with the learner's log-probs (needs `logprob_fn`)."""
    tokenizer, model = tiny_small[0], copy.deepcopy(tiny_small[1])
    learner = Learner(model, build_algorithm("spo"), LearnerConfig(lr=1e-2))
    assert learner.algorithm.preset.advantage.cfg.get("rho_type", "kl") == "kl"
    batch = preset_batch("spo", ScriptedCalculatorPolicy, tokenizer, model)
    learner.rl_step(batch)
    learner.rl_step(batch)  # second visit: ρ from the drift of the stored response
    assert learner.algo_state, "SPO's value tracker stayed empty"


def test_policy_mask_survives_micro_batches(tiny_small: Any, ScriptedCalculatorPolicy: Any) -> None:
    """AKBE's policy_mask: one micro-batch per row gives the same gradient as one big micro-batch."""
    tokenizer, base = tiny_small
    grads = []
    for rows in (1, 64):
        model = copy.deepcopy(base)
        algo = build_algorithm("akbe")
        learner = Learner(model, algo, LearnerConfig(lr=0.0, micro_batch_size=rows, max_grad_norm=0.0))
        batch = preset_batch("eapo", ScriptedCalculatorPolicy, tokenizer, model)  # tools-off rows for AKBE
        learner.rl_step(batch)
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert grads[0].abs().sum() > 0
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)


def test_value_head_is_checkpointed_with_the_policy(tiny_small: Any, ScriptedCalculatorPolicy: Any, tmp_path) -> None:
    tokenizer, model = tiny_small[0], copy.deepcopy(tiny_small[1])
    learner = Learner(model, build_algorithm("ppo"), LearnerConfig(lr=1e-2))
    learner.rl_step(preset_batch("ppo", ScriptedCalculatorPolicy, tokenizer, model))
    learner.save(tmp_path / "ckpt", tokenizer)
    other = Learner(copy.deepcopy(tiny_small[1]), build_algorithm("ppo"), LearnerConfig(lr=1e-2))
    other.load(tmp_path / "ckpt")
    for a, b in zip(learner.value_head.state_dict().values(), other.value_head.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert learner.value_head.linear.weight.abs().sum() > 0
