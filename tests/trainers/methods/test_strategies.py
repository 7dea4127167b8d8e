"""Rollout strategies against the real toolgym/Calculator-v0 env with scripted policies: EAPO tools-off,
AXPO prefix resampling through forks, ELPO's binary search, ToolExpander demonstrations."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
import torch

import toolgym  # noqa: F401  (registers the env ids)
from toolgym.trainers.methods import REGISTRY
from toolgym.trainers.methods.strategies import EpisodePlan, ForkRunner, make_strategy, run_group
from toolgym.trainers.methods.tier_b.axpo import AXPOResample
from toolgym.trainers.methods.tier_b.eapo import ToolsOffMix
from toolgym.trainers.methods.tier_b.toolexpander import DemonstrationStrategy
from toolgym.trainers.methods.tier_c.elpo import BinarySearchTree
from toolgym.trainers.methods.trace_batch import traces_to_batch


def runner(policy: Any) -> ForkRunner:
    return ForkRunner(lambda: gym.make("toolgym/Calculator-v0"), policy, max_turns=4)


def byte_encode(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def test_scripted_policy_solves_calculator(ScriptedCalculatorPolicy) -> None:
    trace = runner(ScriptedCalculatorPolicy()).run(EpisodePlan(seed=3, group_id=0))
    assert trace.success and trace.num_tool_calls == 1 and len(trace.turns) == 2
    assert trace.turns[1].state_before["turn"] == 1  # snapshot taken before the second step


def test_eapo_tools_off_rollouts_in_each_group(ScriptedCalculatorPolicy) -> None:
    strategy = make_strategy(dict(REGISTRY.get("eapo").rollout.options))
    assert isinstance(strategy, ToolsOffMix)
    traces = run_group(runner(ScriptedCalculatorPolicy()), strategy, seed=5, group_id=0, n=4)
    off = [t for t in traces if t.plan.path == "tools_off"]
    assert len(off) == 2 and all(t.plan.options["tools"] == "none" for t in off)
    for t in off:  # the env really has no tools: the call is rejected and the episode fails
        assert t.turns[0].state_before["tools"] == []
        assert t.turns[0].info["tool_calls"][0]["error_kind"] == "unknown_tool" and not t.success
    assert all(t.success for t in traces if t.plan.path == "tools_on")
    batch = traces_to_batch(traces, byte_encode)
    assert batch.path.tolist() == [0, 0, 1, 1]


def test_eapo_tool_free_direct_answers_succeed(ScriptedCalculatorPolicy) -> None:
    traces = run_group(runner(ScriptedCalculatorPolicy(direct=True)), ToolsOffMix(2), seed=5, group_id=0, n=4)
    assert all(t.success and t.num_tool_calls == 0 for t in traces)


def test_axpo_resamples_all_wrong_tool_subgroup_through_forks(ScriptedCalculatorPolicy) -> None:
    policy = ScriptedCalculatorPolicy(n_wrong=3)  # the group's 3 calls are wrong, resamples are right
    strategy = AXPOResample(n_resample=2, n_prefixes=1)
    traces = run_group(runner(policy), strategy, seed=11, group_id=0, n=3)
    originals, forks = traces[:3], traces[3:]
    assert not any(t.success for t in originals) and len(forks) == 2
    for f in forks:
        assert f.parent_id == originals[0].sample_id and f.branch_turn == 0 and f.success
        assert f.turns[0].action.startswith("I will compute it.<tool_call>")  # frozen thinking prefix
        assert f.branch_prefix == "I will compute it."
    batch = traces_to_batch(traces, byte_encode)
    frozen = len(byte_encode("<|user|>" + originals[0].prompt + "<|assistant|>I will compute it."))
    assert batch.branch_point[3].item() == frozen and batch.loss_mask[3, :frozen].sum() == 0
    assert batch.loss_mask[3, frozen].item() == 1


def test_axpo_leaves_solved_groups_alone(ScriptedCalculatorPolicy) -> None:
    traces = run_group(runner(ScriptedCalculatorPolicy()), AXPOResample(), seed=11, group_id=0, n=3)
    assert len(traces) == 3


def test_elpo_binary_search_finds_the_bad_call(ScriptedCalculatorPolicy) -> None:
    policy = ScriptedCalculatorPolicy(n_wrong=1)
    run = runner(policy)
    trace = run.run(EpisodePlan(seed=2, group_id=0))
    assert not trace.success and len(trace.turns) == 2
    probes = BinarySearchTree(n_probe=2, budget=8).search(trace, run)
    # keeping the wrong tool result (turn 0) and re-answering never recovers: turn 0 is critical
    assert trace.meta["critical_turn"] == 0 and len(probes) == 2
    for p in probes:
        assert p.branch_turn == 1 and p.turns[0].action == trace.turns[0].action and not p.success
        assert p.turns[1].action == trace.turns[1].action  # continued from the restored env state
    batch = traces_to_batch([trace, *probes], byte_encode)
    assert batch.reward_components["elpo_critical_turn"].tolist() == [0.0, -1.0, -1.0]


def test_fork_replays_identically_and_rejects_bad_turns(ScriptedCalculatorPolicy) -> None:
    run = runner(ScriptedCalculatorPolicy())
    trace = run.run(EpisodePlan(seed=4, group_id=0))
    child = run.fork(trace, 1)
    assert [t.observation for t in child.turns] == [t.observation for t in trace.turns]
    assert child.reward == trace.reward == 1.0
    with pytest.raises(ValueError, match="fork"):
        run.fork(trace, 7)


def test_toolexpander_demonstration_for_hard_prompts(ScriptedCalculatorPolicy) -> None:
    strategy = DemonstrationStrategy()
    run = runner(ScriptedCalculatorPolicy())
    run_group(run, strategy, seed=1, group_id=0, n=1)  # a success enters the pool
    strategy.mark_hard(9)
    plans = strategy.plan([EpisodePlan(seed=9, group_id=1), EpisodePlan(seed=8, group_id=2)])
    assert plans[0].prompt_prefix.startswith("Example of a solved task:") and plans[1].prompt_prefix == ""
    trace = run.run(plans[0])
    assert "<tool_call>" in trace.prompt and trace.success


def test_trace_batch_spans_and_turns(ScriptedCalculatorPolicy) -> None:
    trace = runner(ScriptedCalculatorPolicy()).run(EpisodePlan(seed=3, group_id=0))
    b = traces_to_batch([trace], byte_encode)
    assert b.correct.tolist() == [True] and b.num_tool_calls.tolist() == [1]
    assert set(b.turn_idx[b.loss_mask > 0].tolist()) == {0, 1}
    assert (b.span_type == 3).sum() == len(byte_encode(trace.turns[0].action.split("I will compute it.")[1]))
    assert torch.equal(b.loss_mask.bool(), b.turn_idx >= 0)


def test_trace_batch_carries_gold_calls(ScriptedCalculatorPolicy) -> None:
    trace = runner(ScriptedCalculatorPolicy()).run(EpisodePlan(seed=3, group_id=0))
    gold = traces_to_batch([trace], byte_encode).gold[0]
    assert gold["calls"][0]["name"] == "calculator" and trace.success
    assert trace.turns[1].action == f"<answer>{gold['answer']}</answer>"
    assert gold["calls"][0]["arguments"] == trace.turns[0].info["tool_calls"][0]["arguments"]


def test_toolpo_on_simulated_apis() -> None:
    """ToolPO on toolgym/SimulatedAPI-v0: the gold call's tokens get the tool-call advantage on top."""
    from toolgym.trainers.methods import build_algorithm

    env_id = REGISTRY.get("toolpo").rollout.options["env_id"]
    holder: dict[str, Any] = {}

    def policy(prompt: str, history: Any, prefix: str) -> str:
        task = holder["run"].env.unwrapped.task
        if holder["good"]:
            return task.gold_actions[len(history)]
        return '<tool_call>{"name": "list_notes", "arguments": {}}</tool_call>' if not history else "<answer>?</answer>"

    traces = []
    for good in (True, False):
        holder["good"] = good
        holder["run"] = ForkRunner(lambda: gym.make(env_id), policy, max_turns=3)
        traces.append(holder["run"].run(EpisodePlan(seed=0, group_id=0)))
    assert traces[0].success and not traces[1].success
    batch = traces_to_batch(traces, byte_encode)
    adv = build_algorithm("toolpo").advantages(batch, {}).advantages
    calls, other = batch.span_type == 3, (batch.loss_mask > 0) & (batch.span_type != 3)
    s = 0.70710
    assert adv[0][calls[0]].unique().tolist() == pytest.approx([2 * s], abs=1e-3)  # success + correct call
    assert adv[0][other[0]].unique().tolist() == pytest.approx([s], abs=1e-3)
    assert adv[1][calls[1]].unique().tolist() == pytest.approx([-2 * s], abs=1e-3)


def test_axpo_picks_the_most_uncertain_prefix(ScriptedCalculatorPolicy) -> None:
    policy = ScriptedCalculatorPolicy(n_wrong=3)
    run = runner(policy)
    originals = [run.run(EpisodePlan(seed=11, group_id=0)) for _ in range(3)]
    originals[1].turns[0].info["uncertainty"] = 2.5  # as a policy's `last_uncertainty` would record it
    forks = AXPOResample(n_resample=1, n_prefixes=1).expand(originals, run)[3:]
    assert [f.parent_id for f in forks] == [originals[1].sample_id]
    policy.last_uncertainty = 0.7
    assert run.run(EpisodePlan(seed=1, group_id=0)).turns[0].info["uncertainty"] == 0.7
