"""Hand-computed values for the experimental Tier C prototypes: ELPO, VPO, CAPO, APO, POISE."""

from __future__ import annotations

import math

import pytest
import torch

from toolgym.trainers.methods import REGISTRY, build_algorithm
from toolgym.trainers.methods.tier_c.apo import anchored_weights, in_support
from toolgym.trainers.methods.tier_c.capo import curvature_mask
from toolgym.trainers.methods.tier_c.elpo import critical_clip_delta, hierarchical_advantage
from toolgym.trainers.methods.tier_c.poise import fit_ridge, paired_rows
from toolgym.trainers.methods.tier_c.vpo import argmax_credit


def test_tier_c_presets_are_experimental() -> None:
    for name in ("elpo", "vpo", "capo", "apo", "poise"):
        preset = REGISTRY.get(name)
        assert preset.tier == "C" and preset.experimental


def test_elpo_hierarchical_advantage() -> None:
    reward = torch.tensor([0.0, 1.0, 1.0, 0.0])
    group = torch.zeros(4, dtype=torch.long)
    # rows 2, 3 are forks of row 0 at the same point: branch set {0, 2, 3} = [0, 1, 0]
    adv = hierarchical_advantage(
        reward, group, torch.arange(4), torch.tensor([-1, -1, 0, 0]), torch.tensor([-1, -1, 5, 5])
    )
    a_global = [-0.866, 0.866, 0.866, -0.866]
    assert adv.tolist() == pytest.approx(
        [a_global[0], a_global[1], a_global[2] + 1.1547, a_global[3] - 0.5774], abs=1e-3
    )


def test_elpo_critical_clip_widens_only_the_suffix() -> None:
    adv = torch.ones(1, 3)
    logp = torch.log(torch.full((1, 3), 1.3))  # r = 1.3: outside 1 ± 0.2, inside 1 ± 0.4
    delta = critical_clip_delta(logp, torch.zeros(1, 3), adv, torch.ones(1, 3), torch.tensor([[0.0, 1.0, 1.0]]))
    # −min(1.3, 1.4) − (−min(1.3, 1.2)) = −0.1 on critical tokens
    assert delta[0].tolist() == pytest.approx([0.0, -0.1, -0.1], abs=1e-6)


def test_elpo_estimator_reads_critical_turn(batch_factory) -> None:
    turns = torch.tensor([[-1, 0, 0, 1, 1]])
    b = batch_factory([0.0], [0], t=5, turn_idx=turns, reward_components={"elpo_critical_turn": torch.tensor([1.0])})
    out = build_algorithm("elpo").advantages(b, {})
    assert out.aux["critical_mask"][0].tolist() == [0, 0, 0, 1, 1]


def test_vpo_argmax_credit() -> None:
    vectors = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.4, 0.4]])
    weights = torch.tensor([[0.9, 0.1], [0.2, 0.8]])
    credit = argmax_credit(vectors, torch.zeros(3, dtype=torch.long), weights)
    assert credit.tolist() == pytest.approx([0.5, 0.5, 0.0])  # the compromise is never best here


def test_vpo_preset_builds_vector(batch_factory) -> None:
    b = batch_factory([1.0, 0.0], [0, 0], num_tool_calls=torch.tensor([1, 0]))
    algo = build_algorithm("vpo")
    b = algo.transform_rewards(b)
    assert b.reward_vector.tolist() == [[1.0, 0.5, 1.0], [0.0, 1.0, 1.0]]
    adv = algo.advantages(b, {}).advantages
    assert torch.isfinite(adv).all() and adv.abs().sum() > 0


def test_capo_masks_the_largest_predicted_contributions() -> None:
    score = torch.tensor([[0.1, 0.9, 0.2, 0.3, 0.8], [0.0, 0.5, 0.4, 0.6, 0.7]])
    keep = curvature_mask(score, torch.ones(2, 5), reject_frac=0.2)
    assert keep.tolist() == [[1, 0, 1, 1, 0], [1, 1, 1, 1, 1]]


def test_capo_preset_sets_token_weights(batch_factory) -> None:
    b = batch_factory([1.0, 0.0] * 5, [0, 0] * 5, t=3, old_logprobs=torch.full((10, 3), -1.0))
    out = build_algorithm("capo").advantages(b, {})
    assert int(((out.token_weights == 0) & (b.mask > 0)).sum()) == 1  # floor(20 model tokens × 0.08)


def test_apo_support_and_rectification() -> None:
    ids = torch.tensor([[3, 5, 7]])
    topk = torch.tensor([[[3, 4], [1, 2], [7, 0]]])
    support = in_support(ids, topk)
    assert support.tolist() == [[1.0, 0.0, 1.0]]
    w = anchored_weights(torch.tensor([[-1.0, -1.0, 1.0]]), support, push=1.0)
    assert w.tolist() == [[0.0, 1.0, 1.0]]  # negative in support: not pushed


def test_apo_preset_pull_mask(batch_factory) -> None:
    b = batch_factory([1.0, 0.0], [0, 0], t=3, ref_topk_ids=torch.zeros(2, 3, 2, dtype=torch.long))
    out = build_algorithm("apo").advantages(b, {})
    assert out.aux["pull_mask"].tolist() == [[0, 0, 0], [0, 1, 1]]  # wrong row, in-support tokens


def test_poise_probe_and_pairs(batch_factory) -> None:
    assert paired_rows(torch.tensor([0, 0, 1, 1, 1, 2])).tolist() == [1, 0, 3, 4, 2, 5]
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert fit_ridge(x, x @ torch.tensor([2.0, -1.0]), ridge=1e-6).tolist() == pytest.approx([2.0, -1.0], abs=1e-4)
    algo = build_algorithm("poise")
    state: dict = {}
    b = batch_factory([1.0, 0.0], [0, 0], hidden_pool=torch.tensor([[1.0], [0.0]]))
    assert algo.advantages(b, state).advantages[:, 1].tolist() == [1.0, 0.0]  # no probe yet: V = 0
    algo.update_state(b, state)
    v = algo.advantages(b, state).aux["poise_value"]
    # the probe fits R ≈ h; row 0's baseline comes from row 1's features (h = 0) and vice versa
    assert v[0].item() == pytest.approx(0.0, abs=0.05) and v[1].item() == pytest.approx(1.0, abs=0.05)


def test_apo_pull_is_k3_on_pull_tokens_only() -> None:
    from toolgym.trainers.methods.tier_c.apo import support_pull

    logp = torch.log(torch.tensor([[0.5, 0.5]]))
    ref = torch.zeros(1, 2)  # Δ = log 0.5 → k3 = 2 + ln 0.5 − 1
    term = support_pull(logp, ref, torch.ones(1, 2), torch.tensor([[1.0, 0.0]]))
    assert term[0].tolist() == pytest.approx([1.0 + math.log(0.5), 0.0], abs=1e-6)
