"""RolloutBatch helpers, registries, presets and overrides."""

from __future__ import annotations

import pytest
import torch

from toolgym.trainers import advantages, aggregators, losses, regularizers, rewards, samplers
from toolgym.trainers.batch import RolloutBatch, concat, last_token_index, stable_key, turn_spans
from toolgym.trainers.methods import REGISTRY, build_algorithm, resolve_preset


def test_select_indexes_tensors_lists_and_components(batch_factory):
    b = batch_factory(
        [[0, 1, 1], [0, 1, 0], [0, 0, 1]],
        [1.0, 0.0, 0.5],
        [7, 7, 9],
        answers=["a", "b", "c"],
        reward_components={"acc": torch.tensor([1.0, 0.0, 1.0])},
    )
    s = b.select([2, 0])
    assert s.batch_size == 2
    assert s.reward.tolist() == [0.5, 1.0]
    assert s.group_id.tolist() == [9, 7]
    assert s.answers == ["c", "a"]
    assert s.reward_components["acc"].tolist() == [1.0, 1.0]
    assert s.loss_mask.tolist() == [[0, 0, 1], [0, 1, 1]]
    assert b.batch_size == 3  # input untouched


def test_batch_rejects_wrong_shapes():
    with pytest.raises(ValueError, match="loss_mask"):
        RolloutBatch(
            input_ids=torch.zeros(2, 3, dtype=torch.long),
            attention_mask=torch.ones(2, 3),
            loss_mask=torch.ones(2, 4),
            reward=torch.zeros(2),
            group_id=torch.zeros(2, dtype=torch.long),
        )


def test_concat_pads_to_longest(batch_factory):
    a = batch_factory([[0, 1]], [1.0], [0], turn_idx=torch.tensor([[-1, 0]]))
    b = batch_factory([[0, 1, 1]], [0.0], [1], turn_idx=torch.tensor([[-1, 0, 0]]))
    c = concat([a, b])
    assert c.loss_mask.tolist() == [[0, 1, 0], [0, 1, 1]]
    assert c.turn_idx.tolist() == [[-1, 0, -1], [-1, 0, 0]]
    assert c.reward.tolist() == [1.0, 0.0]


def test_concat_refuses_half_set_fields(batch_factory):
    a = batch_factory([[0, 1]], [1.0], [0], answers=["x"])
    b = batch_factory([[0, 1]], [1.0], [0])
    with pytest.raises(ValueError, match="answers"):
        concat([a, b])


def test_turn_spans_and_last_token():
    mask = torch.tensor([[0, 1, 1, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0, 0]])
    assert turn_spans(mask).tolist() == [[-1, 0, 0, -1, -1, 1, -1], [-1] * 7]
    assert last_token_index(mask).tolist() == [5, -1]


def test_stable_key_is_deterministic_and_positive():
    assert stable_key("What is 2+2?") == stable_key("What is 2+2?")
    assert stable_key("a") != stable_key("b")
    assert 0 <= stable_key("a") < 2**63


def test_public_registries_list_the_required_plugins():
    assert {"grpo", "dr_grpo", "rloo", "reinforce_pp", "gae"} <= set(advantages.REGISTRY)
    assert {"ppo_clip", "gspo", "cispo"} <= set(losses.REGISTRY)
    assert {"kl_k1", "kl_k2", "kl_k3", "entropy"} <= set(regularizers.REGISTRY)
    assert {
        "token-mean",
        "seq-mean-token-mean",
        "seq-mean-token-sum",
        "seq-mean-token-sum-norm",
        "only-token-mean",
    } <= set(aggregators.REGISTRY)
    assert {"overlong_shaping", "signed_correctness"} <= set(rewards.REGISTRY)
    assert "dynamic_sampling" in samplers.GROUP_FILTERS


def test_unknown_name_lists_known_ones():
    with pytest.raises(KeyError, match="known: .*grpo"):
        build_algorithm("no-such-method")


@pytest.mark.parametrize("name", REGISTRY.names())
def test_every_preset_builds(name):
    algo = build_algorithm(name)
    preset = REGISTRY.get(name)
    assert algo.name == name
    assert preset.paper and preset.evidence and preset.tier
    if preset.tier in ("base", "A"):
        assert preset.arxiv


def test_overrides_dotted_and_nested():
    p = resolve_preset(
        "dapo",
        {
            "loss.clip_high": 0.3,
            "rollout": {"n": 4},
            "reward_transforms": {"overlong_shaping": {"max_len": 64, "buffer_len": 16}},
            "group_filter": None,
            "regularizers": {"kl_k3": {"coef": 0.01}},
        },
    )
    assert p.loss.cfg["clip_high"] == 0.3 and p.loss.cfg["clip_low"] == 0.2
    assert p.rollout.n == 4
    shaping = [r for r in p.reward_transforms if r.name == "overlong_shaping"][0]
    assert shaping.cfg == {"max_len": 64, "buffer_len": 16}
    assert p.group_filter is None
    assert [(r.name, r.coef) for r in p.regularizers] == [("kl_k3", 0.01)]


def test_override_switching_plugin_resets_cfg():
    p = resolve_preset("grpo", {"loss": "gspo", "regularizers": {"kl_k3": None}})
    assert p.loss.name == "gspo" and dict(p.loss.cfg) == {}
    assert p.regularizers == ()
    with pytest.raises(KeyError, match="unknown override"):
        resolve_preset("grpo", {"lossy": 1})


def test_select_accepts_a_bool_mask(batch_factory):
    b = batch_factory([[1], [1], [1]], [1.0, 2.0, 3.0], [0, 0, 1])
    assert b.select(torch.tensor([True, False, True])).reward.tolist() == [1.0, 3.0]
    assert b.select([]).batch_size == 0
