"""Method rollout strategies in `toolgym train`: EAPO/AKBE tool-free rollouts, ToolExpander demonstrations,
and a clear early error for the rollout kinds the Ray loop cannot make."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ray")

from toolgym.cli import main  # noqa: E402
from toolgym.trainers.config import load_config  # noqa: E402
from toolgym.trainers.logging import read_metrics  # noqa: E402
from toolgym.trainers.methods import REGISTRY  # noqa: E402
from toolgym.trainers.ray.driver import rollout_planner, train, train_specs  # noqa: E402
from toolgym.trainers.rollouts.collector import RolloutCollector  # noqa: E402
from toolgym.trainers.rollouts.envs import LocalEnvPool  # noqa: E402
from toolgym.trainers.rollouts.strategy import UnsupportedRollout  # noqa: E402
from toolgym.trainers.rollouts.to_batch import episodes_to_batch  # noqa: E402
from toolgym.trainers.tiny import TINY_FORMAT  # noqa: E402

UNSUPPORTED = {  # preset -> words the error must contain (on the default env, Calculator-v0)
    "matpo": "toolgym/PlannerWorker-v0",
}
ENV = "toolgym/Calculator-v0"


def _cfg(*extra: str):
    return load_config(None, ["rollout.prompts_per_step=2", "rollout.workers=1", *extra])


@pytest.mark.parametrize("name", sorted(REGISTRY.names()))
def test_every_preset_gets_a_planner_or_a_clear_error(name: str) -> None:
    size = 1 if REGISTRY.get(name).rollout.kind == "single_stream" else 8
    cfg = _cfg(f"algorithm.name={name}", f"rollout.group_size={size}")
    if name not in UNSUPPORTED:
        groups = train_specs(cfg, 0, rollout_planner(cfg))
        assert [len(g) for g in groups] == [2 * size]
        return
    with pytest.raises(UnsupportedRollout, match=UNSUPPORTED[name]) as caught:
        rollout_planner(cfg)
    assert name in str(caught.value)


def test_eapo_and_akbe_plan_tool_free_rollouts_in_every_group() -> None:
    cfg = _cfg("algorithm.name=eapo", "rollout.group_size=8")
    eapo = train_specs(cfg, 3, rollout_planner(cfg))
    off = [[s.options.get("tools") == "none" for s in eapo[0][g * 8 : (g + 1) * 8]] for g in range(2)]
    assert off == [[False] * 6 + [True] * 2] * 2  # n_off = 2 of every group, same task (seed) as its group
    assert len({s.seed for s in eapo[0][:8]}) == 1
    akbe = rollout_planner(_cfg("algorithm.name=akbe", "rollout.group_size=8")).group(5, 0, 8)
    assert sum(s.options.get("tools") == "none" for s in akbe) == 4  # 8 of 16 in the preset: half the group


def test_group_size_must_fit_the_method() -> None:
    with pytest.raises(UnsupportedRollout, match="group_size"):
        rollout_planner(_cfg("algorithm.name=eapo", "rollout.group_size=2"))
    with pytest.raises(UnsupportedRollout, match="group_size=1"):
        rollout_planner(_cfg("algorithm.name=spo", "rollout.group_size=8"))


def test_sampling_the_trainer_does_not_do_is_said() -> None:
    spo = rollout_planner(_cfg("algorithm.name=spo", "rollout.group_size=1"))
    assert spo.prompt_sampler and not any("spo_priority" in note for note in spo.notes)  # applied now
    assert rollout_planner(_cfg("algorithm.name=grpo")).notes == []
    assert rollout_planner(_cfg("algorithm.name=eapo")).notes == []
    assert any("max_tool_calls" in note for note in rollout_planner(_cfg("algorithm.name=torl")).notes)


def test_tool_free_episodes_run_without_tools_and_are_marked_in_the_batch(tiny) -> None:
    from toolgym.trainers.engines.hf import TransformersEngine

    tokenizer, model = tiny
    planner = rollout_planner(_cfg("algorithm.name=eapo", "rollout.group_size=4"))
    specs = planner.group(seed=7, group_id=0, n=4)
    engine = TransformersEngine(model, tokenizer.pad_token_id)
    collector = RolloutCollector(engine, tokenizer, TINY_FORMAT, LocalEnvPool("toolgym/Calculator-v0"))
    episodes = collector.collect(specs, collector.sampling(1.0, 8, seed=0))
    assert [ep.path for ep in episodes] == ["tools_on", "tools_on", "tools_off", "tools_off"]
    assert [bool(collector.pool.envs[i].unwrapped.tool_specs) for i in range(4)] == [True, True, False, False]
    batch = episodes_to_batch(episodes, tokenizer.pad_token_id)
    assert batch.path.tolist() == [0, 0, 1, 1]


def test_toolexpander_prefixes_a_demonstration_to_unsolved_tasks(tiny) -> None:
    from toolgym.trainers.rollouts.episode import Episode

    planner = rollout_planner(_cfg("algorithm.name=toolexpander", "rollout.group_size=2"))
    solved = Episode("a", 0, seed=1, prompt_text="What is 1 + 1?", actions=["<answer>2</answer>"], rewards=[1.0])
    solved.infos, solved.observations = [{"reward_components": {"success": 1.0}}], [""]
    unsolved = Episode("b", 1, seed=2, prompt_text="What is 2 + 2?", actions=["<answer>5</answer>"], rewards=[0.0])
    unsolved.infos, unsolved.observations = [{"reward_components": {"success": 0.0}}], [""]
    planner.observe([solved, unsolved])
    assert planner.group(2, 5, 2)[0].prompt_prefix.startswith("Example of a solved task:\nTask: What is 1 + 1?")
    assert planner.group(1, 6, 2)[0].prompt_prefix == ""


@pytest.mark.parametrize("name", ["matchtir", "autotir", "tapo"])
def test_gold_scored_methods_need_local_envs(name: str) -> None:
    rollout_planner(_cfg(f"algorithm.name={name}"))
    with pytest.raises(UnsupportedRollout, match="gold"):
        rollout_planner(_cfg(f"algorithm.name={name}", "env.server_url=http://127.0.0.1:1"))


def test_axpo_forks_need_local_envs() -> None:
    assert rollout_planner(_cfg("algorithm.name=axpo")).fork_options["strategy"] == "axpo_resample"
    with pytest.raises(UnsupportedRollout, match="local envs"):
        rollout_planner(_cfg("algorithm.name=axpo", "env.server_url=http://127.0.0.1:1"))


class CalculatorEngine:
    """Writes "Let me check.<tool_call>…</tool_call>" then "<answer>(the tool's result)</answer>".

    The first `n_wrong` calls compute "1 + 1" instead of the task; later calls alternate right and wrong.
    """

    def __init__(self, tokenizer, n_wrong: int) -> None:
        self.tokenizer, self.version, self.calls, self.n_wrong = tokenizer, 0, 0, n_wrong

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False)) + [TINY_FORMAT.end_id(self.tokenizer)]

    def _text(self, context: str) -> str:
        import re

        if "<tool_response>" in context:
            numbers = re.findall(r"-?[0-9]+", context.rsplit("<tool_response>", 1)[1]) or ["0"]  # "0": tool error
            return f"<answer>{numbers[0]}</answer>"
        self.calls += 1
        task = max(re.findall(r"[0-9(][0-9 ()+*-]*[0-9)]", context.split("<|assistant|>")[0]), key=len)
        expr = "1 + 1" if self.calls <= self.n_wrong or self.calls % 2 else task
        return 'Let me check.<tool_call>{"name": "calculator", "arguments": {"expression": "' + expr + '"}}</tool_call>'

    def generate(self, requests, params):
        from toolgym.trainers.engines.base import GenOutput

        outs = []
        for r in requests:
            ids = self._ids(self._text(self.tokenizer.decode(r.token_ids)))
            outs.append(GenOutput(ids, [-0.3] * len(ids)))
        return outs

    def release(self, seq_ids) -> None:
        pass


def test_axpo_resamples_all_wrong_groups_through_forks_of_local_envs(tiny) -> None:
    import asyncio

    from toolgym.trainers.learner import Learner, LearnerConfig
    from toolgym.trainers.methods import build_algorithm
    from toolgym.trainers.rollouts.strategy import EngineForks, expand_groups

    tokenizer, model = tiny
    planner = rollout_planner(_cfg("algorithm.name=axpo", "rollout.group_size=2"))
    collector = RolloutCollector(CalculatorEngine(tokenizer, 2), tokenizer, TINY_FORMAT, LocalEnvPool(ENV))
    collector.snapshots = True
    params = collector.sampling(1.0, 64)
    episodes = collector.collect(planner.group(3, 0, 2), params)
    assert all(ep.reward_components.get("success", 0) == 0 and len(ep.states) == ep.num_turns for ep in episodes)
    out = expand_groups(planner.fork_options, episodes, EngineForks(collector, params, asyncio.run))
    assert len(out) == 2 + 4  # n_prefixes=1 prefix resampled n_resample=4 times
    parent = next(ep for ep in episodes if ep.seq_id == out[2].parent_seq_id)
    for fork in out[2:]:
        cut = fork.branch_point
        prefix = "Let me check."
        assert fork.token_ids[:cut] == parent.token_ids[:cut] and sum(fork.loss_mask[:cut]) == 0
        assert sum(fork.loss_mask[cut:]) > 0 and fork.actions[0].startswith(prefix + "Let me check.<tool_call>")
        assert tokenizer.decode(fork.token_ids[parent.prompt_len : cut]) == prefix  # the frozen thinking
        assert fork.num_turns == 2 and fork.infos[0]["tool_calls"]
    batch = episodes_to_batch(out, tokenizer.pad_token_id)
    row = out.index(parent)
    assert batch.parent_id.tolist() == [-1, -1, row, row, row, row]
    assert (batch.branch_point[2:] > 0).all() and (batch.branch_point[:2] == -1).all()
    learner = Learner(model.__class__(model.config), build_algorithm("axpo"), LearnerConfig(lr=1e-2))
    metrics = learner.rl_step(batch)
    assert sorted(batch.reward[2:].tolist()) == [0.0, 0.0, 1.0, 1.0]  # resamples of the call: two now solve it
    assert "losses/skipped" not in metrics and metrics["losses/total"] == metrics["losses/total"]


def test_elpo_probes_forks_and_labels_the_critical_turn(tiny) -> None:
    import asyncio

    from toolgym.trainers.rollouts.strategy import EngineForks, expand_groups

    tokenizer, _ = tiny
    planner = rollout_planner(_cfg("algorithm.name=elpo", "rollout.group_size=2"))
    collector = RolloutCollector(CalculatorEngine(tokenizer, 2), tokenizer, TINY_FORMAT, LocalEnvPool(ENV))
    collector.snapshots = True
    params = collector.sampling(1.0, 64)
    episodes = collector.collect(planner.group(4, 0, 2), params)
    out = expand_groups(planner.fork_options, episodes, EngineForks(collector, params, asyncio.run))
    probes = out[2:]
    assert probes and all(p.parent_seq_id in {e.seq_id for e in episodes} for p in probes)
    assert all(p.actions[0] == out[0].actions[0] or p.actions[0] == out[1].actions[0] for p in probes)  # turn 0 kept
    batch = episodes_to_batch(out, tokenizer.pad_token_id)
    assert batch.reward_components["elpo_critical_turn"][:2].tolist() == [0.0, 0.0]  # every probe of turn 1 failed
    assert (batch.reward_components["elpo_critical_turn"][2:] == -1).all()


def test_cli_fails_fast_for_an_unsupported_rollout_kind(capsys, tmp_path) -> None:
    code = main(["train", "algorithm.name=matpo", f"output_dir={tmp_path}"])
    assert code == 2
    err = capsys.readouterr().err
    assert "matpo" in err and "PlannerWorker-v0" in err
    assert not any(tmp_path.iterdir())  # nothing was built or started


def _short_run(tiny_path, tmp_path, *overrides: str):
    """A few-step `toolgym train` config on the tiny model: 2 groups, short turns, 2 eval tasks."""
    common = [
        "rollout.prompts_per_step=2",
        "rollout.max_new_tokens=8",
        "rollout.max_tokens=160",
        "env.kwargs={max_turns: 2}",
        "eval.tasks=2",
        "eval.max_new_tokens=8",
        "optim.drop_zero_advantage=false",
        f"model.path={tiny_path}",
        f"output_dir={tmp_path}",
    ]
    return load_config(None, [*common, *overrides])


def test_eapo_trains_one_step_with_tool_free_rollouts(ray_session, tiny_path, tmp_path) -> None:
    cfg = _short_run(tiny_path, tmp_path, "algorithm.name=eapo", "rollout.group_size=4", "steps=1")
    result = train(cfg, progress=False)
    assert result.steps == 1
    record = next(r for r in read_metrics(cfg.run_dir / "metrics.jsonl") if "rollout/reward_mean" in r)
    assert record["rollout/episodes"] == 8 and record["rollout/tools_off_fraction"] == 0.5
    assert "losses/total" in record and record["losses/grad_norm"] == record["losses/grad_norm"]


def test_steptool_trains_on_a_pool_sampled_once(ray_session, tiny_path, tmp_path) -> None:
    """StepTool's offline setting: every step draws from episodes the starting policy sampled before RL."""
    cfg = _short_run(
        tiny_path, tmp_path, "algorithm.name=steptool", "rollout.group_size=2", "rollout.offline_episodes=6", "steps=3"
    )
    result = train(cfg, progress=False)
    assert result.steps == 3 and cfg.optim.recompute_old_logprobs  # π_old from the learner, not the old sampler
    records = [r for r in read_metrics(cfg.run_dir / "metrics.jsonl") if "rollout/reward_mean" in r]
    assert [r["rollout/episodes"] for r in records] == [4, 4, 4]
    assert all(r["rollout/policy_version_min"] == 0 for r in records)  # never re-sampled by the updated policy
    assert all(math.isfinite(r["losses/total"]) for r in records)


def test_offline_pool_draws_are_seeded_and_without_replacement() -> None:
    from toolgym.trainers.rollouts.episode import Episode
    from toolgym.trainers.rollouts.offline import OfflinePool

    pool = OfflinePool([Episode(seq_id=f"e{i}", group_id=i, seed=i) for i in range(10)], seed=3)
    first = [ep.seq_id for ep in pool.draw(5, 4)]
    assert first == [ep.seq_id for ep in pool.draw(5, 4)] and len(set(first)) == 4
    assert [ep.seq_id for ep in pool.draw(6, 4)] != first or [ep.seq_id for ep in pool.draw(7, 4)] != first
    assert len(pool.draw(0, 50)) == 10
    with pytest.raises(ValueError, match="at least one"):
        OfflinePool([])


NO_SIGNAL_HERE = {  # scripted Calculator episodes give these methods no non-zero advantage (not an error)
    "autotir": "rewards need its <think>/\\boxed{} answer format",
    "tapo": "rewards need its <think>/<answer> format",
    "spo": "both single rollouts fail against the same prior p̂: batch-normalised r − p̂ is 0",
    "vspo": "the zero-value filter drops groups with one reward",
}


@pytest.mark.parametrize("name", sorted(set(REGISTRY.names()) - set(UNSUPPORTED)))
def test_every_supported_preset_learns_from_collected_episodes(name: str, tiny_small) -> None:
    """What `toolgym train` feeds the learner: collector episodes (with the strategy's plan and forks) → batch."""
    import asyncio
    import copy
    import math

    from toolgym.trainers.learner import Learner, LearnerConfig
    from toolgym.trainers.methods import build_algorithm
    from toolgym.trainers.rollouts.strategy import collect_planned

    tokenizer, model = tiny_small
    size = 1 if REGISTRY.get(name).rollout.kind == "single_stream" else 4
    planner = rollout_planner(_cfg(f"algorithm.name={name}", f"rollout.group_size={size}"))
    collector = RolloutCollector(CalculatorEngine(tokenizer, 3), tokenizer, TINY_FORMAT, LocalEnvPool(ENV))
    specs = planner.group(5, 0, size) + planner.group(6, 1, size)
    episodes = collect_planned(collector, specs, collector.sampling(1.0, 64), planner.fork_options, asyncio.run)
    planner.observe(episodes)
    batch = episodes_to_batch(episodes, tokenizer.pad_token_id, reward_key="success")
    assert batch.gold is not None and batch.response_text is not None
    metrics = Learner(copy.deepcopy(model), build_algorithm(name), LearnerConfig(lr=1e-2)).rl_step(batch)
    assert ("losses/skipped" in metrics) == (name in NO_SIGNAL_HERE), metrics
    if name not in NO_SIGNAL_HERE:
        assert math.isfinite(metrics["losses/total"])


def test_flow_grpo_trains_each_turn_as_a_sample_of_its_own(tiny_small) -> None:
    """Rollout kind "per_turn": the learner splits each episode into one sample per assistant turn."""
    import copy

    from toolgym.trainers.learner import Learner, LearnerConfig
    from toolgym.trainers.methods import build_algorithm

    tokenizer, model = tiny_small
    collector = RolloutCollector(CalculatorEngine(tokenizer, 2), tokenizer, TINY_FORMAT, LocalEnvPool(ENV))
    episodes = collector.collect(
        rollout_planner(_cfg("algorithm.name=flow_grpo")).group(5, 0, 4), collector.sampling(1.0, 64)
    )
    turns = sum(len(ep.actions) for ep in episodes)
    assert turns > len(episodes)  # multi-turn episodes, so the split is visible
    batch = episodes_to_batch(episodes, tokenizer.pad_token_id, reward_key="success")
    learner = Learner(
        copy.deepcopy(model), build_algorithm("flow_grpo"), LearnerConfig(lr=1e-2, drop_zero_advantage=False)
    )
    metrics = learner.rl_step(batch)
    assert metrics["rollout/sequences"] == turns
    plain = Learner(copy.deepcopy(model), build_algorithm("grpo"), LearnerConfig(lr=1e-2, drop_zero_advantage=False))
    assert plain.rl_step(batch)["rollout/sequences"] == len(episodes)
