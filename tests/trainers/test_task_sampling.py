"""Which tasks `toolgym train` rolls out: a prompt sampler's picks from a pool (SPO, VSPO), and DAPO's
dynamic-sampling refills until enough groups with varied outcomes are kept."""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ray")

from toolgym.trainers.batch import stable_key  # noqa: E402
from toolgym.trainers.config import AlgorithmConfig, OptimConfig, load_config  # noqa: E402
from toolgym.trainers.methods.spo import PromptValue, tracker  # noqa: E402
from toolgym.trainers.ray.driver import TaskDraw, rollout_planner  # noqa: E402
from toolgym.trainers.ray.workers import LearnerWorker  # noqa: E402
from toolgym.trainers.rollouts.episode import Episode  # noqa: E402
from toolgym.trainers.rollouts.sampling import TaskPool, first_groups, kept_groups, pool_size  # noqa: E402


def episode(seed: int, group: int, success: float, prompt: str = "task") -> Episode:
    ep = Episode(seq_id=f"s{seed}-{group}-{success}", group_id=group, seed=seed, prompt_text=prompt)
    ep.token_ids, ep.loss_mask, ep.logprobs = [3, 4, 5], [0, 1, 1], [0.0, -0.5, -0.5]
    ep.turn_idx, ep.span_type, ep.prompt_len = [-1, 0, 0], [0, 3, 3], 1
    ep.actions, ep.rewards, ep.terminated = ["<answer>1</answer>"], [success], True
    ep.infos = [{"reward_components": {"success": success}}]
    return ep


def test_task_pool_knows_the_prompt_key_of_every_task_seen() -> None:
    pool = TaskPool(100, 3)
    assert pool.candidate_keys() == [-101, -102, -103]  # unseen: keys no prompt hashes to (negative)
    pool.observe([episode(101, 0, 1.0, "What is 2 + 2?")])
    assert pool.candidate_keys() == [-101, stable_key("What is 2 + 2?"), -103]
    assert pool_size(0, has_sampler=True) == 1024 and pool_size(0, has_sampler=False) == 0 and pool_size(8, False) == 8


def test_kept_groups_are_the_groups_with_varied_outcomes() -> None:
    cfg = load_config(None, ["algorithm.name=dapo"])
    group_filter = rollout_planner(cfg).group_filter()
    episodes = [episode(1, 0, 1.0), episode(1, 0, 0.0), episode(2, 1, 1.0), episode(2, 1, 1.0)]
    assert [ep.group_id for ep in kept_groups(group_filter, episodes, "success")] == [0, 0]
    assert [ep.group_id for ep in first_groups(episodes, 1)] == [0, 0]
    assert rollout_planner(load_config(None, [])).group_filter() is None  # GRPO keeps every group


def test_dapo_refills_until_enough_groups_are_kept() -> None:
    cfg = load_config(
        None, ["algorithm.name=dapo", "rollout.prompts_per_step=3", "rollout.group_size=2", "rollout.workers=1"]
    )
    draw = TaskDraw(cfg, rollout_planner(cfg))
    calls = []

    def sample(parts):  # each refill draw: one group with varied outcomes, the others uniform
        specs = [spec for part in parts for spec in part]
        calls.append(specs)
        out = []
        for i, spec in enumerate(specs):
            varied = spec.group_id == specs[0].group_id
            out.append(episode(spec.seed, spec.group_id, float(varied and i % 2 == 0)))
        return out

    first = [episode(7, 0, 1.0), episode(7, 0, 0.0), episode(8, 1, 0.0), episode(8, 1, 0.0)]
    first += [episode(9, 2, 1.0), episode(9, 2, 1.0)]
    episodes, draws = draw.refill(sample, first, step=0)
    groups = list(dict.fromkeys(ep.group_id for ep in episodes))
    assert draws == 3 and len(calls) == 2 and len(groups) == 3 and groups[0] == 0
    assert len({spec.group_id for call in calls for spec in call} | {0, 1, 2}) == 2 * 3 + 3  # fresh group ids
    assert all(len([e for e in episodes if e.group_id == g]) == 2 for g in groups)


def test_spo_tasks_come_from_the_pool_by_the_learners_priorities(tiny_path, ray_session) -> None:
    worker = LearnerWorker(str(tiny_path), "tiny", AlgorithmConfig(name="spo"), OptimConfig(), 0.7)
    keys = [11, 12, 13]
    table = tracker(worker.learner.algo_state)
    table[11], table[12], table[13] = PromptValue(50.0, 0.5), PromptValue(5.0, 5.0), PromptValue(0.5, 50.0)
    picks = Counter(i for seed in range(200) for i in worker.sample_prompts(keys, 1, seed))
    assert picks[1] > 2 * max(picks[0], picks[2])  # p̂ = 0.5 is the most informative task (weights 0.55 vs 0.15)

    class Learner:  # the actor handle the driver calls: answers through the object store, like Ray
        class sample_prompts:  # noqa: N801
            @staticmethod
            def remote(candidate_keys, n, seed):
                import ray

                return ray.put(worker.sample_prompts(candidate_keys, n, seed))

    class Actors:
        learner = Learner()

    cfg = load_config(None, ["algorithm.name=spo", "rollout.group_size=1", "rollout.prompt_pool=4"])
    draw = TaskDraw(cfg, rollout_planner(cfg))
    seeds = draw.seeds(Actors(), step=0)
    offset = cfg.rollout.train_seed_offset
    assert len(seeds) == cfg.rollout.prompts_per_step and set(seeds) <= set(range(offset, offset + 4))


def test_without_a_sampler_fresh_seeds_are_drawn(ray_session) -> None:
    cfg = load_config(None, [])
    assert TaskDraw(cfg, rollout_planner(cfg)).seeds(None, step=0) is None
