"""Env pools the collector steps: local (`gym.make`) or a toolgym server over HTTP (`AsyncEnvClient`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

StepResult = tuple[str, float, bool, bool, dict[str, Any]]
ResetResult = tuple[str, dict[str, Any]]
T = TypeVar("T")


class EnvPool(Protocol):
    """Environment instances kept alive between batches, reset and stepped many at a time."""

    async def acquire(self, n: int) -> list[Any]:
        """At least `n` env handles (the first `n` are returned)."""
        ...

    async def reset_many(
        self, handles: list[Any], seeds: list[int], options: list[dict[str, Any]]
    ) -> list[ResetResult]:
        """Reset each handle with its seed and options."""
        ...

    async def step_many(self, handles: list[Any], actions: list[str]) -> list[StepResult]:
        """Step each handle with its action."""
        ...

    async def close(self) -> None:
        """Free every env."""
        ...


class LocalEnvPool:
    """`gym.make` environments in this process (steps are cheap, so they run inline)."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None = None) -> None:
        import toolgym  # noqa: F401  (registers the ids)

        self.env_id, self.env_kwargs = env_id, dict(env_kwargs or {})
        self.envs: list[Any] = []

    async def acquire(self, n: int) -> list[Any]:
        """Local envs, created on first need."""
        import gymnasium as gym

        while len(self.envs) < n:
            self.envs.append(gym.make(self.env_id, **self.env_kwargs))
        return self.envs[:n]

    async def reset_many(
        self, handles: list[Any], seeds: list[int], options: list[dict[str, Any]]
    ) -> list[ResetResult]:
        """Reset inline."""
        return [env.reset(seed=s, options=o or None) for env, s, o in zip(handles, seeds, options, strict=True)]

    async def step_many(self, handles: list[Any], actions: list[str]) -> list[StepResult]:
        """Step inline."""
        out = []
        for env, action in zip(handles, actions, strict=True):
            obs, reward, terminated, truncated, info = env.step(action)
            out.append((obs, float(reward), bool(terminated), bool(truncated), info))
        return out

    async def close(self) -> None:
        """Close the envs."""
        for env in self.envs:
            env.close()
        self.envs = []


class RemoteEnvPool:
    """Sessions on a toolgym server: resets run concurrently, each turn's steps go in one batch request."""

    def __init__(
        self,
        base_url: str,
        env_id: str,
        env_kwargs: dict[str, Any] | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.base_url, self.env_id, self.env_kwargs = base_url, env_id, dict(env_kwargs or {})
        self.api_key, self.timeout = api_key, timeout
        self.sessions: list[str] = []
        self._client: Any = None
        self._loop: Any = None

    def _http(self) -> Any:
        """The async client, rebuilt when the event loop changed (each `asyncio.run` is a new loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = _client(self.base_url, self.api_key, self.timeout)
            self._loop = loop
        return self._client

    async def acquire(self, n: int) -> list[Any]:
        """Server sessions, created concurrently on first need."""
        client = self._http()
        missing = n - len(self.sessions)
        if missing > 0:
            made = await asyncio.gather(*(client.create_session(self.env_id, self.env_kwargs) for _ in range(missing)))
            self.sessions += [str(m["session_id"]) for m in made]
        return self.sessions[:n]

    async def reset_many(
        self, handles: list[Any], seeds: list[int], options: list[dict[str, Any]]
    ) -> list[ResetResult]:
        """One `/v1/reset` batch request for every session (retried on a dropped connection: same seed, same episode)."""
        resets = [(h, s, o or None) for h, s, o in zip(handles, seeds, options, strict=True)]
        results = await _retrying(lambda: self._http().batch_reset(resets))
        return [(r["observation"], r["info"]) for r in _checked(results)]

    async def step_many(self, handles: list[Any], actions: list[str]) -> list[StepResult]:
        """One `/v1/step` batch request for every session of this turn."""
        results = await self._http().batch_step(list(zip(handles, actions, strict=True)))
        return [
            (r["observation"], float(r["reward"]), bool(r["terminated"]), bool(r["truncated"]), r["info"])
            for r in _checked(results)
        ]

    async def close(self) -> None:
        """Close the sessions and the client."""
        if not self.sessions:
            return
        client = self._http()
        await asyncio.gather(*(client.close_session(s) for s in self.sessions), return_exceptions=True)
        await client.aclose()
        self.sessions, self._client = [], None


def _client(base_url: str, api_key: str | None, timeout: float) -> Any:
    """An `AsyncEnvClient` whose pooled connections expire before the server's keep-alive timeout.

    uvicorn closes idle connections after 5 s; reusing one at that moment fails with a ReadError.
    Connections idle for 1 s are not reused, new connects are retried, and the pool stays small.
    """
    import httpx

    from toolgym.envs.remote import AsyncEnvClient

    client = AsyncEnvClient(base_url, api_key, timeout)
    limits = httpx.Limits(max_connections=16, keepalive_expiry=1.0)
    client._http = httpx.AsyncClient(  # same settings as AsyncEnvClient's, plus the pool limits
        base_url=client.base_url,
        headers=client.headers,
        timeout=timeout,
        transport=httpx.AsyncHTTPTransport(retries=3, limits=limits),
    )
    return client


def _checked(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items of a batch answer; the first item that failed is raised as a `RemoteError`."""
    from toolgym.envs.remote import RemoteError

    for result in results:
        if "error" in result:
            error = result["error"]
            raise RemoteError(int(result.get("status", 500)), str(error.get("code")), str(error.get("message")))
    return results


async def _retrying(call: Callable[[], Awaitable[T]], attempts: int = 3) -> T:
    """`call()`, retried when the connection drops (for idempotent requests)."""
    import httpx

    for attempt in range(attempts):
        try:
            return await call()
        except httpx.TransportError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def make_env_pool(
    env_id: str, server_url: str | None = None, env_kwargs: dict[str, Any] | None = None, api_key: str | None = None
) -> EnvPool:
    """A remote pool when `server_url` is given, else a local one."""
    if server_url:
        return RemoteEnvPool(server_url, env_id, env_kwargs, api_key)
    return LocalEnvPool(env_id, env_kwargs)
