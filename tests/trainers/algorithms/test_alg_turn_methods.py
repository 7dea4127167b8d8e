"""MatchTIR, Flow-GRPO, MATPO and AKBE against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from toolgym.trainers.batch import Path, Role, ToolCallRecord, TurnReward
from toolgym.trainers.methods import build_algorithm
from toolgym.trainers.methods.akbe import Category, DualPathEstimator, select_teacher
from toolgym.trainers.methods.flow_grpo import (
    TurnBroadcastGroupZ,
    paper_token_weights,
    split_turns,
    turns_per_row,
)
from toolgym.trainers.methods.matchtir import (
    DualLevel,
    MatchingTurnRewards,
    assign_greedy,
    assign_km,
    assign_ot,
    same_turn_zscore,
    token_f1,
    tool_similarity,
    turn_returns,
    turn_rewards_for,
)
from toolgym.trainers.methods.matpo import (
    PlannerRewardBroadcast,
    UidGroupZ,
    attach_worker_rollouts,
    worker_calls,
)

T = torch.tensor


def approx(x, abs=1e-5):
    return pytest.approx(x, abs=abs)


# ------------------------------------------------------------------ MatchTIR

GOLD = {"name": "search", "arguments": {"q": "paris", "k": 3}}


def test_tool_similarity():
    # same keys (Jaccard 1), one equal value: (1 + 1 + 1)/(2 + 2)
    assert tool_similarity({"name": "search", "arguments": {"q": "paris", "k": 5}}, GOLD) == 0.75
    # Jaccard 1/2, one equal value: (1 + .5 + 1)/4
    assert tool_similarity({"name": "search", "arguments": {"q": "paris"}}, GOLD) == 0.625
    assert tool_similarity({"name": "calc", "arguments": {"q": "paris", "k": 3}}, GOLD) == 0.0
    assert tool_similarity({"name": "now", "arguments": {}}, {"name": "now", "arguments": {}}) == 1.0


def test_km_beats_greedy_on_a_crossing():
    sim = np.array([[0.9, 0.8], [0.7, 0.0]])
    assert assign_greedy(sim).tolist() == [0.9, 0.0]
    assert assign_km(sim).tolist() == [0.8, 0.7]  # total 1.5 > 0.9


def test_ot_uniform_marginals():
    assert assign_ot(np.array([[0.6]])).tolist() == approx([0.6])
    # identity similarity: plan ≈ diag(1/2, 1/2) -> reward_p = 1/2 · 1
    assert assign_ot(np.eye(2)).tolist() == approx([0.5, 0.5], abs=1e-3)


def test_token_f1():
    assert token_f1("The Eiffel Tower", "eiffel tower paris") == approx(0.8)
    assert token_f1("rome", "paris") == 0.0


def test_turn_rewards_from_matching():
    calls = [
        ToolCallRecord(0, "search", {"q": "paris", "k": 5}),
        ToolCallRecord(0, "calc", {}),
        ToolCallRecord(1, "search", {"q": "paris"}),
    ]
    gold = {"calls": [GOLD], "answer": "eiffel tower paris"}
    out = turn_rewards_for(calls, gold, "The Eiffel Tower", answer_turn=2)
    # KM gives the only gold call to the 0.75 match; turn 0 = mean(0.75, 0); turn 1 = 0; F1 .8
    assert [(t.turn, t.reward) for t in out] == [(0, 0.375), (1, 0.0), (2, approx(0.8))]


def test_turn_returns_and_same_turn_zscore():
    r = T([[1.0, 2.0, 0.0], [0.0, 1.0, 0.0]])
    exists = T([[True, True, False], [True, False, False]])
    g = turn_returns(r, exists, gamma=0.9)
    assert g.tolist() == [[approx(2.8), 2.0, 0.0], [0.0, 0.0, 0.0]]
    z = same_turn_zscore(g, exists, T([0, 0]))
    # turn 0: [2.8, 0] -> ±1/√2·... = ±0.7071; turn 1 exists once -> 0
    assert z.tolist() == [[approx(math.sqrt(0.5)), 0.0, 0.0], [approx(-math.sqrt(0.5)), 0.0, 0.0]]


def test_dual_level_advantage(batch_factory):
    b = batch_factory(
        [[0, 1, 1, 0, 1], [0, 1, 0, 1, 1]],
        [0.0, 0.0],
        [0, 0],
        turn_idx=T([[-1, 0, 0, -1, 1], [-1, 0, -1, 1, 1]]),
        turn_rewards=[[TurnReward(0, 1.0), TurnReward(1, 0.5)], [TurnReward(0, 0.0), TurnReward(1, 0.5)]],
    )
    adv = DualLevel().compute(b, {}).advantages
    # Σr = 1.5 / 0.5 -> A_traj ±.7071; G_0 = 1.45 / .45 -> ±.7071; G_1 equal -> 0
    z = math.sqrt(0.5)
    assert adv.tolist() == [
        [0.0, approx(z), approx(z), 0.0, approx(z / 2)],
        [0.0, approx(-z), 0.0, approx(-z / 2), approx(-z / 2)],
    ]


def test_matchtir_transform_and_preset(batch_factory):
    calls = [[ToolCallRecord(0, "search", {"q": "paris", "k": 3})], [ToolCallRecord(0, "calc", {})]]
    gold = [{"calls": [GOLD], "answer": "paris"}] * 2
    b = batch_factory(
        [[0, 1, 0, 1], [0, 1, 0, 1]], [0.0, 0.0], [0, 0], tool_calls=calls, gold=gold, answers=["paris", "rome"]
    )
    out = MatchingTurnRewards()(b)
    assert [[(t.turn, t.reward) for t in row] for row in out.turn_rewards] == [
        [(0, 1.0), (1, 1.0)],
        [(0, 0.0), (1, 0.0)],
    ]
    assert out.reward_components["matchtir_traj"].tolist() == [2.0, 0.0]
    algo = build_algorithm("matchtir")
    adv = algo.advantages(algo.transform_rewards(b), {}).advantages
    assert adv[0, 1] > 0 > adv[1, 1]
    with pytest.raises(ValueError, match="gold"):
        MatchingTurnRewards()(b.replace(gold=None))


# ------------------------------------------------------------------ Flow-GRPO

FLOW_TID = T([[-1, 0, 0, -1, 1], [-1, 0, -1, -1, -1]])


def _flow_batch(batch_factory):
    return batch_factory([[0, 1, 1, 0, 1], [0, 1, 0, 0, 0]], [1.0, 0.0], [0, 0], turn_idx=FLOW_TID)


def test_turns_per_row():
    assert turns_per_row(FLOW_TID).tolist() == [2.0, 1.0]


def test_flow_grpo_weights_rows_by_turn_count(batch_factory):
    adv = TurnBroadcastGroupZ().compute(_flow_batch(batch_factory), {}).advantages
    # turn-samples rewards [1, 1, 0]: mean 2/3, unbiased std √(1/3)
    s = math.sqrt(1 / 3)
    assert adv.tolist() == [
        [0.0, approx((1 / 3) / s), approx((1 / 3) / s), 0.0, approx((1 / 3) / s)],
        [0.0, approx((-2 / 3) / s), 0.0, 0.0, 0.0],
    ]


def test_split_turns_gives_the_same_advantages(batch_factory):
    b = _flow_batch(batch_factory)
    s = split_turns(b)
    assert s.loss_mask.tolist() == [[0, 1, 1, 0, 0], [0, 0, 0, 0, 1], [0, 1, 0, 0, 0]]
    assert s.attention_mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert s.parent_id.tolist() == [0, 0, 1] and s.reward.tolist() == [1.0, 1.0, 0.0]
    split_adv = TurnBroadcastGroupZ().compute(s, {}).advantages
    whole_adv = TurnBroadcastGroupZ().compute(b, {}).advantages
    assert split_adv[0, 1].item() == approx(whole_adv[0, 1].item())
    assert split_adv[2, 1].item() == approx(whole_adv[1, 1].item())


def test_flow_grpo_paper_weights():
    w = paper_token_weights(FLOW_TID, turns_per_row(FLOW_TID))
    # row 0: turn 0 has 2 tokens -> 1/(2·2); turn 1 has 1 -> 1/(2·1); row 1: 1/(1·1)
    assert w.tolist() == [[0.0, 0.25, 0.25, 0.0, 0.5], [0.0, 1.0, 0.0, 0.0, 0.0]]


# ------------------------------------------------------------------ MATPO


def _planner_worker(batch_factory):
    planner = batch_factory(
        [[0, 1, 1], [0, 1, 1]],
        [1.0, 0.0],
        [7, 7],
        reward_components={"acc": T([1.0, 0.0]), "fmt": T([1.0, 0.0])},
    )
    workers = batch_factory(
        [[0, 1], [0, 1], [0, 1]], [0.0, 0.0, 0.0], [99, 99, 99], reward_components={"fmt": T([1.0, 0.0, 1.0])}
    )
    return attach_worker_rollouts(planner, workers, [0, 0, 1])


def test_attach_worker_rollouts(batch_factory):
    b = _planner_worker(batch_factory)
    assert b.group_id.tolist() == [7] * 5
    assert b.role.tolist() == [Role.PLANNER] * 2 + [Role.WORKER] * 3
    assert b.parent_id.tolist() == [-1, -1, 0, 0, 1]
    assert b.sample_id.tolist() == [0, 1, 2, 3, 4]
    assert b.loss_mask.tolist()[2] == [0, 1, 0]  # padded to the planner length


def test_matpo_reward_broadcast_and_uid_zscore(batch_factory):
    b = PlannerRewardBroadcast()(_planner_worker(batch_factory))
    # planner 0: 1 + .1·½(1 + mean(1, 0)) = 1.075; planner 1: 0 + .1·½(0 + 1) = 0.05
    assert b.reward.tolist() == approx([1.075, 0.05, 1.075, 1.075, 0.05])
    adv = UidGroupZ().compute(b, {}).advantages[:, 1]
    mean = (3 * 1.075 + 2 * 0.05) / 5
    std = math.sqrt((3 * (1.075 - mean) ** 2 + 2 * (0.05 - mean) ** 2) / 4)
    hi, lo = (1.075 - mean) / std, (0.05 - mean) / std
    assert adv.tolist() == approx([hi, lo, hi, hi, lo])
    out = UidGroupZ(include_workers=False).compute(b, {})
    assert out.advantages[2:].abs().sum() == 0 and out.policy_mask[2:].sum() == 0


def test_matpo_seq_mean_rescale(batch_factory):
    b = PlannerRewardBroadcast()(_planner_worker(batch_factory))
    out = UidGroupZ(rescale_seq_mean=True).compute(b, {})
    assert out.token_weights.unique().tolist() == [2.5]  # B / #planner = 5 / 2


def test_worker_calls(batch_factory):
    b = batch_factory(
        [[1], [1]],
        [0.0, 0.0],
        [0, 0],
        tool_calls=[
            [ToolCallRecord(0, "worker", {"subtask": "find x"}), ToolCallRecord(0, "calculator", {})],
            [ToolCallRecord(1, "worker", {"task": "y"})],
        ],
    )
    assert worker_calls(b) == [(0, 0, "find x"), (1, 0, "y")]


# ------------------------------------------------------------------ AKBE


@pytest.mark.parametrize(
    ("correct", "off", "lengths", "expected"),
    [
        ([1, 0, 1, 1], [0, 0, 1, 1], [10, 8, 5, 3], (3, Category.EFFICIENCY)),
        ([0, 0, 1], [0, 0, 1], [4, 4, 9], (2, Category.HALLUCINATION)),
        ([1, 1, 0], [0, 0, 1], [9, 4, 1], (1, Category.CAPABILITY)),
        ([1, 0], [0, 0], [3, 3], (-1, Category.NONE)),
        ([0, 0, 0], [0, 0, 1], [3, 3, 3], (-1, Category.NONE)),
    ],
)
def test_akbe_teacher_selection(correct, off, lengths, expected):
    got = select_teacher(T(correct).bool(), T(off).bool(), T(lengths, dtype=torch.float32))
    assert got == expected


def test_akbe_dual_path_and_sdpo_loss(batch_factory):
    b = batch_factory(
        [[0, 1, 1], [0, 1, 1], [0, 1, 1]],
        [1.0, 0.0, 1.0],
        [0, 0, 0],
        path=T([Path.TOOLS_ON, Path.TOOLS_ON, Path.TOOLS_OFF]),
    )
    out = DualPathEstimator().compute(b, {})
    z = math.sqrt(0.5)
    assert out.advantages[:, 1].tolist() == [approx(z), approx(-z), 0.0]
    assert out.aux["teacher_mask"].tolist() == [[0, 0, 0], [0, 0, 0], [0, 1, 1]]
    assert out.policy_mask.tolist() == [[0, 1, 1], [0, 1, 1], [0, 0, 0]]
    algo = build_algorithm("akbe")
    logp = torch.full((3, 3), -2.0, requires_grad=True)
    loss, metrics = algo.loss(b.replace(old_logprobs=logp.detach()), logp, algo.advantages(b, {}))
    # PG: r = 1, token-mean of −A over the 4 with-tool tokens = 0; SDPO: mean −logp = 2, × 0.05
    assert metrics["losses/policy"] == approx(0.0)
    assert metrics["losses/sdpo_nll"] == approx(2.0)
    assert loss.item() == approx(0.1)
