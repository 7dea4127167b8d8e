"""The REST and WebSocket protocol against real server processes (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest
import websockets
from conftest import KEY_A, KEY_B, Server

CALC = "toolgym/Calculator-v0"
FLAKY = "toolgym-test/Flaky-v0"


def new_session(api: httpx.Client, env_id: str = CALC, seed: int | None = 7, **kwargs: Any) -> str:
    response = api.post("/v1/sessions", json={"env_id": env_id, "kwargs": kwargs, "seed": seed})
    assert response.status_code == 201, response.text
    return str(response.json()["session_id"])


def reset(api: httpx.Client, session_id: str, **body: Any) -> dict[str, Any]:
    response = api.post(f"/v1/sessions/{session_id}/reset", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def step(api: httpx.Client, session_id: str, action: str) -> dict[str, Any]:
    response = api.post(f"/v1/sessions/{session_id}/step", json={"action": action})
    assert response.status_code == 200, response.text
    return dict(response.json())


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    return dict(error)


def test_lists_registered_envs_with_docs_and_kwargs(api: httpx.Client) -> None:
    envs = {env["id"]: env for env in api.get("/v1/envs").json()["envs"]}
    assert {CALC, "toolgym/Calendar-v0", FLAKY} <= set(envs)
    assert "toolgym/Remote-v0" not in envs
    calc = envs[CALC]
    assert calc["summary"].startswith("Arithmetic") and "## Rewards" in calc["doc"]
    kwargs = {k["name"]: k for k in calc["kwargs"]}
    assert kwargs["max_turns"]["default"] == 4 and kwargs["max_turns"]["schema"] == {"type": "integer"}
    assert "hooks" not in kwargs  # Python objects cannot come over HTTP


def test_episode_is_played_and_persisted(api: httpx.Client) -> None:
    session_id = new_session(api, seed=11)
    first = reset(api, session_id)
    assert first["info"]["tools"][0]["function"]["name"] == "calculator"
    expression = first["info"]["messages"][-1]["content"]
    call = '<tool_call>{"name": "calculator", "arguments": {"expression": "2 * 21"}}</tool_call>'
    tool_step = step(api, session_id, call)
    assert tool_step["observation"] == "<tool_response>42</tool_response>"
    assert (tool_step["terminated"], tool_step["truncated"]) == (False, False)
    end = step(api, session_id, "<answer>42</answer>")
    assert end["terminated"] is True
    trajectory = api.get(f"/v1/sessions/{session_id}/trajectory").json()
    (episode,) = trajectory["episodes"]
    assert episode["seed"] == 11 and episode["status"] == "terminated"
    assert episode["reset_observation"] == first["observation"] and expression
    assert [s["action"] for s in episode["steps"]] == [call, "<answer>42</answer>"]
    assert episode["steps"][0]["info"] == tool_step["info"]
    assert all(s["started_at"] <= s["finished_at"] for s in episode["steps"])
    session = api.get(f"/v1/sessions/{session_id}").json()
    assert (session["episode_index"], session["step_index"], session["episode_done"]) == (0, 2, True)


def test_a_reset_closes_the_unfinished_episode_and_leaves_finished_ones(api: httpx.Client) -> None:
    session_id = new_session(api, seed=3)
    reset(api, session_id)
    step(api, session_id, "<answer>1</answer>")  # terminated
    reset(api, session_id)
    step(api, session_id, '<tool_call>{"name": "calculator", "arguments": {"expression": "1 + 1"}}</tool_call>')
    reset(api, session_id)  # the second episode was still running
    episodes = api.get(f"/v1/sessions/{session_id}/trajectory").json()["episodes"]
    assert [e["status"] for e in episodes] == ["terminated", "closed", "running"]
    assert episodes[1]["ended_at"] is not None and episodes[2]["ended_at"] is None


def test_same_seed_same_episode_and_reset_options(api: httpx.Client) -> None:
    a, b = new_session(api, seed=5), new_session(api, seed=None)
    assert reset(api, a) == reset(api, b, seed=5)
    no_tools = reset(api, a, seed=5, options={"tools": "none"})
    assert no_tools["info"]["tools"] == []
    by_id = reset(api, a, options={"task_id": "calc-3"})
    assert by_id["info"]["task_id"] == "calc-3"
    assert_error(api.post(f"/v1/sessions/{a}/reset", json={"options": {"tools": 5}}), 400, "invalid_options")
    assert_error(api.post(f"/v1/sessions/{a}/reset", json={"options": {"task_id": "x"}}), 400, "invalid_options")


def test_fork_continues_exactly_like_the_original(api: httpx.Client) -> None:
    source = new_session(api, "toolgym/Calendar-v0", seed=3)
    reset(api, source)
    step(api, source, '<tool_call>{"name": "list_people", "arguments": {}}</tool_call>')
    response = api.post(f"/v1/sessions/{source}/fork")
    assert response.status_code == 201, response.text
    fork = response.json()
    assert fork["parent_id"] == source and fork["step_index"] == 1
    actions = [
        '<tool_call>{"name": "list_events", "arguments": {"day": 0}}</tool_call>',
        '<tool_call>{"name": "cancel_event", "arguments": {"event_id": "e1"}}</tool_call>',
        "<answer>done</answer>",
    ]
    for action in actions:
        assert step(api, source, action) == step(api, fork["session_id"], action)
    original, forked = (api.get(f"/v1/sessions/{s}/trajectory").json() for s in (source, fork["session_id"]))
    assert [s["observation"] for s in original["episodes"][0]["steps"]] == [
        s["observation"] for s in forked["episodes"][0]["steps"]
    ]
    assert len(forked["episodes"][0]["steps"]) == 4 and forked["parent_id"] == source


def test_batch_steps_many_sessions_with_errors_per_item(api: httpx.Client) -> None:
    sessions = [new_session(api, seed=i) for i in range(3)]
    for session_id in sessions:
        reset(api, session_id)
    ended = new_session(api, seed=9)
    reset(api, ended)
    step(api, ended, "<answer>0</answer>")
    steps = [{"session_id": s, "action": "<answer>1</answer>"} for s in sessions]
    steps += [{"session_id": "nope", "action": "x"}, {"session_id": ended, "action": "x"}]
    response = api.post("/v1/step", json={"steps": steps})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == [200, 200, 200, 404, 409]
    assert all(r["terminated"] for r in results[:3])
    assert results[3]["error"]["code"] == "session_not_found" and results[4]["error"]["code"] == "episode_over"
    for session_id in sessions:
        (episode,) = api.get(f"/v1/sessions/{session_id}/trajectory").json()["episodes"]
        assert episode["status"] == "terminated" and len(episode["steps"]) == 1


def test_batch_reset_matches_single_resets_with_errors_per_item(api: httpx.Client) -> None:
    single, batched, closed = new_session(api), new_session(api), new_session(api)
    api.delete(f"/v1/sessions/{closed}")
    expected = reset(api, single, seed=5, options={"tools": "none"})
    resets = [
        {"session_id": batched, "seed": 5, "options": {"tools": "none"}},
        {"session_id": "nope", "seed": 1},
        {"session_id": batched, "seed": 2},
        {"session_id": closed, "seed": 3},
    ]
    response = api.post("/v1/reset", json={"resets": resets})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == [200, 404, 409, 404]
    assert {k: results[0][k] for k in ("observation", "info")} == expected
    assert results[2]["error"]["code"] == "session_busy"
    assert step(api, batched, "<answer>1</answer>") == step(api, single, "<answer>1</answer>")
    (episode,) = api.get(f"/v1/sessions/{batched}/trajectory").json()["episodes"]
    assert episode["seed"] == 5 and len(episode["steps"]) == 1
    bad = api.post("/v1/reset", json={"resets": [{"session_id": batched, "options": {"tools": ["no_such_tool"]}}]})
    assert bad.status_code == 200 and bad.json()["results"][0]["status"] == 400
    assert_error(api.post("/v1/reset", json={"resets": []}), 422, "invalid_request")


def test_websocket_reset_and_step_match_rest(api: httpx.Client, server: Server) -> None:
    rest, ws = new_session(api, seed=21), new_session(api, seed=21)
    expected = [reset(api, rest)]
    actions = [
        '<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</tool_call>',
        "<answer>2</answer>",
    ]
    expected += [step(api, rest, a) for a in actions]

    async def drive() -> list[dict[str, Any]]:
        url = server.url.replace("http", "ws") + f"/v1/sessions/{ws}/ws"
        headers = {"Authorization": f"Bearer {KEY_A}"}
        async with websockets.connect(url, additional_headers=headers) as socket:
            answers = []
            for message in [{"op": "reset"}] + [{"op": "step", "action": a} for a in actions]:
                await socket.send(json.dumps(message))
                answers.append(json.loads(await socket.recv()))
            await socket.send("not json")
            answers.append(json.loads(await socket.recv()))
            await socket.send(json.dumps({"op": "step", "action": "again"}))
            answers.append(json.loads(await socket.recv()))
            return answers

    answers = asyncio.run(drive())
    assert answers[:3] == expected
    assert answers[3]["error"]["code"] == "malformed_json"
    assert answers[4]["error"]["code"] == "episode_over"


def test_websocket_refuses_other_keys(api: httpx.Client, server: Server) -> None:
    session_id = new_session(api)

    async def connect(key: str) -> tuple[dict[str, Any], int | None]:
        url = server.url.replace("http", "ws") + f"/v1/sessions/{session_id}/ws"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {key}"}) as socket:
            message = json.loads(await socket.recv())
            await socket.wait_closed()
            return message, socket.close_code

    message, code = asyncio.run(connect(KEY_B))
    assert message["error"]["code"] == "session_not_found" and code == 4404


def test_sessions_are_private_to_their_key(api: httpx.Client, server: Server) -> None:
    session_id = new_session(api)
    other = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY_B}"})
    for method, path in [
        ("GET", f"/v1/sessions/{session_id}"),
        ("GET", f"/v1/sessions/{session_id}/trajectory"),
        ("POST", f"/v1/sessions/{session_id}/fork"),
        ("DELETE", f"/v1/sessions/{session_id}"),
    ]:
        assert_error(other.request(method, path), 404, "session_not_found")
    assert_error(other.post(f"/v1/sessions/{session_id}/reset", json={}), 404, "session_not_found")
    assert_error(httpx.get(server.url + "/v1/envs"), 401, "unauthorized")
    assert_error(httpx.get(server.url + "/v1/envs", headers={"Authorization": "Bearer wrong"}), 401, "unauthorized")
    assert api.get(f"/v1/sessions/{session_id}").status_code == 200


def test_bad_input_gets_4xx_json_errors(api: httpx.Client) -> None:
    session_id = new_session(api)
    post = api.post
    raw = {"content-type": "application/json"}
    assert_error(post("/v1/sessions", content=b'{"env_id": ', headers=raw), 400, "malformed_json")
    assert_error(post("/v1/sessions", json={"env_id": 3}), 422, "invalid_request")
    assert_error(post("/v1/sessions", json={"env_id": CALC, "seed": -1}), 422, "invalid_request")
    assert_error(post("/v1/sessions", json={"env_id": CALC, "extra": 1}), 422, "invalid_request")
    assert_error(post("/v1/sessions", json={"env_id": "toolgym/Nope-v0"}), 400, "unknown_env")
    assert_error(post("/v1/sessions", json={"env_id": "toolgym/Remote-v0"}), 400, "unknown_env")
    assert_error(post("/v1/sessions", json={"env_id": CALC, "kwargs": {"colour": 1}}), 400, "invalid_kwargs")
    assert_error(post("/v1/sessions", json={"env_id": CALC, "kwargs": {"max_turns": "many"}}), 400, "invalid_kwargs")
    assert_error(post("/v1/sessions", json={"env_id": CALC, "kwargs": {"max_turns": 0}}), 400, "invalid_kwargs")
    assert_error(post("/v1/sessions/nope/step", json={"action": "x"}), 404, "session_not_found")
    assert_error(post(f"/v1/sessions/{session_id}/step", json={"action": "x"}), 409, "reset_needed")
    reset(api, session_id)
    assert_error(post(f"/v1/sessions/{session_id}/step", json={"action": ["x"]}), 422, "invalid_request")
    assert_error(post(f"/v1/sessions/{session_id}/step", json={"action": "x" * 300_000}), 413, "action_too_large")
    assert_error(
        post(f"/v1/sessions/{session_id}/step", content=b"x" * 2_000_000, headers=raw), 413, "request_too_large"
    )
    step(api, session_id, "<answer>1</answer>")
    assert_error(post(f"/v1/sessions/{session_id}/step", json={"action": "x"}), 409, "episode_over")
    assert_error(post("/v1/step", json={"steps": []}), 422, "invalid_request")
    assert_error(api.get("/v1/nothing"), 404, "not_found")
    assert_error(api.put("/v1/envs"), 405, "method_not_allowed")
    assert api.delete(f"/v1/sessions/{session_id}").json()["status"] == "closed"
    assert_error(post(f"/v1/sessions/{session_id}/step", json={"action": "x"}), 404, "session_not_found")
    assert api.get(f"/v1/sessions/{session_id}").json()["status"] == "closed"


def test_concurrent_steps_on_one_session_get_409(api: httpx.Client, server: Server) -> None:
    session_id = new_session(api, FLAKY)
    reset(api, session_id)
    slow: dict[str, httpx.Response] = {}
    thread = threading.Thread(
        target=lambda: slow.update(r=api.post(f"/v1/sessions/{session_id}/step", json={"action": "sleep:1.0"}))
    )
    thread.start()
    try:
        for _ in range(100):
            if api.get(f"/v1/sessions/{session_id}").json()["busy"]:
                break
        assert_error(api.post(f"/v1/sessions/{session_id}/step", json={"action": "x"}), 409, "session_busy")
    finally:
        thread.join()
    assert slow["r"].status_code == 200
    assert api.post(f"/v1/sessions/{session_id}/step", json={"action": "<answer>1</answer>"}).status_code == 200


def test_env_that_raises_gives_500_with_error_id_and_others_keep_working(api: httpx.Client, server: Server) -> None:
    broken, healthy = new_session(api, FLAKY), new_session(api, FLAKY)
    reset(api, broken)
    reset(api, healthy)
    error = assert_error(api.post(f"/v1/sessions/{broken}/step", json={"action": "raise"}), 500, "internal_error")
    assert error["error_id"] in server.log_text() and "FlakyEnv was told to raise" in server.log_text()
    assert "Traceback" in server.log_text()
    assert_error(api.post(f"/v1/sessions/{broken}/step", json={"action": "x"}), 409, "session_failed")
    assert step(api, healthy, "<answer>3</answer>")["terminated"] is True


def test_step_time_limit_cuts_off_a_slow_step(api: httpx.Client) -> None:
    session_id = new_session(api, FLAKY)
    reset(api, session_id)
    error = assert_error(api.post(f"/v1/sessions/{session_id}/step", json={"action": "sleep:5"}), 408, "step_timeout")
    assert "3 s" in error["message"] and "TOOLGYM_STEP_TIMEOUT_S" in error["message"]
    assert api.get(f"/v1/sessions/{session_id}").json()["status"] == "failed"


def test_service_endpoints_and_openapi(api: httpx.Client, server: Server) -> None:
    assert httpx.get(server.url + "/healthz").json()["status"] == "ok"
    metrics = httpx.get(server.url + "/metrics").text
    assert "# TYPE toolgym_steps_total counter" in metrics and "toolgym_sessions_live" in metrics
    paths = set(httpx.get(server.url + "/openapi.json").json()["paths"])
    expected = {
        "/v1/envs",
        "/v1/sessions",
        "/v1/sessions/{session_id}/reset",
        "/v1/sessions/{session_id}/step",
        "/v1/sessions/{session_id}/fork",
        "/v1/sessions/{session_id}",
        "/v1/sessions/{session_id}/trajectory",
        "/v1/step",
    }
    assert expected <= paths


@pytest.mark.parametrize("endpoint", ["/v1/sessions", "/v1/step", "/v1/sessions/{id}/reset", "/v1/sessions/{id}/step"])
def test_fuzzed_bodies_never_cause_5xx(api: httpx.Client, endpoint: str) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    session_id = new_session(api)
    reset(api, session_id)
    path = endpoint.replace("{id}", session_id)
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=20)
    )
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=8,
    )
    keys = st.sampled_from(["env_id", "kwargs", "seed", "action", "steps", "options", "session_id", "x"])
    bodies = st.dictionaries(keys, values | st.just(CALC) | st.just(session_id), max_size=4) | values

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body=bodies)
    def check(body: Any) -> None:
        response = api.post(path, json=body)
        assert response.status_code < 500, (body, response.text)
        if response.status_code >= 400:
            assert set(response.json()["error"]) >= {"code", "message"}

    check()


def test_closing_a_session_ends_its_websocket_too(api: httpx.Client, server: Server) -> None:
    session_id = new_session(api)

    async def drive() -> list[dict[str, Any]]:
        url = server.url.replace("http", "ws") + f"/v1/sessions/{session_id}/ws"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {KEY_A}"}) as socket:
            await socket.send(json.dumps({"op": "reset", "seed": 1}))
            first = json.loads(await socket.recv())
            assert (await asyncio.to_thread(api.delete, f"/v1/sessions/{session_id}")).status_code == 200
            await socket.send(json.dumps({"op": "step", "action": "<answer>1</answer>"}))
            return [first, json.loads(await socket.recv())]

    first, after = asyncio.run(drive())
    assert "observation" in first
    assert after["error"]["code"] == "session_not_found"


def test_fuzzed_kwargs_and_options_never_cause_5xx(api: httpx.Client) -> None:
    """Every hosted env, built and reset with arbitrary values for the kwargs and options it accepts."""
    for env in api.get("/v1/envs").json()["envs"]:
        fuzz_env(api, env["id"], [k["name"] for k in env["kwargs"]] or ["none"])


def fuzz_env(api: httpx.Client, env_id: str, names: list[str]) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers(-3, 10**6) | st.text(max_size=8)
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=6,
    )
    options = st.dictionaries(
        st.sampled_from(["task_id", "tools"]), values | st.sampled_from(["all", "none"]), max_size=2
    )

    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
    @given(kwargs=st.dictionaries(st.sampled_from(names), values, max_size=2), opts=options)
    def check(kwargs: dict[str, Any], opts: dict[str, Any]) -> None:
        created = api.post("/v1/sessions", json={"env_id": env_id, "kwargs": kwargs})
        assert created.status_code < 500, (env_id, kwargs, created.text)
        if created.status_code != 201:
            return
        session_id = created.json()["session_id"]
        for response in (
            api.post(f"/v1/sessions/{session_id}/reset", json={"seed": 1, "options": opts}),
            api.post(f"/v1/sessions/{session_id}/step", json={"action": "<answer>1</answer>"}),
        ):
            assert response.status_code < 500, (env_id, kwargs, opts, response.text)
        api.delete(f"/v1/sessions/{session_id}")

    check()
