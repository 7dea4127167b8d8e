"""Hand-computed values for the reward-side Tier B methods: OTC-PO, ToolRLA, ToolExpander, VSPO's PRS, GTPO shaping."""

from __future__ import annotations

import math

import pytest
import torch

from toolgym.trainers.batch import ToolCallRecord
from toolgym.trainers.methods.tier_b.gtpo import CodeSimilarityShaping
from toolgym.trainers.methods.tier_b.otc import OTCReward, group_min_calls, otc_tool_reward
from toolgym.trainers.methods.tier_b.toolexpander import HardSampleSwap, SelfExemplifyBonus, self_exemplifies
from toolgym.trainers.methods.tier_b.toolrla import ToolRLAReward, efficiency_score, parameter_score
from toolgym.trainers.methods.tier_b.vspo import ProgressiveRewardShaping, ValueSampler, ZeroValueFilter, task_value


def calc(expr: str, ok: bool = True) -> ToolCallRecord:
    return ToolCallRecord(turn=0, name="calculator", arguments={"expression": expr}, exec_ok=ok)


def test_otc_tool_reward_by_hand() -> None:
    m = torch.tensor([0.0, 1.0, 2.0, 1.0])
    n = torch.tensor([0.0, 0.0, 1.0, 1.0])
    # 1; cos(π/3); sin((4/3)·π/2); sin(π/2)
    expected = [1.0, 0.5, math.sin(2 * math.pi / 3), 1.0]
    assert otc_tool_reward(m, n, c=1.0).tolist() == pytest.approx(expected, abs=1e-6)


def test_otc_grpo_uses_fewest_calls_among_correct(batch_factory) -> None:
    b = batch_factory([1.0, 1.0, 0.0, 1.0], [0, 0, 0, 1], num_tool_calls=torch.tensor([1, 3, 2, 0]))
    assert group_min_calls(torch.tensor([1.0, 3, 2, 0]), b.reward > 0.5, b.group_id).tolist() == [1, 1, 1, 0]
    out = OTCReward(mode="grpo")(b)
    # n=1: m=1 → 1; m=3 → sin(1.5·π/2); wrong → 0; group 1: m=n=0 → 1
    assert out.reward.tolist() == pytest.approx([1.0, math.sin(0.75 * math.pi), 0.0, 1.0], abs=1e-6)
    assert b.reward.tolist() == [1.0, 1.0, 0.0, 1.0]  # input untouched


def test_otc_ppo_and_history(batch_factory) -> None:
    b = batch_factory([1.0, 1.0], [0, 1], num_tool_calls=torch.tensor([1, 2]), prompt_key=torch.tensor([7, 7]))
    assert OTCReward(mode="ppo")(b).reward.tolist() == pytest.approx([0.5, math.cos(2 * math.pi / 5)], abs=1e-6)
    hist = OTCReward(mode="grpo", track_history=True)
    out = hist(b)  # prompt 7 was solved with 1 call in group 0, so n=1 for group 1 too
    assert out.reward[1].item() == pytest.approx(math.sin((4 / 3) * math.pi / 2), abs=1e-6)
    with pytest.raises(ValueError, match="mode"):
        OTCReward(mode="sac")


def test_toolrla_multiplicative(batch_factory) -> None:
    gold = {"calls": [{"name": "calculator", "arguments": {"expression": "1+2"}}]}
    b = batch_factory(
        [1.0, 0.0, 1.0],
        [0, 0, 0],
        tool_calls=[[calc("1+2")], [calc("2+2")], [calc("1+2")]],
        gold=[gold] * 3,
        reward_components={"success": torch.tensor([1.0, 0.0, 1.0]), "violation/pii": torch.tensor([0.0, 0.0, -1.0])},
    )
    out = ToolRLAReward()(b)
    # 1·(1·1) + 1·1 + 0.1·1 ; 1·(1·0) + 0 + 0.1 ; 2.1 − 1 (violation)
    assert out.reward.tolist() == pytest.approx([2.1, 0.1, 1.1])
    assert parameter_score([calc("9")], gold["calls"]) == 0.0
    assert efficiency_score(4, 1) == 0.25 and efficiency_score(0, 0) == 1.0


def test_toolexpander_bonus_and_hard_swap(batch_factory) -> None:
    assert self_exemplifies("For example, 2+2=4.") and not self_exemplifies("Let me call the tool.")
    b = batch_factory(
        [1.0, 0.0, 0.0, 0.0],
        [0, 0, 1, 1],
        response_text=["e.g. 3*3=9", "", "", ""],
        prompt_key=torch.tensor([5, 5, 6, 6]),
    )
    assert SelfExemplifyBonus()(b).reward.tolist() == pytest.approx([1.01, 0, 0, 0])
    swap = HardSampleSwap()
    kept, dropped = swap.select(b)
    assert dropped == 1 and kept.group_id.tolist() == [0, 0] and swap.hard == {6}


def test_prs_stages_and_value_sampling(batch_factory) -> None:
    comps = {"success": torch.tensor([1.0, 0.0]), "invalid_call/x": torch.tensor([0.0, -0.05])}
    b = batch_factory([1.0, 0.0], [0, 0], num_tool_calls=torch.tensor([1, 1]), reward_components=comps)
    prs = ProgressiveRewardShaping(stages=(1, 2))
    assert prs(b.replace(meta={"step": 0})).reward.tolist() == [1.0, 0.0]  # well-formed tool use
    assert prs(b.replace(meta={"step": 1})).reward.tolist() == pytest.approx([1.0, 0.0])  # .2·fmt + .8·ans
    assert prs(b.replace(meta={"step": 5})).reward.tolist() == [1.0, 0.0]
    assert task_value(0, 0) == pytest.approx(0.3) and task_value(4, 4) == pytest.approx(0.14)
    state = {"vspo_value": {1: (4.0, 4.0), 2: (2.0, 4.0)}}
    picks = ValueSampler(eps=0.0).sample([1, 2], state, 2000, __import__("numpy").random.default_rng(0))
    assert picks.count(0) < picks.count(1)  # indices; p̂(1−p̂): 0.09 vs 0.25
    kept, dropped = ZeroValueFilter().select(batch_factory([1.0, 1.0, 0.0, 1.0], [0, 0, 1, 1]))
    assert dropped == 1 and kept.group_id.tolist() == [1, 1]


def test_gtpo_code_shaping(batch_factory) -> None:
    b = batch_factory([1.0, 0.0, 0.0], [0, 0, 1], tool_calls=[[calc("1+2")], [calc("1+2")], [calc("1+2")]])
    out = CodeSimilarityShaping(scale=0.5)(b)
    assert out.reward.tolist() == pytest.approx([1.0, 0.5, 0.0])  # identical code; no successful sibling in group 1
