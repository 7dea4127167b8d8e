"""The learner: SFT lowers the NLL, an RL step moves the policy, zero-advantage groups are dropped, checkpoints."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from toolgym.trainers.learner import Learner, LearnerConfig  # noqa: E402
from toolgym.trainers.methods import build_algorithm  # noqa: E402
from toolgym.trainers.rollouts.to_batch import episodes_to_batch  # noqa: E402
from toolgym.trainers.tiny import TINY_FORMAT, load_tiny  # noqa: E402
from toolgym.trainers.tiny.sft import oracle_episodes  # noqa: E402

ENV = "toolgym/Calculator-v0"
GRPO = {"aggregator": "token-mean", "regularizers": {"kl_k3": None}}


@pytest.fixture()
def fresh(tiny_path):
    model, tokenizer = load_tiny(tiny_path)
    return model, tokenizer


def _rl_batch(tokenizer, rewards):
    episodes = oracle_episodes(ENV, [7, 7, 8, 8], tokenizer, TINY_FORMAT)
    for ep, reward in zip(episodes, rewards, strict=True):
        ep.rewards = [0.0] * (len(ep.rewards) - 1) + [reward]
        ep.logprobs = [-1.0 if m else 0.0 for m in ep.loss_mask]
    return episodes_to_batch(episodes, tokenizer.pad_token_id)


def test_sft_step_lowers_the_loss(fresh):
    model, tokenizer = fresh
    learner = Learner(model, None, LearnerConfig(lr=1e-3))
    batch = episodes_to_batch(oracle_episodes(ENV, range(16), tokenizer, TINY_FORMAT), tokenizer.pad_token_id)
    losses = [learner.sft_step(batch)["sft/loss"] for _ in range(5)]
    assert losses[-1] < losses[0]


def test_rl_step_updates_the_policy(fresh):
    model, tokenizer = fresh
    before = copy.deepcopy(model.state_dict())
    learner = Learner(model, build_algorithm("grpo", GRPO), LearnerConfig(lr=1e-3))
    metrics = learner.rl_step(_rl_batch(tokenizer, [1.0, 0.0, 0.0, 1.0]))
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
    assert metrics["rollout/kept_fraction"] == 1.0 and "losses/policy" in metrics and "losses/entropy" in metrics
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed and learner.version == 1


def test_gradient_norm_is_measured_without_clipping(fresh):
    model, tokenizer = fresh
    batch = _rl_batch(tokenizer, [1.0, 0.0, 0.0, 1.0])
    unclipped = Learner(copy.deepcopy(model), build_algorithm("grpo", GRPO), LearnerConfig(lr=1e-3, max_grad_norm=0.0))
    norm = unclipped.rl_step(batch)["losses/grad_norm"]
    clipped = Learner(
        copy.deepcopy(model), build_algorithm("grpo", GRPO), LearnerConfig(lr=1e-3, max_grad_norm=norm / 10)
    )
    assert norm > 0 and clipped.rl_step(batch)["losses/grad_norm"] == pytest.approx(norm, rel=1e-4)  # pre-clip norm


def test_groups_without_signal_are_dropped(fresh):
    model, tokenizer = fresh
    before = copy.deepcopy(model.state_dict())
    learner = Learner(model, build_algorithm("grpo", GRPO), LearnerConfig(lr=1e-3))
    metrics = learner.rl_step(_rl_batch(tokenizer, [1.0, 1.0, 0.0, 0.0]))
    assert metrics["rollout/kept_fraction"] == 0.0 and metrics["losses/skipped"] == 1.0
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    metrics = learner.rl_step(_rl_batch(tokenizer, [1.0, 0.0, 0.0, 0.0]))
    assert metrics["rollout/kept_fraction"] == 0.5


def test_checkpoint_roundtrip(fresh, tmp_path):
    model, tokenizer = fresh
    learner = Learner(model, build_algorithm("grpo", GRPO), LearnerConfig(lr=1e-3))
    learner.rl_step(_rl_batch(tokenizer, [1.0, 0.0, 1.0, 0.0]))
    learner.save(tmp_path / "ckpt", tokenizer, {"step": 1})
    other_model, _ = load_tiny(tmp_path / "ckpt")
    restored = Learner(copy.deepcopy(other_model), build_algorithm("grpo", GRPO), LearnerConfig(lr=1e-3))
    assert restored.load(tmp_path / "ckpt") == {"step": 1}
    assert restored.version == learner.version == 1
    for key, value in learner.model.state_dict().items():
        assert torch.equal(value, restored.model.state_dict()[key])
    assert restored.optimizer.state_dict()["state"].keys() == learner.optimizer.state_dict()["state"].keys()


def test_length_sorted_micro_batches_give_the_same_update(fresh):
    from toolgym.trainers.learner import micro_batches

    model, tokenizer = fresh
    lengths = torch.tensor([5, 50, 7, 48, 6])
    groups = micro_batches(lengths, max_rows=8, max_tokens=100)
    assert sorted(int(i) for g in groups for i in g) == [0, 1, 2, 3, 4]
    assert all(len(g) * int(lengths[g].max()) <= 100 or len(g) == 1 for g in groups)
    batch = _rl_batch(tokenizer, [1.0, 0.0, 0.0, 1.0])
    updated = []
    for tokens in (10_000, 1):  # one micro-batch vs one row per micro-batch (trimmed to its own length)
        learner = Learner(
            copy.deepcopy(model), build_algorithm("grpo", GRPO), LearnerConfig(lr=1e-3, micro_batch_tokens=tokens)
        )
        learner.rl_step(batch)
        updated.append(learner.model.state_dict())
    for key, value in updated[0].items():
        assert torch.allclose(value, updated[1][key], atol=1e-6), key
