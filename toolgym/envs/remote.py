"""HTTP clients of the toolgym server (`EnvClient`, `AsyncEnvClient`) and `RemoteEnv`, a `gym.Env` over HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import httpx

from toolgym.envs.spaces import UnicodeText

JsonDict = dict[str, Any]
_RESET_NEEDED = frozenset({"episode_over", "reset_needed"})


class RemoteError(RuntimeError):
    """An error answer of the server: its HTTP status, code, message and (for 500s) error id."""

    def __init__(self, status: int, code: str, message: str, error_id: str | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.error_id = status, code, message, error_id


class RemoteInputError(RemoteError, ValueError):
    """A 4xx caused by what the client sent (unknown env or kwargs, bad options, wrong types)."""


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    body: Any = None


class _ClientBase:
    """What both clients share: the requests of the protocol and the decoding of answers."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = timeout

    # ------------------------------------------------------------------ requests
    @staticmethod
    def _list_envs() -> _Call:
        return _Call("GET", "/v1/envs")

    @staticmethod
    def _create(env_id: str, kwargs: JsonDict | None, seed: int | None) -> _Call:
        return _Call("POST", "/v1/sessions", {"env_id": env_id, "kwargs": kwargs or {}, "seed": seed})

    @staticmethod
    def _reset(session_id: str, seed: int | None, options: JsonDict | None) -> _Call:
        return _Call("POST", f"/v1/sessions/{session_id}/reset", {"seed": seed, "options": options})

    @staticmethod
    def _step(session_id: str, action: str) -> _Call:
        return _Call("POST", f"/v1/sessions/{session_id}/step", {"action": action})

    @staticmethod
    def _batch(steps: list[tuple[str, str]]) -> _Call:
        return _Call("POST", "/v1/step", {"steps": [{"session_id": s, "action": a} for s, a in steps]})

    @staticmethod
    def _batch_reset(resets: list[tuple[str, int | None, JsonDict | None]]) -> _Call:
        items = [{"session_id": s, "seed": seed, "options": options} for s, seed, options in resets]
        return _Call("POST", "/v1/reset", {"resets": items})

    @staticmethod
    def _fork(session_id: str) -> _Call:
        return _Call("POST", f"/v1/sessions/{session_id}/fork")

    @staticmethod
    def _get(session_id: str) -> _Call:
        return _Call("GET", f"/v1/sessions/{session_id}")

    @staticmethod
    def _trajectory(session_id: str) -> _Call:
        return _Call("GET", f"/v1/sessions/{session_id}/trajectory")

    @staticmethod
    def _close(session_id: str) -> _Call:
        return _Call("DELETE", f"/v1/sessions/{session_id}")

    # ------------------------------------------------------------------ answers
    @staticmethod
    def _decode(response: httpx.Response) -> Any:
        if response.status_code < 400:
            return response.json()
        try:
            error = response.json()["error"]
            code, message, error_id = str(error["code"]), str(error["message"]), error.get("error_id")
        except (ValueError, KeyError, TypeError):
            code, message, error_id = "http_error", response.text[:500], None
        kind = RemoteInputError if response.status_code in (400, 413, 422) else RemoteError
        raise kind(response.status_code, code, message, error_id)


class EnvClient(_ClientBase):
    """Blocking client: one method per endpoint, each returning the decoded JSON answer."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 120.0) -> None:
        super().__init__(base_url, api_key, timeout)
        self._http = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout)

    def _send(self, call: _Call) -> Any:
        return self._decode(self._http.request(call.method, call.path, json=call.body))

    def list_envs(self) -> list[JsonDict]:
        """Hosted env ids with docs and accepted kwargs."""
        return list(self._send(self._list_envs())["envs"])

    def create_session(self, env_id: str, kwargs: JsonDict | None = None, seed: int | None = None) -> JsonDict:
        """A new session; its id is under "session_id"."""
        return dict(self._send(self._create(env_id, kwargs, seed)))

    def reset(self, session_id: str, seed: int | None = None, options: JsonDict | None = None) -> JsonDict:
        """`{"observation", "info"}` of a new episode."""
        return dict(self._send(self._reset(session_id, seed, options)))

    def step(self, session_id: str, action: str) -> JsonDict:
        """`{"observation", "reward", "terminated", "truncated", "info"}`."""
        return dict(self._send(self._step(session_id, action)))

    def batch_step(self, steps: list[tuple[str, str]]) -> list[JsonDict]:
        """Step many sessions at once; each result has a "status" and either the step fields or "error"."""
        return list(self._send(self._batch(steps))["results"])

    def batch_reset(self, resets: list[tuple[str, int | None, JsonDict | None]]) -> list[JsonDict]:
        """Reset many sessions at once (`(session_id, seed, options)` each); each result has a "status" and
        either "observation" and "info" or "error"."""
        return list(self._send(self._batch_reset(resets))["results"])

    def fork(self, session_id: str) -> JsonDict:
        """A new session in the same state."""
        return dict(self._send(self._fork(session_id)))

    def get_session(self, session_id: str) -> JsonDict:
        """A session's status."""
        return dict(self._send(self._get(session_id)))

    def trajectory(self, session_id: str) -> JsonDict:
        """Every persisted episode and step of a session."""
        return dict(self._send(self._trajectory(session_id)))

    def close_session(self, session_id: str) -> JsonDict:
        """Close a session."""
        return dict(self._send(self._close(session_id)))

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()


class AsyncEnvClient(_ClientBase):
    """The asyncio twin of `EnvClient` (same methods, awaited)."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 120.0) -> None:
        super().__init__(base_url, api_key, timeout)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=self.headers, timeout=timeout)

    async def _send(self, call: _Call) -> Any:
        return self._decode(await self._http.request(call.method, call.path, json=call.body))

    async def list_envs(self) -> list[JsonDict]:
        """Hosted env ids with docs and accepted kwargs."""
        return list((await self._send(self._list_envs()))["envs"])

    async def create_session(self, env_id: str, kwargs: JsonDict | None = None, seed: int | None = None) -> JsonDict:
        """A new session; its id is under "session_id"."""
        return dict(await self._send(self._create(env_id, kwargs, seed)))

    async def reset(self, session_id: str, seed: int | None = None, options: JsonDict | None = None) -> JsonDict:
        """`{"observation", "info"}` of a new episode."""
        return dict(await self._send(self._reset(session_id, seed, options)))

    async def step(self, session_id: str, action: str) -> JsonDict:
        """`{"observation", "reward", "terminated", "truncated", "info"}`."""
        return dict(await self._send(self._step(session_id, action)))

    async def batch_step(self, steps: list[tuple[str, str]]) -> list[JsonDict]:
        """Step many sessions at once; each result has a "status" and either the step fields or "error"."""
        return list((await self._send(self._batch(steps)))["results"])

    async def batch_reset(self, resets: list[tuple[str, int | None, JsonDict | None]]) -> list[JsonDict]:
        """Reset many sessions at once (`(session_id, seed, options)` each); each result has a "status" and
        either "observation" and "info" or "error"."""
        return list((await self._send(self._batch_reset(resets)))["results"])

    async def fork(self, session_id: str) -> JsonDict:
        """A new session in the same state."""
        return dict(await self._send(self._fork(session_id)))

    async def get_session(self, session_id: str) -> JsonDict:
        """A session's status."""
        return dict(await self._send(self._get(session_id)))

    async def trajectory(self, session_id: str) -> JsonDict:
        """Every persisted episode and step of a session."""
        return dict(await self._send(self._trajectory(session_id)))

    async def close_session(self, session_id: str) -> JsonDict:
        """Close a session."""
        return dict(await self._send(self._close(session_id)))

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()


class RemoteEnv(gym.Env[str, str]):
    """A toolgym env hosted by a toolgym server, driven over HTTP: same seed and actions, same results.

    ## Arguments
    `base_url` (e.g. "http://127.0.0.1:8000"), `env_id` (a hosted id), `env_kwargs` (its constructor
    kwargs), `api_key` (a bearer key when the server has keys), `timeout` (seconds per request).

    Example:
        >>> env = gym.make("toolgym/Remote-v0", base_url="http://127.0.0.1:8000",
        ...                env_id="toolgym/Calculator-v0")  # doctest: +SKIP
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - gymnasium declares it per instance

    def __init__(
        self,
        base_url: str,
        env_id: str,
        env_kwargs: JsonDict | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        session_id: str | None = None,
    ) -> None:
        self.base_url, self.env_id, self.env_kwargs, self.api_key = base_url, env_id, dict(env_kwargs or {}), api_key
        self.observation_space = UnicodeText()
        self.action_space = UnicodeText()
        self.client = EnvClient(base_url, api_key, timeout)
        if session_id is None:
            try:
                session_id = str(self.client.create_session(env_id, self.env_kwargs)["session_id"])
            except BaseException:
                self.client.close()
                raise
        self.session_id = session_id

    def reset(self, *, seed: int | None = None, options: JsonDict | None = None) -> tuple[str, JsonDict]:
        """Reset the hosted env."""
        super().reset(seed=seed)
        answer = self.client.reset(self.session_id, seed=seed, options=options)
        return answer["observation"], answer["info"]

    def step(self, action: str) -> tuple[str, float, bool, bool, JsonDict]:
        """Step the hosted env (the server commits the step before answering)."""
        try:
            answer = self.client.step(self.session_id, action)
        except RemoteError as error:
            if error.code in _RESET_NEEDED:
                raise gym.error.ResetNeeded(error.message) from error
            raise
        return (
            answer["observation"],
            float(answer["reward"]),
            bool(answer["terminated"]),
            bool(answer["truncated"]),
            answer["info"],
        )

    def fork(self) -> RemoteEnv:
        """A second RemoteEnv on a new server session in exactly this session's state."""
        forked = self.client.fork(self.session_id)
        return RemoteEnv(
            self.base_url,
            self.env_id,
            self.env_kwargs,
            self.api_key,
            timeout=self.client.timeout,
            session_id=forked["session_id"],
        )

    def trajectory(self) -> JsonDict:
        """Everything this session did, as persisted by the server."""
        return self.client.trajectory(self.session_id)

    def close(self) -> None:
        """Close the server session (if still open) and the connection."""
        if getattr(self, "session_id", None) is None:
            return
        try:
            self.client.close_session(self.session_id)
        except (RemoteError, httpx.HTTPError):
            pass
        finally:
            self.session_id = None  # type: ignore[assignment]
            self.client.close()
