"""`toolgym/SimulatedAPI-v0`: default catalog offline, oracle on many tasks, every backend, cache in info."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import toolgym  # noqa: F401
from toolgym.simulators import load_catalog

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "simulators" / "simulated"))
from simfakes import CRUD_CATALOG, FakeOpenAI, build_bigram_lm  # noqa: E402

ENV_ID = "toolgym/SimulatedAPI-v0"


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    yield server
    server.close()


def _play(env: gym.Env[str, str], actions: list[str]) -> list[Any]:
    trace: list[Any] = []
    for action in actions:
        step = env.step(action)
        trace.append(step)
        if step[2] or step[3]:
            break
    return trace


def _solve(env: gym.Env[str, str], task_id: str) -> tuple[float, bool, list[dict[str, Any]]]:
    """Replay the task's oracle: the final reward, whether it ended, and every step's info."""
    env.reset(options={"task_id": task_id})
    steps = _play(env, list(env.unwrapped.task.gold_actions))
    return steps[-1][1], steps[-1][2], [step[4] for step in steps]


def test_default_catalog_has_30_tools_over_5_domains_with_output_schemas() -> None:
    catalog = load_catalog()
    domains = Counter(spec.annotations.tags[0] for spec in catalog)
    assert len(catalog) >= 30 and len(domains) >= 5 and all(count >= 1 for count in domains.values())
    assert all(spec.output_schema is not None for spec in catalog)


def test_no_argument_make_works_offline_and_passes_check_env() -> None:
    env = gym.make(ENV_ID)
    obs, info = env.reset(seed=0)
    assert obs == env.unwrapped.task.instruction and len(info["tools"]) == len(load_catalog())
    assert info["simulator"] == {
        "backend": "offline",
        "cache_mode": "record",
        "cache_hits": 0,
        "cache_misses": 0,
        "fallbacks": 0,
    }
    check_env(env.unwrapped, skip_render_check=True)


def test_oracle_scores_one_on_200_tasks_of_every_kind() -> None:
    env = gym.make(ENV_ID)
    kinds: Counter[str] = Counter()
    for index in range(200):
        reward, terminated, _ = _solve(env, f"sim-{index}")
        assert terminated and reward == 1.0, (index, env.unwrapped.task.instruction)
        kinds[env.unwrapped.task.metadata["goal"]["kind"]] += 1
    assert set(kinds) == {"exists", "field", "absent", "answer"} and min(kinds.values()) >= 20


def test_goals_are_verified_not_given_away() -> None:
    env = gym.make(ENV_ID)
    by_kind: dict[str, str] = {}
    for index in range(60):
        env.reset(options={"task_id": f"sim-{index}"})
        by_kind.setdefault(env.unwrapped.task.metadata["goal"]["kind"], f"sim-{index}")
    for kind, task_id in by_kind.items():  # answering without doing the work scores 0
        env.reset(options={"task_id": task_id})
        _, reward, terminated, _, _ = env.step("<answer>done</answer>" if kind != "answer" else "<answer>42x</answer>")
        assert terminated and reward == 0.0, kind
    with pytest.raises(ValueError, match="sim-<non-negative int>"):
        env.reset(options={"task_id": "task-1"})


def _backend(kind: str, fake_openai: FakeOpenAI, tmp_path: Path) -> Any:
    if kind == "openai":
        return fake_openai.backend()
    model = build_bigram_lm(tmp_path / "braces", {" ": "{", "{": "}"})
    return {"kind": "transformers", "path": str(model), "max_new_tokens": 4}


@pytest.mark.parametrize("kind", ["openai", "transformers"])
def test_oracle_scores_one_with_model_backends(kind: str, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    """The fake server lies (valid values contradicting the state); the programmed model answers `{}`."""
    catalog = None if kind == "openai" else CRUD_CATALOG  # `{}` fits no output schema of the default catalog
    env = gym.make(ENV_ID, catalog=catalog, backend=_backend(kind, fake_openai, tmp_path), max_retries=1)
    sources: Counter[str] = Counter()
    for index in range(6 if kind == "transformers" else 10):
        reward, terminated, infos = _solve(env, f"sim-{index}")
        assert terminated and reward == 1.0, (kind, index, env.unwrapped.task.instruction)
        sources.update(call["simulator"]["source"] for info in infos for call in info["tool_calls"])
    assert env.unwrapped.simulator.counts["backend_calls"] > 0
    if kind == "openai":
        assert fake_openai.requests and env.unwrapped.simulator.counts["fallbacks"] == 0
    assert sources["backend"] > 0  # model answers were used, not only offline fallbacks


def test_cache_hits_and_misses_in_info_and_byte_identical_replay(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    path = str(tmp_path / "env-cache.sqlite")
    recorder = gym.make(ENV_ID, backend=fake_openai.backend(), cache={"mode": "record", "path": path})

    def episode(env: gym.Env[str, str]) -> tuple[str, list[dict[str, Any]]]:
        obs, _ = env.reset(seed=4, options={"task_id": "sim-3"})
        actions = list(env.unwrapped.task.gold_actions)
        read = '<tool_call>{"name": "list_contacts", "arguments": {}}</tool_call>'
        steps = _play(env, [read, read, *actions])
        observations = json.dumps([obs, *[[s[0], s[1], s[2], s[3]] for s in steps]], ensure_ascii=False)
        return observations, [s[4] for s in steps]

    recorded, infos = episode(recorder)
    assert infos[0]["simulator"]["cache_misses"] == 1 and infos[0]["tool_calls"][0]["simulator"]["cache"] == "miss"
    assert infos[1]["simulator"]["cache_hits"] == 1 and infos[1]["tool_calls"][0]["simulator"]["cache"] == "hit"
    again, infos = episode(recorder)  # same episode, warm cache: all hits
    assert again == recorded and sum(i["simulator"]["cache_misses"] for i in infos) == 0
    asked = len(fake_openai.requests)
    fake_openai.responder = lambda body: (500, '{"error": "replay must not call the backend"}')
    replayer = gym.make(ENV_ID, backend=fake_openai.backend(), cache={"mode": "replay", "path": path})
    replayed, infos = episode(replayer)
    assert replayed == recorded and len(fake_openai.requests) == asked
    assert all(i["simulator"]["cache_mode"] == "replay" for i in infos)
    assert sum(i["simulator"]["cache_hits"] for i in infos) == sum(len(i["tool_calls"]) for i in infos) - sum(
        c["simulator"]["cache"] == "none" for i in infos for c in i["tool_calls"]
    )
    for env in (recorder, replayer):  # close releases the HTTP pool and the SQLite file
        env.close()
        assert env.unwrapped.simulator.backend._client.is_closed
        with pytest.raises(sqlite3.ProgrammingError):
            len(env.unwrapped.simulator.cache)
    off = gym.make(ENV_ID, cache="off")
    off.reset(options={"task_id": "sim-3"})
    info = off.step('<tool_call>{"name": "list_contacts", "arguments": {}}</tool_call>')[4]
    assert info["simulator"]["cache_mode"] == "off" and info["tool_calls"][0]["simulator"]["cache"] == "off"


def test_fork_carries_the_episode_cache_so_infos_match() -> None:
    read = '<tool_call>{"name": "list_contacts", "arguments": {}}</tool_call>'
    env = gym.make(ENV_ID).unwrapped
    env.reset(seed=2, options={"task_id": "sim-3"})
    actions = [read, read, read, *env.task.gold_actions]
    reference = _play(env, actions)
    assert [s[4]["simulator"]["cache_hits"] for s in reference[:3]] == [0, 1, 1]
    for k in range(1, len(actions)):
        env.reset(seed=2, options={"task_id": "sim-3"})  # a new episode starts with an empty cache
        _play(env, actions[:k])
        fork = gym.make(ENV_ID).unwrapped
        fork.reset(seed=99)  # an unrelated episode first: its cache must not leak into the fork
        fork.step(read)
        fork.set_state(json.loads(json.dumps(env.get_state())))
        assert json.dumps(_play(fork, actions[k:])) == json.dumps(reference[k:]), k


def test_parse_errors_mixed_with_calls_pair_reports_by_call_id() -> None:
    """Regression: a strict zip over records vs reports broke on actions with parse errors."""
    env = gym.make(ENV_ID, budget={"calls": 3})
    env.reset(options={"task_id": "sim-3"})
    action = json.dumps(
        {
            "content": "",
            "tool_calls": [
                {"id": "dup", "type": "function", "function": {"name": "list_contacts", "arguments": "{}"}},
                "not a call",
                {"id": "dup", "type": "function", "function": {"name": "get_contact", "arguments": "{}"}},
                {"id": "x", "type": "function", "function": {"name": "no_such_tool", "arguments": "{}"}},
                {"id": "y", "type": "function", "function": {"name": "list_notes", "arguments": "{}"}},
                {"id": "z", "type": "function", "function": {"name": "list_tasks", "arguments": "{}"}},
            ],
        }
    )
    obs, _, _, _, info = env.step(action)
    by_name = {(c["name"], c["error_kind"]): c["simulator"] for c in info["tool_calls"]}
    assert by_name[("", "parse_error")]["source"] == "parse_error"
    assert by_name[("list_contacts", None)]["source"] == "backend"
    assert by_name[("get_contact", "invalid_arguments")]["source"] == "none"  # reached it, refused there
    assert by_name[("no_such_tool", "unknown_tool")]["source"] == "not_simulated"
    assert by_name[("list_notes", None)]["source"] == "backend"
    assert by_name[("list_tasks", "budget_exhausted")]["source"] == "not_simulated"  # the budget answered
    assert obs.count("<tool_response>") == 6


def test_custom_catalog_fork_and_clear_errors(fake_openai: FakeOpenAI) -> None:
    env = gym.make(ENV_ID, catalog=CRUD_CATALOG, backend=fake_openai.backend(), max_turns=4)
    check_env(env.unwrapped, skip_render_check=True)
    env.reset(seed=1)
    first = env.unwrapped.task.gold_actions[0]
    env.step(first)
    state = json.loads(json.dumps(env.unwrapped.get_state()))
    fork = gym.make(ENV_ID, catalog=CRUD_CATALOG, backend=fake_openai.backend(), max_turns=4).unwrapped
    fork.set_state(state)
    rest = list(env.unwrapped.task.gold_actions[1:])
    assert json.dumps(_play(fork, rest), default=str) == json.dumps(_play(env, rest), default=str)
    with pytest.raises(ValueError, match="no stateful tools"):
        gym.make(ENV_ID, catalog=[{"name": "ping", "parameters": {"type": "object", "properties": {}}}])
    with pytest.raises(ValueError, match="unknown backend kind"):
        gym.make(ENV_ID, backend={"kind": "nope"})
