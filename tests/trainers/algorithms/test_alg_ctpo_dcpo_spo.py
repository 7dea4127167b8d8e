"""CTPO, DCPO and SPO against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from toolgym.trainers.methods import build_algorithm
from toolgym.trainers.methods.ctpo import ctpo_loss
from toolgym.trainers.methods.dcpo import (
    SmoothAdvStd,
    dcpo_loss,
    dynamic_clip_bounds,
    pooled_stats,
    smooth_advantage,
)
from toolgym.trainers.methods.spo import (
    PrioritySampler,
    PromptValue,
    SPOTracker,
    kl_rho,
    offline_init,
    spo_advantages,
)

T = torch.tensor


def approx(x, abs=1e-5):
    return pytest.approx(x, abs=abs)


# ------------------------------------------------------------------ CTPO

MASK = T([[1.0, 0.0, 1.0, 1.0]])  # token 1 is a tool token
DELTA = T([[0.02, 9.0, 0.03, -0.2]])  # logπ_θ − logπ_old; 9.0 must be ignored


def test_ctpo_cumprod_adaptive_clip_positive_advantage():
    loss = ctpo_loss(DELTA, torch.zeros(1, 4), torch.ones(1, 4), MASK)
    # L = [.02, .02, .05, -.15]; t' = [1,1,2,3]; last token: bound -0.025·√3 = -0.0433
    # -> max(-e^-.15, -e^-.0433) = -e^-.15
    assert loss.tolist()[0] == [
        approx(-math.exp(0.02)),
        0.0,
        approx(-math.exp(0.05)),
        approx(-math.exp(-0.15)),
    ]


def test_ctpo_negative_advantage_and_dual_clip():
    delta = T([[0.3, 9.0, 0.03, -0.2]])
    loss = ctpo_loss(delta, torch.zeros(1, 4), -torch.ones(1, 4), MASK)
    # t0: max(e^.3, e^.05) = e^.3, dual clip at e^{0.05·1} -> e^.05
    # t2: L=.33 -> max(e^.33, e^{.05√2}) = e^.33, dual e^{.05√2}
    # t3: L=.13 -> max(e^.13, e^{.05√3}) = e^.13 = 1.139 > dual e^{.05√3} = 1.090
    assert loss.tolist()[0] == [
        approx(math.exp(0.05)),
        0.0,
        approx(math.exp(0.05 * math.sqrt(2))),
        approx(math.exp(0.05 * math.sqrt(3))),
    ]


def test_ctpo_geomean_mode():
    loss = ctpo_loss(DELTA, torch.zeros(1, 4), torch.ones(1, 4), MASK, mode="geomean")
    # L/n = [.02, ., .025, -.05]; p = -0.5: last bound -0.025/√3 = -0.01443
    assert loss.tolist()[0] == [
        approx(-math.exp(0.02)),
        0.0,
        approx(-math.exp(0.025)),
        approx(-math.exp(-0.05)),
    ]


def test_ctpo_gradient_flows_only_through_the_current_token():
    logp = DELTA.clone().requires_grad_()
    ctpo_loss(logp, torch.zeros(1, 4), torch.ones(1, 4), MASK)[0, 3].backward()
    # loss_3 = -exp(sg(L_3) + logp_3 - sg(logp_3)) -> d/dlogp_3 = -e^L3, others 0
    assert logp.grad.tolist()[0] == [0.0, 0.0, 0.0, approx(-math.exp(-0.15))]


def test_ctpo_uniform_clip_when_not_adaptive():
    loss = ctpo_loss(DELTA, torch.zeros(1, 4), torch.ones(1, 4), MASK, adaptive=False)
    # bounds fixed at [-0.025, 0.05]: t2 L=.05 (at the bound), t3 -> -e^-.15 still wins
    assert loss.tolist()[0][2] == approx(-math.exp(0.05))


def test_ctpo_preset():
    algo = build_algorithm("ctpo")
    assert algo.loss_fn is ctpo_loss and algo.preset.aggregator.name == "token-mean"


# ------------------------------------------------------------------ DCPO


def test_dcpo_dynamic_bounds():
    old = torch.log(T([[0.5, 1.0, 0.01, 0.001]]))
    low, high = dynamic_clip_bounds(old, 0.2, 0.28, 10.0)
    # q=.5: 1-1.6<0 -> low .5, high ½(1+√3.24)=1.4; q=1: ½(1+√.2), ½(1+√2.12)
    # q=.01: high ½(1+√113); q=.001: ½(1+√1121)=17.24 -> capped at 10
    assert low.tolist()[0] == [
        approx(0.5),
        approx(0.5 * (1 + math.sqrt(0.2))),
        approx(0.5),
        approx(0.5),
    ]
    assert high.tolist()[0] == [
        approx(1.4),
        approx(0.5 * (1 + math.sqrt(2.12))),
        approx(0.5 * (1 + math.sqrt(113)), abs=1e-4),
        approx(10.0),
    ]


def test_dcpo_loss_with_dual_clip():
    old = torch.log(T([[1.0, 1.0, 0.001]]))
    logp = old + torch.log(T([[1.5, 0.5, 20.0]]))
    a = T([[1.0, -1.0, -1.0]])
    loss = dcpo_loss(logp, old, a, torch.ones(1, 3))
    # r=1.5 -> max(-1.5, -1.228) ; r=.5,A<0 -> max(.5,.7236); r=20,A<0 -> max(20,10)=20 -> dual 10
    assert loss.tolist()[0] == [
        approx(-0.5 * (1 + math.sqrt(2.12))),
        approx(0.5 * (1 + math.sqrt(0.2))),
        approx(10.0, abs=1e-4),
    ]


def test_dcpo_pooled_stats_and_smooth_advantage():
    assert pooled_stats(0.5, 0.5, 1, 1.0, 0.0) == (1.0, 0.0)  # no history: the step's stats
    mean, std = pooled_stats(0.5, 0.5, 2, 1.0, 0.0)
    # mean (0.5+1)/2; var (0.25 + 0 + ½·0.25)/2 = 0.1875
    assert (mean, std) == (approx(0.75), approx(math.sqrt(0.1875)))
    a_tot = 0.25 / math.sqrt(0.1875)
    assert smooth_advantage(1.0, (1.0, 0.0), (mean, std), count=1) == approx(0.5 * a_tot)
    assert smooth_advantage(1.0, (1.0, 0.0), (mean, std), count=3) == approx(0.25 * a_tot)


def test_dcpo_sas_gives_signal_to_uniform_groups(batch_factory):
    est, state = SmoothAdvStd(), {}
    step1 = batch_factory([[1], [1]], [1.0, 0.0], [0, 0], prompt_key=T([42, 42]))
    out = est.compute(step1, state)
    assert out.advantages[:, 0].tolist() == [approx(math.sqrt(0.5)), approx(-math.sqrt(0.5))]
    est.update_state(step1, state)
    assert state["dcpo"][42] == (1, 0.5, approx(math.sqrt(0.5)))
    step2 = batch_factory([[1], [1]], [1.0, 1.0], [0, 0], prompt_key=T([42, 42]))
    out = est.compute(step2, state)
    # cum mean .75, var (.5 + 0 + ½·.25)/2 = .3125; A_tot = .25/√.3125; i=2 -> ½A_tot
    expected = 0.5 * 0.25 / math.sqrt(0.3125)
    assert out.advantages[:, 0].tolist() == [approx(expected), approx(expected)]


def test_dcpo_preset_uses_only_token_mean():
    algo = build_algorithm("dcpo")
    assert algo.preset.aggregator.name == "only-token-mean" and algo.estimator.stateful


# ------------------------------------------------------------------ SPO


def test_spo_offline_init():
    v = offline_init([1, 1, 0, 0, 0, 0, 0, 0])
    # N_init = 1/(1-.875) = 8; α = 8·2.5/9, β = 8·6.5/9
    assert (v.alpha, v.beta) == (approx(20 / 9), approx(52 / 9))
    assert offline_init([]).p_hat == 0.5


def test_spo_kl_rho():
    stored = T([[-1.0, -1.0], [-1.0, -1.0], [-1.0, -1.0]])
    now = T([[-1.06, -0.94], [-1.003, -0.997], [-1.01, -0.99]])
    rho = kl_rho(stored, now, torch.ones(3, 2))
    # D=.06 -> 2^-1=.5 -> .875; D=.003 -> .966 -> .96; D=.01 -> 2^(-1/6)
    assert rho.tolist() == [approx(0.875), approx(0.96), approx(2 ** (-1 / 6))]


def test_spo_global_normalization():
    a = spo_advantages(T([1.0, 0.0, 1.0]), T([0.5, 0.5, 0.25]))
    # raw [.5,-.5,.75], mean .25, unbiased std √(.875/2)
    s = math.sqrt(0.4375)
    assert a.tolist() == [approx(0.25 / s), approx(-0.75 / s), approx(0.5 / s)]


def test_spo_tracker_updates_with_kl_adaptive_rho(batch_factory):
    est, state, shift = SPOTracker(), {}, [0.0]

    def logprob_fn(b):
        return -(1.0 + shift[0]) * b.mask

    batch = batch_factory([[0, 1, 1], [0, 1, 0]], [1.0, 0.0], [0, 1], prompt_key=T([11, 22]))
    out = est.compute(batch, state)
    assert out.advantages.tolist() == [
        [0.0, approx(math.sqrt(0.5)), approx(math.sqrt(0.5))],
        [0.0, approx(-math.sqrt(0.5)), 0.0],
    ]
    est.update_state(batch, state, logprob_fn=logprob_fn)
    # first sampling: ρ = 0.96; α = .96·.5 + r, β = .96·.5 + 1 − r
    assert (state["spo"][11].alpha, state["spo"][11].beta) == (approx(1.48), approx(0.48))
    assert (state["spo"][22].alpha, state["spo"][22].beta) == (approx(0.48), approx(1.48))
    shift[0] = 0.01  # the policy moved: D = 0.01 on the stored responses
    batch2 = batch.replace(reward=T([0.0, 0.0]))
    est.update_state(batch2, state, logprob_fn=logprob_fn)
    rho = 2 ** (-1 / 6)
    assert state["spo"][11].alpha == approx(rho * 1.48)
    assert state["spo"][11].beta == approx(rho * 0.48 + 1.0)


def test_spo_needs_logprob_fn_or_constant_rho(batch_factory):
    batch = batch_factory([[1]], [1.0], [0], prompt_key=T([5]))
    with pytest.raises(ValueError, match="logprob_fn"):
        SPOTracker().update_state(batch, {})
    state = {}
    SPOTracker(rho_type="constant").update_state(batch, state)
    assert state["spo"][5].alpha == approx(0.875 * 0.5 + 1)


def test_spo_priority_sampler():
    state = {"spo": {1: PromptValue(0.5, 0.5), 3: PromptValue(1.0, 3.0)}}
    sampler = PrioritySampler()
    w = sampler.weights([1, 2, 3], state)
    raw = np.array([0.55, 0.55, math.sqrt(0.1875) + 0.05])
    assert w.tolist() == approx((raw / raw.sum()).tolist())
    picks = sampler.sample([1, 2, 3], state, 2, np.random.default_rng(0))
    assert len(set(picks)) == 2 and set(picks) <= {0, 1, 2}


def test_spo_preset_is_single_stream():
    algo = build_algorithm("spo")
    assert algo.preset.rollout.kind == "single_stream" and algo.preset.rollout.n == 1
    assert algo.prompt_sampler is not None
    picks = algo.sample_prompts([1, 2, 3, 4], algo.init_state(), 2, np.random.default_rng(1))
    assert len(picks) == 2
