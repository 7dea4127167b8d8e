"""Base plug-ins against hand-computed values (issue 7.4)."""

from __future__ import annotations

import math

import pytest
import torch

from toolgym.trainers import advantages as adv
from toolgym.trainers import aggregators as agg
from toolgym.trainers import losses, regularizers
from toolgym.trainers.aggregators import GlobalCounts
from toolgym.trainers.methods import build_algorithm
from toolgym.trainers.rewards import OverlongShaping, SignedCorrectness, overlong_penalty
from toolgym.trainers.samplers import DynamicSampling

T = torch.tensor


def approx(x, abs=1e-5):
    return pytest.approx(x, abs=abs)


# ------------------------------------------------------------------ advantages


def test_grpo_zscore_unbiased_std_and_single_groups():
    # group 0: rewards 1,0,1,0 -> mean .5, unbiased std sqrt(1/3); group 1: one sample -> 0
    a = adv.grpo_outcome(T([1.0, 0.0, 1.0, 0.0, 1.0]), T([0, 0, 0, 0, 1]))
    z = 0.5 / math.sqrt(1 / 3)
    assert a.tolist() == approx([z, -z, z, -z, 0.0], abs=1e-5)


def test_dr_grpo_subtracts_mean_only():
    a = adv.grpo_outcome(T([1.0, 0.0, 0.0]), T([3, 3, 3]), norm_std=False)
    assert a.tolist() == approx([2 / 3, -1 / 3, -1 / 3])


def test_rloo_leave_one_out():
    a = adv.rloo_outcome(T([1.0, 0.0, 0.0, 5.0]), T([0, 0, 0, 1]))
    assert a.tolist() == approx([1.0, -0.5, -0.5, 0.0])


def test_estimators_broadcast_to_model_tokens(batch_factory):
    b = batch_factory([[0, 1, 1], [0, 1, 0]], [1.0, 0.0], [0, 0])
    out = adv.GroupZ().compute(b, {})
    z = 0.5 / math.sqrt(0.5)
    assert out.advantages.tolist() == [[0, approx(z), approx(z)], [0, approx(-z), 0]]
    out = adv.GroupMean().compute(b, {})
    assert out.advantages.tolist() == [[0, 0.5, 0.5], [0, -0.5, 0]]


def test_masked_whiten():
    x = T([[1.0, 2.0, 3.0, 100.0]])
    m = T([[1.0, 1.0, 1.0, 0.0]])
    w = adv.masked_whiten(x, m)  # mean 2, unbiased var 1
    assert w.tolist() == [[approx(-1.0), approx(0.0), approx(1.0), 0.0]]


def test_discounted_returns_carry_over_tool_tokens():
    r = T([[0.0, 0.0, 0.0, 1.0]])
    m = T([[1.0, 0.0, 1.0, 1.0]])
    g = adv.discounted_returns(r, m, gamma=0.5)
    assert g.tolist() == [[0.25, 0.0, 0.5, 1.0]]


def test_reinforce_pp_whitens_returns(batch_factory):
    # outcome on the last token, gamma 1: returns = R on every model token
    b = batch_factory([[0, 1, 1], [0, 1, 0]], [1.0, 0.0], [0, 1])
    out = adv.ReinforcePP().compute(b, {})
    assert out.returns.tolist() == [[0, 1, 1], [0, 0, 0]]
    # values 1,1,0 -> mean 2/3, unbiased var 1/3
    s = math.sqrt(1 / 3)
    assert out.advantages.tolist() == [
        [0, approx((1 / 3) / s), approx((1 / 3) / s)],
        [0, approx((-2 / 3) / s), 0],
    ]


def test_reinforce_pp_kl_in_reward(batch_factory):
    b = batch_factory(
        [[0, 1, 1]],
        [1.0],
        [0],
        old_logprobs=T([[0.0, -1.0, -1.0]]),
        ref_logprobs=T([[0.0, -1.5, -1.0]]),
    )
    out = adv.ReinforcePP(gamma=1.0, kl_coef=0.1).compute(b, {})
    # r = [0, -0.1*0.5, 1.0] -> returns [_, 0.95, 1.0]
    assert out.returns.tolist() == [[0, approx(0.95), approx(1.0)]]


def test_reinforce_pp_baseline(batch_factory):
    b = batch_factory([[1, 1], [1, 0]], [1.0, 0.0], [0, 0])
    out = adv.ReinforcePPBaseline().compute(b, {})
    # centred 0.5, 0.5, -0.5 on tokens -> mean 1/6, var unbiased = 1/3
    mean, s = 1 / 6, math.sqrt(1 / 3)
    assert out.advantages.tolist() == [
        [approx((0.5 - mean) / s), approx((0.5 - mean) / s)],
        [approx((-0.5 - mean) / s), 0],
    ]


def test_gae_skips_observation_tokens():
    r = T([[0.0, 0.0, 1.0]])
    v = T([[0.5, 0.2, 0.4]])
    m = T([[1.0, 0.0, 1.0]])
    a, ret = adv.gae(r, v, m, gamma=1.0, lam=1.0)
    assert a.tolist() == [[approx(0.5), 0.0, approx(0.6)]]
    assert ret.tolist() == [[approx(1.0), 0.0, approx(1.0)]]
    a, _ = adv.gae(r, v, m, gamma=0.9, lam=0.5)
    # t=2: δ=0.6; t=0: δ = 0.9*0.4 - 0.5 = -0.14, A = -0.14 + 0.45*0.6 = 0.13
    assert a.tolist() == [[approx(0.13), 0.0, approx(0.6)]]


def test_gae_estimator_needs_values(batch_factory):
    b = batch_factory([[0, 1]], [1.0], [0])
    with pytest.raises(ValueError, match="values"):
        adv.GAE().compute(b, {})
    out = adv.GAE(whiten=False).compute(b.replace(values=T([[0.0, 0.25]])), {})
    assert out.advantages.tolist() == [[0.0, 0.75]]
    assert out.returns.tolist() == [[0.0, 1.0]]


# ------------------------------------------------------------------ policy losses


def _lp(ratios):
    return torch.log(T(ratios))


def test_ppo_clip_values_and_dual_clip():
    old = torch.zeros(1, 5)
    logp = _lp([[1.5, 0.5, 5.0, 0.5, 1.5]])
    a = T([[1.0, -1.0, -1.0, 1.0, 1.0]])
    m = T([[1.0, 1.0, 1.0, 1.0, 0.0]])
    loss = losses.ppo_clip(logp, old, a, m, clip_low=0.2, clip_high=0.2, clip_c=3.0)
    # r=1.5,A=1 -> max(-1.5,-1.2)=-1.2; r=.5,A=-1 -> max(.5,.8)=.8; r=5,A=-1 -> min(5,3)=3;
    # r=.5,A=1 -> max(-.5,-.8)=-.5; masked -> 0
    assert loss.tolist() == [[approx(-1.2), approx(0.8), approx(3.0), approx(-0.5), 0.0]]


def test_ppo_clip_higher_and_no_dual_clip():
    loss = losses.ppo_clip(
        _lp([[1.5, 5.0]]),
        torch.zeros(1, 2),
        T([[1.0, -1.0]]),
        torch.ones(1, 2),
        clip_low=0.2,
        clip_high=0.28,
        clip_c=None,
    )
    assert loss.tolist() == [[approx(-1.28), approx(5.0)]]


def test_ppo_clip_gradient_only_inside_the_trust_region():
    logp = _lp([[1.5, 0.5]]).requires_grad_()
    loss = losses.ppo_clip(logp, torch.zeros(1, 2), T([[1.0, 1.0]]), torch.ones(1, 2))
    loss.sum().backward()
    # clipped token: no gradient; unclipped: d(-r)/dlogp = -r = -0.5
    assert logp.grad.tolist() == [[0.0, approx(-0.5)]]


def test_gspo_sequence_ratio_ignores_tool_tokens():
    old = torch.zeros(2, 3)
    logp = T([[0.1, 5.0, 0.3], [0.0, 0.0, 0.0]])
    m = T([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    a = T([[1.0, 1.0, 1.0], [-2.0, -2.0, -2.0]])
    loss = losses.gspo(logp, old, a, m)
    # row 0: log s = mean(0.1, 0.3) = 0.2 -> s = 1.2214 > 1.0004 -> -1.0004 on model tokens
    # row 1: s = 1 -> -A*1 = 2
    assert loss.tolist() == [[approx(-1.0004), 0.0, approx(-1.0004)], [2.0, 2.0, 2.0]]


def test_gspo_gradient_is_per_token_times_sequence_ratio():
    logp = T([[0.1, 0.3]]).requires_grad_()
    losses.gspo(logp, torch.zeros(1, 2), T([[-1.0, -1.0]]), torch.ones(1, 2)).sum().backward()
    # A<0 and s=e^0.2 > 1+4e-4: the unclipped branch -A*s is larger -> d/dlogp_t = -A*s = s
    assert logp.grad.tolist() == [[approx(math.exp(0.2)), approx(math.exp(0.2))]]


def test_cispo_weight_is_clipped_and_detached():
    logp = T([[-1.0, -1.0]]).requires_grad_()
    old = T([[-3.0, -1.0 - math.log(0.5)]])  # ratios e^2 = 7.39 -> 6.0, and 0.5
    loss = losses.cispo(logp, old, T([[1.0, 1.0]]), torch.ones(1, 2))
    assert loss.tolist() == [[approx(6.0), approx(0.5)]]  # −w·A·logπ with logπ = −1
    loss.sum().backward()
    assert logp.grad.tolist() == [[approx(-6.0), approx(-0.5)]]


def test_value_loss_clipped():
    v = T([[1.0, 0.0]])
    old = T([[0.0, 0.0]])
    ret = T([[0.0, 1.0]])
    out = losses.value_loss_clipped(v, old, ret, torch.ones(1, 2), clip_value=0.5)
    # token 0: max(1, (0.5-0)^2)=1 -> 0.5; token 1: max(1, 1) -> 0.5
    assert out.tolist() == [[0.5, 0.5]]
    out = losses.value_loss_clipped(T([[2.0]]), T([[0.0]]), T([[2.0]]), torch.ones(1, 1), 0.5)
    # unclipped 0, clipped (0.5-2)^2 = 2.25 -> max -> 1.125
    assert out.tolist() == [[1.125]]


# ------------------------------------------------------------------ regularisers


def test_kl_estimators():
    logp = T([[math.log(2.0), -1.0]])
    ref = T([[0.0, 0.0]])
    m = torch.ones(1, 2)
    assert regularizers.kl_term(logp, ref, m, "k1").tolist() == [[approx(0.693147), -1.0]]
    assert regularizers.kl_term(logp, ref, m, "k2").tolist() == [[approx(0.240227), 0.5]]
    k3 = regularizers.kl_term(logp, ref, m, "k3").tolist()
    assert k3 == [[approx(0.5 + 0.693147 - 1), approx(math.e - 2)]]
    assert regularizers.kl_term(logp, ref, m, "k3+").tolist()[0] == approx(k3[0])
    with pytest.raises(ValueError):
        regularizers.kl_term(logp, ref, m, "k9")


def test_k3_plus_has_k2_gradient():
    logp = T([[0.5]]).requires_grad_()
    regularizers.kl_k3_plus(logp, T([[0.0]])).sum().backward()
    assert logp.grad.item() == approx(0.5)  # d(½Δ²)/dΔ = Δ


def test_entropy_bonus():
    assert regularizers.entropy_bonus(T([[2.0, 3.0]]), T([[1.0, 0.0]])).tolist() == [[-2.0, 0.0]]


# ------------------------------------------------------------------ aggregators

LOSS = T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
MASK = T([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    ("name", "expected", "cfg"),
    [
        ("token-mean", 7 / 3, {}),
        ("seq-mean-token-mean", (1.5 + 4.0) / 2, {}),
        ("seq-mean-token-sum", 3.5, {}),
        ("seq-mean-token-sum-norm", 7 / 6, {}),
        ("seq-mean-token-sum-norm", 7 / 8, {"norm_len": 4}),
        ("only-token-mean", 5.5, {}),
        ("token-sum", 7.0, {}),
    ],
)
def test_aggregators(name, expected, cfg):
    assert agg.REGISTRY.get(name)(LOSS, MASK, None, **cfg).item() == approx(expected)


def test_aggregators_use_global_counts():
    counts = GlobalCounts(num_tokens=14.0, num_seqs=4.0, max_len=10)
    assert agg.token_mean(LOSS, MASK, counts).item() == approx(0.5)
    assert agg.seq_mean_token_mean(LOSS, MASK, counts).item() == approx(5.5 / 4)
    assert agg.seq_mean_token_sum_norm(LOSS, MASK, counts).item() == approx(7 / 40)


# ------------------------------------------------------------------ rewards, filters


def test_overlong_penalty():
    lengths = T([5.0, 6.0, 8.0, 10.0, 12.0])
    assert overlong_penalty(lengths, max_len=10, buffer_len=4).tolist() == [0, 0, -0.5, -1, -1]


def test_overlong_shaping_uses_resp_len(batch_factory):
    b = batch_factory([[1, 1], [1, 1]], [1.0, 1.0], [0, 0], resp_len=T([3, 9]))
    out = OverlongShaping(max_len=10, buffer_len=4, penalty_factor=0.5)(b)
    assert out.reward.tolist() == [1.0, 0.625]
    assert out.reward_components["overlong"].tolist() == [0.0, -0.375]
    assert b.reward.tolist() == [1.0, 1.0]


def test_signed_correctness(batch_factory):
    b = batch_factory([[1], [1]], [0.0, 1.0], [0, 0], correct=T([True, False]))
    assert SignedCorrectness()(b).reward.tolist() == [1.0, -1.0]
    assert SignedCorrectness()(b.replace(correct=None)).reward.tolist() == [-1.0, 1.0]


def test_dynamic_sampling_drops_constant_groups(batch_factory):
    b = batch_factory([[1]] * 6, [1, 1, 1, 0, 0, 0], [0, 0, 1, 1, 2, 2])
    kept, missing = DynamicSampling().select(b)
    assert kept.group_id.tolist() == [1, 1] and missing == 2


# ------------------------------------------------------------------ Algorithm end to end


def test_algorithm_loss_combines_policy_and_kl(batch_factory):
    algo = build_algorithm("grpo", {"regularizers": {"kl_k3": {"coef": 0.5}}})
    b = batch_factory([[1, 1], [1, 1]], [1.0, 0.0], [0, 0])
    logp = torch.full((2, 2), -1.0, requires_grad=True)
    b = b.replace(old_logprobs=logp.detach().clone(), ref_logprobs=logp.detach() - math.log(2.0))
    assert algo.needs_ref and not algo.needs_critic
    out = algo.advantages(b, algo.init_state())
    loss, metrics = algo.loss(b, logp, out)
    k3 = 0.5 + math.log(2.0) - 1.0
    # policy: r=1 -> -A per token; seq-mean-token-mean of ±0.7071 -> 0
    assert metrics["losses/policy"] == approx(0.0, abs=1e-6)
    assert metrics["losses/kl_k3"] == approx(k3)
    assert loss.item() == approx(0.5 * k3)
    loss.backward()
    z = 0.5 / math.sqrt(0.5)
    # d/dlogp: policy -A/(|o|·B) = ∓z/4; KL 0.5·(1 − e^{−Δ})/4 = 0.5·0.5/4
    kl_grad = 0.5 * 0.5 / 4
    assert logp.grad.tolist() == [
        [approx(-z / 4 + kl_grad), approx(-z / 4 + kl_grad)],
        [approx(z / 4 + kl_grad), approx(z / 4 + kl_grad)],
    ]


def test_algorithm_regularizer_missing_input_is_clear(batch_factory):
    algo = build_algorithm("grpo")
    b = batch_factory([[1, 1]], [1.0], [0])
    out = algo.advantages(b, {})
    with pytest.raises(ValueError, match="ref_logp"):
        algo.loss(b, torch.zeros(1, 2), out)


def test_ppo_algorithm_value_loss(batch_factory):
    algo = build_algorithm("ppo")
    assert algo.needs_critic
    b = batch_factory([[0, 1, 1]], [1.0], [0], values=T([[0.0, 0.0, 0.5]]))
    out = algo.advantages(b, {})
    # GAE γ=λ=1: returns = R on every model token
    assert out.returns.tolist() == [[0.0, 1.0, 1.0]]
    vl = algo.value_loss(T([[0.0, 0.5, 0.5]]), b, out)
    # per token ½(V−R)²: 0.125 and 0.125 -> token-mean 0.125
    assert vl.item() == approx(0.125)


def test_dapo_pipeline_transforms_and_filters(batch_factory):
    algo = build_algorithm("dapo", {"reward_transforms": {"overlong_shaping": {"max_len": 4, "buffer_len": 2}}})
    b = batch_factory(
        [[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0]],
        [1.0, 0.0, 1.0, 1.0],
        [0, 0, 1, 1],
        correct=T([True, False, True, True]),
    )
    b = algo.transform_rewards(b)
    # ±1, then length 4 -> -(4-2)/2 = -1
    assert b.reward.tolist() == [0.0, -1.0, 1.0, 1.0]
    kept, missing = algo.filter_groups(b)
    assert kept.group_id.tolist() == [0, 0] and missing == 1


# ------------------------------------------------------------------ rollout IS, dynamic-sampling loop


def test_rollout_is_weights():
    old = T([[-1.0, -1.0, 0.0]])
    mu = T([[-1.5, -1.2, 5.0]])
    m = T([[1.0, 1.0, 0.0]])
    tok = losses.rollout_is_weights(old, mu, m, "token", threshold=1.5)
    assert tok.tolist() == [[1.5, approx(math.exp(0.2)), 0.0]]  # e^.5 truncated at 1.5
    seq = losses.rollout_is_weights(old, mu, m, "sequence", threshold=5.0)
    assert seq.tolist() == [[approx(math.exp(0.7)), approx(math.exp(0.7)), 0.0]]
    assert losses.rollout_is_weights(old, mu, m, "sequence", threshold=2.0).tolist() == [[2.0, 2.0, 0.0]]


def test_ctpo_preset_applies_sequence_rollout_is(batch_factory):
    algo = build_algorithm("ctpo")
    b = batch_factory([[1, 1], [1, 0]], [1.0, 0.0], [0, 0])
    logp = torch.full((2, 2), -1.0)
    mu = logp + T([[-0.1, -0.1], [0.3, 0.0]])
    b = b.replace(old_logprobs=logp, rollout_logprobs=mu)
    loss, _ = algo.loss(b, logp, algo.advantages(b, {}))
    # ratio 1 -> loss −A·w per token; w0 = e^{0.2}, w1 = e^{-0.3}; token-mean over 3 tokens
    z = 1 / math.sqrt(2)
    assert loss.item() == approx((-2 * z * math.exp(0.2) + z * math.exp(-0.3)) / 3)


def test_collect_groups_stops_when_full(batch_factory):
    from toolgym.trainers.samplers import collect_groups

    def gen():
        yield batch_factory([[1]] * 4, [1, 1, 1, 0], [0, 0, 1, 1])  # keeps group 1
        yield batch_factory([[1]] * 4, [0, 1, 0, 0], [0, 0, 1, 1])  # keeps group 0
        raise AssertionError("drew a third batch")

    out, drawn = collect_groups(gen(), DynamicSampling(), target_groups=2)
    assert drawn == 2
    assert out.group_id.tolist() == [0, 0, 1, 1] and out.reward.tolist() == [1, 0, 0, 1]
    out, drawn = collect_groups(gen(), DynamicSampling(), target_groups=2, max_num_gen_batches=1)
    assert drawn == 1 and out.group_id.tolist() == [0, 0]
    out, _ = collect_groups(iter([batch_factory([[1]] * 2, [1, 1], [0, 0])]), DynamicSampling(), 1)
    assert out is None


def test_overlong_filter(batch_factory):
    from toolgym.trainers.rewards import OverlongFilter

    b = batch_factory([[0, 1, 1], [0, 1, 1]], [1.0, 1.0], [0, 0], truncated=T([False, True]))
    assert OverlongFilter()(b).loss_mask.tolist() == [[0, 1, 1], [0, 0, 0]]
    with pytest.raises(ValueError, match="truncated"):
        OverlongFilter()(b.replace(truncated=None))


def test_value_head_alignment():
    from toolgym.trainers.value_head import ValueHead, values_for_tokens

    head = ValueHead(2)
    assert head(torch.ones(1, 3, 2)).tolist() == [[0.0, 0.0, 0.0]]  # zero-initialized
    # the state before token t is the hidden state at t−1
    assert values_for_tokens(T([[1.0, 2.0, 3.0]])).tolist() == [[0.0, 1.0, 2.0]]


def test_value_loss_uses_the_preset_clip(batch_factory):
    algo = build_algorithm("steptool")  # value_clip 0.2
    zeros = T([[0.0, 0.0]])
    b = batch_factory([[0, 1]], [1.0], [0], values=zeros, old_logprobs=zeros, ref_logprobs=zeros)
    adv = algo.advantages(b.replace(token_rewards=T([[0.0, 1.0]])), {})
    assert adv.returns.tolist() == [[0.0, 1.0]]  # one model token: δ = 1, V = 0
    # V_new = 1: unclipped (1−1)² = 0, clipped (0.2−1)² = .64 -> ½·.64 on the one model token
    assert algo.value_loss(T([[0.0, 1.0]]), b, adv).item() == approx(0.32)
    assert algo.value_loss(T([[0.0, 1.0]]), b, adv, clip_value=0.5).item() == approx(0.125)


def test_dapo_filter_judges_correctness_not_the_shaped_reward(batch_factory):
    # both rollouts correct, one overlong: shaped rewards differ (1, 0) but accuracy is constant
    algo = build_algorithm("dapo", {"reward_transforms.overlong_shaping": {"max_len": 4, "buffer_len": 2}})
    b = batch_factory([[1, 1, 1, 1], [1, 0, 0, 0]], [1.0, 1.0], [0, 0])
    b = algo.transform_rewards(b)
    assert b.reward.tolist() == [0.0, 1.0] and b.correct.tolist() == [True, True]
    kept, missing = algo.filter_groups(b)
    assert kept.batch_size == 0 and missing == 1
