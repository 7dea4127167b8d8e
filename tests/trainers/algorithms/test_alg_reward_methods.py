"""TAPO, AutoTIR, ToRL and StepTool rewards against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from toolgym.trainers.batch import ToolCallRecord, TurnReward
from toolgym.trainers.methods import build_algorithm
from toolgym.trainers.methods.autotir import AutoTirReward, autotir_reward, boxed_content
from toolgym.trainers.methods.steptool import CONTRIB, SUCC, StepRewards, sequence_step_rewards
from toolgym.trainers.methods.tapo import TapoReward, answer_score, check_format, levenshtein, tapo_reward
from toolgym.trainers.methods.torl import TorlReward

T = torch.tensor


def approx(x, abs=1e-5):
    return pytest.approx(x, abs=abs)


TAPO_OK = "<think>a</think>\n<search>q</search> <response>r</response>\n<answer>Paris</answer>\n"


# ------------------------------------------------------------------ TAPO


def test_tapo_check_format():
    assert check_format(TAPO_OK) == {"tool_call": {"search": 1, "code": 0}, "answer": "Paris"}
    assert check_format("hello <answer>x</answer>") is None  # text outside blocks
    assert check_format("<answer>x</answer><think>y</think>") is None  # must end with answer
    assert check_format("<foo>x</foo><answer>y</answer>") is None  # unknown tag
    assert check_format("<think>x</think>") is None


@pytest.mark.parametrize(
    ("pred", "gold", "mode", "score"),
    [
        ("Twelve", "12", "exact", 1.0),
        ("1,000", "1000", "exact", 1.0),
        ("3.1416", "3.14159", "numeric_abs", 1.0),
        ("3.15", "3.14159", "numeric_abs", 0.0),
        ("about 104", "100", "numeric_rel", 1.0),
        ("106", "100", "numeric_rel", 0.0),
        ("the city of paris", "paris", "fuzzy", 1.0),
        ("parls", "paris", "fuzzy", 1 - 1 / 5),  # one edit in five
        ("london", "paris", "fuzzy", 0.0),
    ],
)
def test_tapo_answer_score(pred, gold, mode, score):
    assert answer_score(pred, gold, mode) == approx(score)


def test_levenshtein():
    assert levenshtein("kitten", "sitting") == 3


def test_tapo_reward_and_transform(batch_factory):
    assert tapo_reward(TAPO_OK, "paris") == (1.0, True)
    assert tapo_reward(TAPO_OK, ["rome", "paris"]) == (1.0, True)
    assert tapo_reward("Paris", "paris") == (-1.0, False)
    b = batch_factory(
        [[1], [1]], [0.0, 0.0], [0, 0], response_text=[TAPO_OK, "oops"], gold=["paris", {"answer": "paris"}]
    )
    out = TapoReward()(b)
    assert out.reward.tolist() == [1.0, -1.0] and out.correct.tolist() == [True, False]


# ------------------------------------------------------------------ AutoTIR

SEARCH_OK = "<think>t</think><search>q</search><result>r</result><think>u</think><answer>\\boxed{Paris}</answer>"


@pytest.mark.parametrize(
    ("text", "gold", "task", "truncated", "reward"),
    [
        (SEARCH_OK, "Paris", "search", False, 1.0),
        (SEARCH_OK, "Paris", "general", False, -0.1),  # tool on a no-tool task
        (SEARCH_OK.replace("<search>q</search>", "<search>q</search><code>c</code>"), "Paris", "search", False, -0.1),
        ("<think>t</think><answer>\\boxed{London}</answer>", "Paris", "general", False, 0.1),
        ("<think>t</think><answer>Paris</answer>", "Paris", "general", False, 0.0),  # no boxed
        (SEARCH_OK, "Paris", "search", True, 0.0),  # overlong (no EOS)
        (SEARCH_OK.replace("{Paris}", "{Paris France}"), "Paris", "search", False, 2 / 3),
        ("<think>t</think><answer>\\boxed{yes}</answer>", "no", "general", False, 0.1),
        ("<think>t</think><answer>\\boxed{Paris}</answer>", "Paris", "search", False, 0.0),  # no call
    ],
)
def test_autotir_reward_table(text, gold, task, truncated, reward):
    assert autotir_reward(text, gold, task, truncated) == approx(reward)


def test_boxed_content_balances_braces():
    assert boxed_content("x \\boxed{\\frac{1}{2}} y") == "\\frac{1}{2}"
    assert boxed_content("none") is None


def test_autotir_transform(batch_factory):
    b = batch_factory(
        [[1], [1]],
        [0.0, 0.0],
        [0, 0],
        response_text=[SEARCH_OK, SEARCH_OK],
        gold=[{"answer": "Paris", "task_type": "search"}, {"answer": "Paris", "task_type": "general"}],
        truncated=T([False, False]),
    )
    assert AutoTirReward()(b).reward.tolist() == approx([1.0, -0.1])


# ------------------------------------------------------------------ ToRL


def test_torl_reward(batch_factory):
    calls = [[], [ToolCallRecord(0, "python", {}, exec_ok=True)], [ToolCallRecord(0, "python", {}, exec_ok=False)]]
    b = batch_factory([[1]] * 3, [0.0] * 3, [0, 0, 0], correct=T([True, False, True]), tool_calls=calls)
    assert TorlReward()(b).reward.tolist() == [1.0, -1.0, 1.0]
    assert TorlReward(exec_error_penalty=-0.5)(b).reward.tolist() == [1.0, -1.0, 0.5]


# ------------------------------------------------------------------ StepTool


def test_steptool_sequence_rewards():
    calls = [ToolCallRecord(1, "api", {}, exec_ok=False)]
    labels = {0: {SUCC: 1.0, CONTRIB: 0.5}}
    # turn 0: 1·1 + .5; turn 1: rule -> failed call -> 0; last turn: IsSolved
    assert sequence_step_rewards(3, labels, calls, solved=1.0) == [1.5, 0.0, 1.0]
    assert sequence_step_rewards(3, labels, calls, 1.0, alpha=2.0) == [2.5, 0.0, 1.0]
    assert sequence_step_rewards(3, labels, calls, 1.0, weighting="code") == [3.0, 0.0, 0.0]


def test_steptool_rewards_on_step_ends_and_gae(batch_factory):
    b = batch_factory(
        [[0, 1, 1, 0, 1, 1, 0, 1]],
        [1.0],
        [0],
        turn_idx=T([[-1, 0, 0, -1, 1, 1, -1, 2]]),
        correct=T([True]),
        turn_rewards=[[TurnReward(0, 0.0, {SUCC: 1.0, CONTRIB: 0.5})]],
        tool_calls=[[ToolCallRecord(1, "api", {}, exec_ok=True)]],
    )
    out = StepRewards()(b)
    # turn 0 ends at 2 (1.5), turn 1 at 5 (rule success 1 + 0), turn 2 at 7 (solved 1)
    assert out.token_rewards.tolist() == [[0, 0, 1.5, 0, 0, 1.0, 0, 1.0]]
    algo = build_algorithm("steptool", {"advantage": {"kl_coef": 0.0, "whiten": False, "gamma": 1.0, "lam": 1.0}})
    assert algo.needs_critic
    adv = algo.advantages(out.replace(values=torch.zeros(1, 8)), {})
    # γ = λ = 1, V = 0: advantages are reward-to-go over model tokens
    assert adv.advantages.tolist() == [[0, 3.5, 3.5, 0, 2.0, 2.0, 0, 1.0]]
