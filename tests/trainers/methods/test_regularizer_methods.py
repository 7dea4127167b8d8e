"""Hand-computed LLDS, SAPO-search and VSPO loss terms, and their gradients."""

from __future__ import annotations

import math

import pytest
import torch

from toolgym.trainers.methods import build_algorithm
from toolgym.trainers.methods.tier_b.llds import llds_term
from toolgym.trainers.methods.tier_b.sapo_search import conditional_kl
from toolgym.trainers.methods.tier_b.vspo import smooth_clip


def test_llds_trajectory_gate_by_hand() -> None:
    old = torch.full((3, 2), -1.0)
    logp = torch.tensor([[-1.5, -0.8], [-1.5, -0.8], [-0.5, -1.2]], requires_grad=True)
    adv = torch.tensor([[1.0, 1.0], [-1.0, -1.0], [1.0, 1.0]])
    term = llds_term(logp, old, adv, torch.ones(3, 2))
    # row 0: A ≥ 0, total likelihood fell (0.5 − 0.2 > 0) → hinge [0.5, 0]; row 1: A < 0; row 2: rose
    assert term.flatten().tolist() == pytest.approx([0.5, 0.0, 0.0, 0.0, 0.0, 0.0])
    term.sum().backward()
    assert logp.grad.tolist() == [[-1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]


def test_llds_action_gate() -> None:
    old = torch.full((1, 4), -1.0)
    logp = torch.tensor([[-1.5, -1.0, -0.8, -1.0]])
    turns = torch.tensor([[0, 0, 1, 1]])
    term = llds_term(logp, old, torch.ones(1, 4), torch.ones(1, 4), turn_ids=turns, gate="action")
    assert term[0].tolist() == pytest.approx([0.5, 0.0, 0.0, 0.0])  # only turn 0 lost likelihood
    with pytest.raises(ValueError, match="turn_ids"):
        llds_term(logp, old, torch.ones(1, 4), torch.ones(1, 4), gate="action")


def test_llds_preset_normalizes_by_gated_rows(batch_factory) -> None:
    b = batch_factory([1.0, 0.0], [0, 0], t=3)
    algo = build_algorithm("llds")
    adv = algo.advantages(b, {})
    old = torch.full((2, 3), -1.0)
    logp = torch.tensor([[-1.0, -1.5, -1.5], [-1.0, -3.0, -3.0]])
    _, metrics = algo.loss(b.replace(old_logprobs=old), logp, adv)
    assert metrics["losses/llds"] == pytest.approx(1.0)  # only row 0 (A > 0) is gated: 0.5 + 0.5, /1 row


def test_sapo_conditional_kl_by_hand() -> None:
    old = torch.zeros(1, 3)
    logp = torch.log(torch.tensor([[0.5, 0.9, 0.5]])).requires_grad_()
    adv = torch.tensor([[1.0, 1.0, -1.0]])
    term = conditional_kl(logp, old, adv, torch.ones(1, 3), delta=0.2)
    # only token 0: A > 0 and r = 0.5 < 0.8 → (r − 1) − log r
    assert term[0].tolist() == pytest.approx([0.5 - 1 - math.log(0.5), 0.0, 0.0], abs=1e-6)
    term.sum().backward()
    assert logp.grad[0, 0].item() == pytest.approx(0.5 - 1.0)  # d/dlogp = r − 1


def test_sapo_preset_adds_beta_times_mean(batch_factory) -> None:
    b = batch_factory([1.0, 0.0], [0, 0], t=2)
    algo = build_algorithm("sapo_search")
    adv = algo.advantages(b, {})
    logp = torch.log(torch.full((2, 2), 0.5))
    _, metrics = algo.loss(b.replace(old_logprobs=torch.zeros(2, 2)), logp, adv)
    # one trainable token per row; only row 0 (A > 0, r = .5) counts, token-mean over 2 tokens
    assert metrics["losses/sapo_cond_kl"] == pytest.approx((0.5 - 1 - math.log(0.5)) / 2, abs=1e-6)


def test_vspo_smooth_clip() -> None:
    adv = torch.tensor([[2.0, 2.0]])
    logp = torch.tensor([[0.0, math.log(3.0)]], requires_grad=True)
    loss = smooth_clip(logp, torch.zeros(1, 2), adv, torch.ones(1, 2), clip=0.2)
    assert loss[0, 0].item() == pytest.approx(-2.0)  # r = 1 → −A
    assert loss[0, 1].item() == pytest.approx(-2.0 * (1 + 0.2 * math.tanh(2 / 0.2)), abs=1e-6)  # saturated
    loss.sum().backward()
    assert logp.grad[0, 0].item() == pytest.approx(-2.0)  # −A·r·sech²(0) at r = 1
