"""MATPO in `toolgym train`: the collector runs worker sub-episodes of toolgym/PlannerWorker-v0 (locally and
over HTTP) and the learner broadcasts the planner's outcome to them."""

from __future__ import annotations

import copy
import json
import math
import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ray")

from toolgym.trainers.batch import Role  # noqa: E402
from toolgym.trainers.config import load_config  # noqa: E402
from toolgym.trainers.engines.base import GenOutput  # noqa: E402
from toolgym.trainers.learner import Learner, LearnerConfig  # noqa: E402
from toolgym.trainers.methods import build_algorithm  # noqa: E402
from toolgym.trainers.ray.driver import rollout_planner  # noqa: E402
from toolgym.trainers.rollouts.collector import EpisodeSpec, RolloutCollector  # noqa: E402
from toolgym.trainers.rollouts.envs import LocalEnvPool, RemoteEnvPool  # noqa: E402
from toolgym.trainers.rollouts.stats import rollout_metrics, success_rate  # noqa: E402
from toolgym.trainers.rollouts.strategy import UnsupportedRollout  # noqa: E402
from toolgym.trainers.rollouts.to_batch import episodes_to_batch  # noqa: E402
from toolgym.trainers.tiny import TINY_FORMAT, build_tokenizer  # noqa: E402

ENV = "toolgym/PlannerWorker-v0"


class RoleEngine:
    """Plays both roles: the planner delegates the task and answers with the worker's answer; the worker
    computes the subtask with the calculator (wrongly on every `wrong`-th worker) and answers."""

    def __init__(self, tokenizer, wrong: int = 2) -> None:
        self.tokenizer, self.version, self.wrong, self.workers = tokenizer, 0, wrong, 0

    def _text(self, context: str) -> str:
        if "Subtask:" in context:
            if "<tool_response>" in context.split("Subtask:")[1]:
                return f"<answer>{_last_number(context)}</answer>"
            self.workers += 1
            expr = "1 + 1" if self.workers % self.wrong == 0 else _expression(context.split("Subtask:")[1])
            return (
                '<tool_call>{"name": "calculator", "arguments": ' + json.dumps({"expression": expr}) + "}</tool_call>"
            )
        if "<tool_response>" in context:
            return f"<answer>{_last_number(context)}</answer>"
        call = {"name": "worker", "arguments": {"subtask": context.split("<|assistant|>")[0][-40:]}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"

    def generate(self, requests, params):
        outs = []
        for request in requests:
            ids = self.tokenizer.encode(self._text(self.tokenizer.decode(request.token_ids)), add_special_tokens=False)
            ids = [*ids, TINY_FORMAT.end_id(self.tokenizer)]
            outs.append(GenOutput(ids, [-0.2] * len(ids)))
        return outs

    def release(self, seq_ids) -> None:
        pass


def _last_number(text: str) -> str:
    return (re.findall(r"-?[0-9]+", text.rsplit("<tool_response>", 1)[1]) or ["0"])[0]


def _expression(text: str) -> str:
    return max(re.findall(r"[0-9(][0-9 ()+*-]*[0-9)]", text), key=len)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


def _collect(tokenizer, pool, seeds=(5, 6), n=4):
    collector = RolloutCollector(RoleEngine(tokenizer), tokenizer, TINY_FORMAT, pool)
    specs = [EpisodeSpec(seed, g) for g, seed in enumerate(seeds) for _ in range(n)]
    return collector.collect(specs, collector.sampling(1.0, 64))


def test_each_worker_call_becomes_a_worker_episode_of_its_planner(tokenizer) -> None:
    episodes = _collect(tokenizer, LocalEnvPool(ENV))
    planners = [ep for ep in episodes if ep.role == "planner"]
    workers = [ep for ep in episodes if ep.role == "worker"]
    assert len(planners) == 8 and len(workers) == 8 and episodes[:8] == planners
    by_id = {ep.seq_id: ep for ep in planners}
    for worker in workers:
        parent = by_id[worker.parent_seq_id]
        assert worker.group_id == parent.group_id and worker.terminated
        assert "Subtask:" in worker.prompt_text and "Subtask:" not in tokenizer.decode(parent.token_ids)
        assert len(worker.actions) == 2 and worker.actions[-1].startswith("<answer>")
        assert tokenizer.decode(worker.token_ids).count("<tool_response>") == 1  # the calculator's answer
    for planner in planners:
        assert len(planner.actions) == len(planner.rewards) == 2 and planner.terminated
        assert "<tool_response>" in tokenizer.decode(planner.token_ids)  # the worker's answer, masked
    solved = [ep.reward_components.get("success", 0.0) for ep in planners]
    assert 0 < sum(solved) < len(solved)  # every second worker computes the wrong thing
    assert success_rate(episodes) == sum(solved) / len(planners)
    assert rollout_metrics(episodes, 1.0)["rollout/worker_episodes"] == 8.0


def test_matpo_broadcasts_the_planner_outcome_to_its_workers(tokenizer, tiny_small) -> None:
    episodes = _collect(tokenizer, LocalEnvPool(ENV))
    batch = episodes_to_batch(episodes, tokenizer.pad_token_id, reward_key="success")
    assert batch.role.tolist() == [int(Role.PLANNER)] * 8 + [int(Role.WORKER)] * 8
    assert batch.parent_id[8:].tolist() == [
        next(i for i, p in enumerate(episodes) if p.seq_id == w.parent_seq_id) for w in episodes[8:]
    ]
    algorithm = build_algorithm("matpo")
    broadcast = algorithm.transform_rewards(batch)
    for row in range(8, 16):
        assert broadcast.reward[row] == broadcast.reward[int(batch.parent_id[row])]
    model = tiny_small[1]
    learner = Learner(copy.deepcopy(model), algorithm, LearnerConfig(lr=1e-2, drop_zero_advantage=False))
    metrics = learner.rl_step(batch)
    assert math.isfinite(metrics["losses/total"]) and metrics["rollout/sequences"] == 16
    changed = any(not torch.equal(a, b) for a, b in zip(model.parameters(), learner.model.parameters(), strict=True))
    assert changed


def test_worker_episodes_run_over_http_too(tokenizer, env_server) -> None:
    pool = RemoteEnvPool(env_server, ENV)
    remote = _collect(tokenizer, pool, seeds=(7,), n=2)
    local = _collect(tokenizer, LocalEnvPool(ENV), seeds=(7,), n=2)
    assert [(ep.role, ep.actions, ep.observations, ep.rewards) for ep in remote] == [
        (ep.role, ep.actions, ep.observations, ep.rewards) for ep in local
    ]


def test_matpo_needs_the_planner_worker_env() -> None:
    with pytest.raises(UnsupportedRollout, match="toolgym/PlannerWorker-v0"):
        rollout_planner(load_config(None, ["algorithm.name=matpo"]))
    cfg = load_config(None, ["algorithm.name=matpo", f"env.id={ENV}", "rollout.prompts_per_step=2"])
    assert len(rollout_planner(cfg).group(3, 0, 8)) == 8
