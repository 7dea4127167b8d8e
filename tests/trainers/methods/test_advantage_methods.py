"""Hand-computed advantages of the Tier B estimators on small tensors."""

from __future__ import annotations

import pytest
import torch

from toolgym.trainers.batch import Path, SpanType, ToolCallRecord, TurnReward
from toolgym.trainers.methods import build_algorithm
from toolgym.trainers.methods.tier_b.adora import adora_advantage, length_advantage_groups
from toolgym.trainers.methods.tier_b.aspo import aspo_shape
from toolgym.trainers.methods.tier_b.awpo import awpo_advantage
from toolgym.trainers.methods.tier_b.axpo import axpo_advantage, thinking_prefix
from toolgym.trainers.methods.tier_b.eapo import confidence_weights, difficulty_penalty
from toolgym.trainers.methods.tier_b.hdpo import hdpo_advantage
from toolgym.trainers.methods.tier_b.hispo import staleness, staleness_mask
from toolgym.trainers.methods.tier_b.papo import papo_advantage

G4 = torch.tensor([0, 0, 0, 0])


def test_hdpo_channels() -> None:
    adv, a_acc, a_eff = hdpo_advantage(
        torch.tensor([1.0, 1, 0, 0]), torch.ones(4), torch.tensor([1.0, 3, 0, 2]), G4, w_eff=1.0
    )
    # R_acc = [1, 1, .1, .1] → ±0.45/0.5196; R_tool on the correct set = [1/2, 1/4] → ±0.7071
    assert a_acc.tolist() == pytest.approx([0.8660, 0.8660, -0.8660, -0.8660], abs=1e-3)
    assert a_eff.tolist() == pytest.approx([0.7071, -0.7071, 0.0, 0.0], abs=1e-3)
    assert adv.tolist() == pytest.approx([1.5731, 0.1589, -0.8660, -0.8660], abs=1e-3)


def test_hdpo_no_efficiency_signal_with_one_correct() -> None:
    _, _, a_eff = hdpo_advantage(torch.tensor([1.0, 0, 0]), torch.ones(3), torch.tensor([2.0, 0, 0]), G4[:3])
    assert a_eff.tolist() == [0.0, 0.0, 0.0]


def test_papo_decoupled_normalization() -> None:
    adv = papo_advantage(torch.tensor([1.0, 1, 0]), torch.tensor([0.9, 0.3, 0.8]), G4[:3], lam=1.0)
    # A_out = [.5774, .5774, −1.1547]; A_proc over correct = [.7071, −.7071], 0 for the wrong one
    assert adv.tolist() == pytest.approx([1.2845, -0.1298, -1.1547], abs=1e-3)


def test_papo_preset_needs_process_score(batch_factory) -> None:
    b = batch_factory([1.0, 0.0], [0, 0])
    algo = build_algorithm("papo")
    with pytest.raises(ValueError, match="process"):
        algo.advantages(b, {})
    scored = algo.transform_rewards(b)  # rule rubric: format ok, calls executed (none), tool used (no)
    assert scored.reward_components["process"].tolist() == pytest.approx([2 / 3, 2 / 3])


def test_aspo_clipped_bias() -> None:
    adv = torch.tensor([0.5, 0.5, 0.5, -1.5])
    pos = torch.tensor([2.0, 4.0, 6.0, -1.0])
    eligible = torch.tensor([True, True, True, False])
    # z = [−1, 0, 1]; δz = [2, 0, −2] clipped to ±0.7·0.5
    assert aspo_shape(adv, pos, eligible, G4, delta=-2.0, k=0.7).tolist() == pytest.approx([0.85, 0.5, 0.15, -1.5])


def test_aspo_estimator_reads_first_tool_call(batch_factory) -> None:
    span = torch.full((4, 6), int(SpanType.REASON))
    for row, start in enumerate((1, 2, 3)):
        span[row, start : start + 2] = int(SpanType.TOOL_CALL)
    b = batch_factory([1.0, 1.0, 1.0, 0.0], [0, 0, 0, 0], t=6, span_type=span)
    adv = build_algorithm("aspo").advantages(b, {}).advantages
    # first calls at model-token positions 0, 1, 2 → z = [−1, 0, 1]; A = .5 → ±0.35
    assert adv[:, 1].tolist() == pytest.approx([0.85, 0.5, 0.15, -1.5], abs=1e-4)


def test_toolpo_tool_call_tokens(batch_factory) -> None:
    span = torch.full((2, 5), int(SpanType.REASON))
    span[0, 2:4] = int(SpanType.TOOL_CALL)
    calls = [[ToolCallRecord(0, "calculator", {"expression": "1"}, correct=True)], []]
    b = batch_factory([1.0, 0.0], [0, 0], t=5, span_type=span, tool_calls=calls)
    adv = build_algorithm("toolpo").advantages(b, {}).advantages
    s = 0.70710
    assert adv[0].tolist() == pytest.approx([0, s, 2 * s, 2 * s, s], abs=1e-3)
    assert adv[1].tolist() == pytest.approx([0, -s, -s, -s, -s], abs=1e-3)


def test_gtpo_turn_returns(batch_factory) -> None:
    turns = torch.tensor([[-1, 0, 0, 1, 1], [-1, 0, 0, 0, 0]])
    b = batch_factory([1.0, 0.0], [0, 0], t=5, turn_idx=turns)
    algo = build_algorithm("gtpo", {"reward_transforms": []})
    adv = algo.advantages(b, {}).advantages
    # G = [[0.9, 1], [0, –]]: turn 0 z-scored over both rows, turn 1 has a single member → 0
    assert adv[0].tolist() == pytest.approx([0, 0.7071, 0.7071, 0, 0], abs=1e-3)
    assert adv[1].tolist() == pytest.approx([0, -0.7071, -0.7071, -0.7071, -0.7071], abs=1e-3)
    tr = [[TurnReward(0, 1.0)], []]  # a turn reward on the first turn of row 0: G = [1.9, 1]
    adv2 = algo.advantages(b.replace(turn_rewards=tr), {}).advantages
    assert adv2[0, 1].item() == pytest.approx(0.7071, abs=1e-3)


def test_adora_length_weight() -> None:
    length = torch.tensor([10.0, 4, 6, 8, 3, 5, 7])
    correct = torch.tensor([True, True, False, False, True, False, False])
    group = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    # group 0: max correct 10 > mean wrong 7 → kept; group 1: 3 < 6 → ×0.1
    assert length_advantage_groups(length, correct, group).tolist() == [True] * 4 + [False] * 3
    adv = adora_advantage(correct.float(), length, correct, group, lam=0.1)
    assert adv[:4].tolist() == pytest.approx([0.866, 0.866, -0.866, -0.866], abs=1e-3)
    assert adv[4:].tolist() == pytest.approx([0.11547, -0.057735, -0.057735], abs=1e-4)


def test_hispo_staleness_mask() -> None:
    s = staleness(torch.tensor([5, 3, 0]), current_version=5)
    assert s.tolist() == [0.0, 2.0, 5.0]
    mu = torch.tensor([[0.1, 0.6], [0.2, 0.3], [0.0, 0.0]])
    keep = staleness_mask(torch.zeros(3, 2), mu, torch.ones(3, 2), s, max_staleness=4, delta=0.5, kappa=0.5)
    # tolerance 0.5 at s=0, 0.25 at s=2; the s=5 row is beyond max staleness
    assert keep.tolist() == [[1, 0], [1, 0], [0, 0]]


def test_hispo_estimator_sets_token_weights(batch_factory) -> None:
    b = batch_factory(
        [1.0, 0.0],
        [0, 0],
        t=3,
        policy_version=torch.tensor([2, 2]),
        rollout_logprobs=torch.zeros(2, 3),
        old_logprobs=torch.tensor([[0.0, 0, 0], [0, -2.0, 0]]),
    )
    out = build_algorithm("hispo").advantages(b.replace(meta={"policy_version": 2}), {})
    assert out.token_weights.tolist() == [[0, 1, 1], [0, 0, 1]]
    with pytest.raises(ValueError, match="policy_version"):
        build_algorithm("hispo").advantages(b.replace(policy_version=None), {})


def test_awpo_gate_weight_clip() -> None:
    reason = torch.tensor([0.2, 0.4, 0.6, 0.8])
    # all wrong: gate 1, weight 1, A_reason = ±1.1619, ±0.3873 clipped to ±0.5
    assert awpo_advantage(torch.zeros(4), reason, G4).tolist() == pytest.approx([-0.5, -0.3873, 0.3873, 0.5], abs=1e-3)
    assert awpo_advantage(torch.ones(4), reason, G4).tolist() == [0.0] * 4  # all right: weight 0


def test_eapo_penalty_and_weights() -> None:
    correct = torch.tensor([True, False, True, True])
    off = torch.tensor([True, True, False, False])
    pen = difficulty_penalty(correct, torch.tensor([0.0, 0, 2, 1]), off, G4, lam=0.1)
    assert pen.tolist() == pytest.approx([0, 0, -0.1, -0.05])  # ease = tool-free accuracy 0.5
    w = confidence_weights(torch.log(torch.tensor([[1.0, 0.5]])), torch.ones(1, 2), alpha=1.0)
    assert w[0].tolist() == pytest.approx([0.8, 1.2])


def test_eapo_preset_uses_tools_off_path(batch_factory) -> None:
    path = torch.tensor([int(Path.TOOLS_OFF)] * 2 + [int(Path.TOOLS_ON)] * 2)
    b = batch_factory([1.0, 0.0, 1.0, 1.0], [0, 0, 0, 0], num_tool_calls=torch.tensor([0, 0, 2, 1]), path=path)
    out = build_algorithm("eapo").transform_rewards(b)
    assert out.reward.tolist() == pytest.approx([1.0, 0.0, 0.9, 0.95])


def test_axpo_subgroup_advantage() -> None:
    reward = torch.tensor([0.0, 0.0, 1.0, 0.0])
    adv = axpo_advantage(
        reward, torch.zeros(4, dtype=torch.long), torch.tensor([0, 1, 2, 3]), torch.tensor([-1, -1, 0, 0])
    )
    # originals all wrong → 0; resamples z-scored with their parent: {0, 1, 0}
    assert adv.tolist() == pytest.approx([0.0, 0.0, 1.1547, -0.5774], abs=1e-3)
    assert thinking_prefix('Let me add.<tool_call>{"name": "x"}</tool_call>') == "Let me add."


def test_axpo_masks_shared_prefix(batch_factory) -> None:
    b = batch_factory(
        [0.0, 1.0, 0.0],
        [0, 0, 0],
        t=5,
        sample_id=torch.tensor([0, 1, 2]),
        parent_id=torch.tensor([-1, 0, 0]),
        branch_point=torch.tensor([-1, 3, 3]),
    )
    adv = build_algorithm("axpo").advantages(b, {}).advantages
    assert adv[1, :3].abs().sum().item() == 0.0 and adv[1, 3].item() > 0
    assert adv[0].abs().sum().item() == 0.0  # a lone original: no baseline


def test_awpo_rule_reasoning_score(batch_factory) -> None:
    span = torch.full((2, 5), int(SpanType.TOOL_CALL))
    span[0, 1:5] = int(SpanType.REASON)
    b = batch_factory([1.0, 0.0], [0, 0], t=5, span_type=span)
    scored = build_algorithm("awpo", {"reward_transforms": {"reasoning_score": {"ref_len": 8}}}).transform_rewards(b)
    assert scored.reward_components["reasoning"].tolist() == [0.5, 0.0]  # 4 reasoning tokens of 8


def test_vspo_tracker_counts_outcomes(batch_factory) -> None:
    algo = build_algorithm("vspo")
    state: dict = {}
    b = batch_factory([1.0, 0.0, 1.0], [0, 0, 1], prompt_key=torch.tensor([11, 11, 12]))
    algo.update_state(b, state)
    algo.update_state(b, state)
    assert state["vspo_value"] == {11: (2.0, 4.0), 12: (2.0, 2.0)}
    picks = algo.sample_prompts([11, 12], state, 1000, __import__("numpy").random.default_rng(1))
    assert picks.count(0) > picks.count(1)  # p̂ = .5 (value .30) beats p̂ = .83 (value .19)
