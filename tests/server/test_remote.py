"""`RemoteEnv` against a real server yields exactly what the local env yields, for every registered id."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from conftest import KEY_A, KEY_B, Server

import toolgym  # noqa: F401 - registers the ids
from toolgym.envs.registration import ENV_IDS
from toolgym.envs.remote import AsyncEnvClient, EnvClient, RemoteEnv, RemoteError, RemoteInputError

SERVED = [env_id for env_id in ENV_IDS if env_id != "toolgym/Remote-v0"]
MALFORMED = "<tool_call>{not json</tool_call>"
UNKNOWN = '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>'


def make_local(env_id: str) -> gym.Env[str, str]:
    try:
        return gym.make(env_id)
    except ImportError as exc:  # ids whose optional package is not installed here
        pytest.skip(f"{env_id} needs a package that is missing: {exc}")


def actions_for(env: gym.Env[str, str]) -> list[str]:
    task = env.unwrapped.task  # type: ignore[attr-defined]
    gold = list(task.gold_actions) if task is not None and task.gold_actions else ["<answer>0</answer>"]
    return [MALFORMED, UNKNOWN, "plain text, no call", *gold]


def play(env: gym.Env[str, str], seed: int, options: dict[str, Any] | None, actions: list[str]) -> list[Any]:
    """Reset, then step until the episode ends; everything the env yields, in order, as it was when yielded.

    (Copied at once: a local env's info may alias its world, which later steps change.)
    """
    out: list[Any] = [copy.deepcopy(env.reset(seed=seed, options=options))]
    for action in actions:
        result = copy.deepcopy(env.step(action))
        out.append(result)
        if result[2] or result[3]:
            with pytest.raises(gym.error.ResetNeeded):
                env.step(action)
            break
    return out


@pytest.mark.parametrize("env_id", SERVED)
def test_remote_env_yields_what_the_local_env_yields(env_id: str, sqlite_server: Server) -> None:
    local = make_local(env_id)
    remote = gym.make("toolgym/Remote-v0", base_url=sqlite_server.url, env_id=env_id, api_key=KEY_A)
    try:
        for seed, options in [(0, None), (1234, None), (7, {"tools": "none"})]:
            local.reset(seed=seed, options=options)
            actions = actions_for(local)
            expected = play(local, seed, options, actions)
            got = play(remote, seed, options, actions)
            assert got == expected, f"{env_id} seed {seed}: remote differs from local"
    finally:
        remote.close()
        local.close()


def test_remote_fork_and_trajectory(sqlite_server: Server) -> None:
    env = RemoteEnv(sqlite_server.url, "toolgym/Calculator-v0", {"max_turns": 3}, api_key=KEY_A)
    observation, _ = env.reset(seed=4)
    env.step(UNKNOWN)
    fork = env.fork()
    try:
        assert fork.session_id != env.session_id
        assert env.step(MALFORMED) == fork.step(MALFORMED)
        assert fork.step("x")[3] is True  # max_turns=3 truncates the third step
        trajectory = fork.trajectory()
        assert trajectory["parent_id"] == env.session_id
        assert trajectory["episodes"][0]["reset_observation"] == observation
        assert len(trajectory["episodes"][0]["steps"]) == 3
    finally:
        fork.close()
        env.close()


def test_remote_errors_are_typed(sqlite_server: Server) -> None:
    with pytest.raises(RemoteInputError) as unknown:
        RemoteEnv(sqlite_server.url, "toolgym/Nope-v0", api_key=KEY_A)
    assert unknown.value.status == 400 and unknown.value.code == "unknown_env"
    with pytest.raises(RemoteError) as unauthorized:
        RemoteEnv(sqlite_server.url, "toolgym/Calculator-v0")
    assert unauthorized.value.status == 401
    env = RemoteEnv(sqlite_server.url, "toolgym/Calculator-v0", api_key=KEY_A)
    with pytest.raises(gym.error.ResetNeeded):
        env.step("x")
    with pytest.raises(ValueError, match="invalid_options"):
        env.reset(options={"tools": ["nope"]})
    env.close()
    client = EnvClient(sqlite_server.url, KEY_B)
    with pytest.raises(RemoteError) as hidden:
        client.get_session(env.session_id or "closed")
    assert hidden.value.status == 404
    client.close()


def test_async_client_drives_sessions_concurrently(sqlite_server: Server) -> None:
    async def episode(client: AsyncEnvClient, seed: int) -> dict[str, Any]:
        session = await client.create_session("toolgym/Calculator-v0", seed=seed)
        await client.reset(session["session_id"])
        result = await client.step(session["session_id"], "<answer>1</answer>")
        await client.close_session(session["session_id"])
        return result

    async def main() -> list[dict[str, Any]]:
        client = AsyncEnvClient(sqlite_server.url, KEY_A)
        try:
            envs = await client.list_envs()
            assert "toolgym/Calculator-v0" in {e["id"] for e in envs}
            return await asyncio.gather(*(episode(client, seed) for seed in range(8)))
        finally:
            await client.aclose()

    results = asyncio.run(main())
    assert all(r["terminated"] for r in results)


def test_clients_batch_reset_like_single_resets(sqlite_server: Server) -> None:
    client = EnvClient(sqlite_server.url, KEY_A)
    one, two = (client.create_session("toolgym/Calculator-v0")["session_id"] for _ in range(2))
    expected = [client.reset(one, seed=s) for s in (3, 4)]

    async def batched() -> list[dict[str, Any]]:
        async_client = AsyncEnvClient(sqlite_server.url, KEY_A)
        try:
            return await async_client.batch_reset([(one, 3, None), (two, 4, None)])
        finally:
            await async_client.aclose()

    for results in (client.batch_reset([(one, 3, None), (two, 4, None)]), asyncio.run(batched())):
        assert [r["status"] for r in results] == [200, 200]
        assert [{"observation": r["observation"], "info": r["info"]} for r in results] == expected
    client.close()


def test_readme_remote_example_runs(sqlite_server: Server) -> None:
    """The README's RemoteEnv example, pointed at the test server."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("## Hosting environments over HTTP", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    code = code.replace('"http://127.0.0.1:8000"', repr(sqlite_server.url)).replace(
        "api_key=None", f"api_key={KEY_A!r}"
    )
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - our own documentation
