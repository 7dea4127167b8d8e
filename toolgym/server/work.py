"""Blocking env work run in worker threads: build, reset, step and fork envs, persisting each result."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from toolgym.server.db import Store
from toolgym.server.errors import ApiError

JsonDict = dict[str, Any]
_WRAPPER_STATE = ("_has_reset", "_elapsed_steps")


@dataclass
class LiveSession:
    """A session held in memory: its env, its owner and where its current episode stands."""

    id: str
    owner: str
    env_id: str
    kwargs: JsonDict
    seed: int | None
    env: gym.Env[Any, Any]
    created_at: float
    parent_id: str | None = None
    last_active: float = field(default_factory=time.monotonic)
    busy: bool = False
    failed: str | None = None  # why the session can no longer step (env error, step timeout)
    episode_row: int | None = None
    episode_index: int = -1
    step_index: int = 0
    done: bool = True
    total_reward: float = 0.0
    closed: bool = False

    def describe(self) -> JsonDict:
        """JSON view for `GET /v1/sessions/{id}`."""
        return {
            "session_id": self.id,
            "env_id": self.env_id,
            "kwargs": self.kwargs,
            "seed": self.seed,
            "status": "failed" if self.failed else "live",
            "failure": self.failed,
            "parent_id": self.parent_id,
            "episode_index": self.episode_index,
            "step_index": self.step_index,
            "episode_done": self.done,
            "total_reward": self.total_reward,
            "busy": self.busy,
            "created_at": self.created_at,
        }


def _fallback(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_fallback)


def dumps(value: Any) -> str:
    """Compact JSON; anything JSON cannot hold (numpy scalars, sets) becomes a list or a string."""
    return _ENCODER.encode(value)


def build_env(env_id: str, kwargs: JsonDict) -> gym.Env[Any, Any]:
    """`gym.make` with client kwargs; bad values become a 400 naming the problem."""
    try:
        return gym.make(env_id, **kwargs)
    except ImportError as exc:
        raise ApiError(400, "env_unavailable", f"{env_id} needs a package this server lacks: {exc}") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise ApiError(400, "invalid_kwargs", f"{env_id} rejected its kwargs: {exc}") from None


def create_session(store: Store, owner: str, env_id: str, kwargs: JsonDict, seed: int | None) -> LiveSession:
    """Build the env and record the session."""
    env = build_env(env_id, kwargs)
    session = LiveSession(uuid.uuid4().hex, owner, env_id, kwargs, seed, env, time.time())
    store.insert_session(_session_row(session))
    return session


def _session_row(session: LiveSession) -> JsonDict:
    return {
        "id": session.id,
        "owner": session.owner,
        "env_id": session.env_id,
        "kwargs_json": dumps(session.kwargs),
        "seed": None if session.seed is None else str(session.seed),
        "parent_id": session.parent_id,
        "status": "live",
        "created_at": session.created_at,
    }


def reset_session(store: Store, session: LiveSession, seed: int | None, options: JsonDict | None) -> bytes:
    """Reset the env, record the new episode, and return the response body."""
    if seed is None and session.episode_index < 0:
        seed = session.seed
    started = time.time()
    try:
        observation, info = session.env.reset(seed=seed, options=options)
    except (ValueError, TypeError, KeyError) as exc:
        session.done = True
        raise ApiError(400, "invalid_options", f"reset rejected: {exc}") from None
    info_json = dumps(info)
    row = {
        "session_id": session.id,
        "index": session.episode_index + 1,
        "episode_id": str(info.get("episode_id", "")) if isinstance(info, dict) else "",
        "seed": None if seed is None else str(seed),
        "options_json": dumps(options or {}),
        "reset_observation": observation,
        "reset_info_json": info_json,
        "status": "running",
        "total_reward": 0.0,
        "started_at": started,
    }
    session.episode_row = store.start_episode(row, session.episode_row)
    session.episode_index += 1
    session.step_index, session.done, session.total_reward = 0, False, 0.0
    return b'{"observation":' + dumps(observation).encode() + b',"info":' + info_json.encode() + b"}"


@dataclass
class StepOutput:
    """One finished env step, ready to persist and to answer with."""

    session: LiveSession
    row: JsonDict
    ending: JsonDict | None
    body: bytes


def run_step(session: LiveSession, action: str) -> StepOutput:
    """Step the env (not yet persisted); raises whatever the env raises."""
    started = time.time()
    observation, reward, terminated, truncated, info = session.env.step(action)
    reward = float(reward)
    info_json = dumps(info)
    finished = time.time()
    assert session.episode_row is not None
    row = {
        "episode_row_id": session.episode_row,
        "session_id": session.id,
        "index": session.step_index,
        "action": action,
        "observation": observation,
        "reward": reward,
        "terminated": bool(terminated),
        "truncated": bool(truncated),
        "info_json": info_json,
        "started_at": started,
        "finished_at": finished,
    }
    ending = None
    if terminated or truncated:
        status = "terminated" if terminated else "truncated"
        total = session.total_reward + reward
        ending = {"id": session.episode_row, "status": status, "total_reward": total, "ended_at": finished}
    body = (
        b'{"observation":'
        + dumps(observation).encode()
        + b',"reward":'
        + _ENCODER.encode(reward).encode()
        + (b',"terminated":true' if terminated else b',"terminated":false')
        + (b',"truncated":true' if truncated else b',"truncated":false')
        + b',"info":'
        + info_json.encode()
        + b"}"
    )
    return StepOutput(session, row, ending, body)


def commit_steps(store: Store, outputs: list[StepOutput]) -> None:
    """Persist the steps, then advance each session's counters (only once the commit succeeded)."""
    store.record_steps([o.row for o in outputs], [o.ending for o in outputs if o.ending])
    for output in outputs:
        session = output.session
        session.step_index += 1
        session.total_reward += output.row["reward"]
        session.done = output.ending is not None


def fork_session(store: Store, source: LiveSession) -> LiveSession:
    """A new session whose env is in exactly the state of `source`'s env, with its episode copied."""
    env = build_env(source.env_id, source.kwargs)
    env.unwrapped.set_state(source.env.unwrapped.get_state())  # type: ignore[attr-defined]
    _copy_wrapper_state(source.env, env)
    fork = LiveSession(uuid.uuid4().hex, source.owner, source.env_id, source.kwargs, source.seed, env, time.time())
    fork.parent_id = source.id
    fork.episode_index = 0 if source.episode_row is not None else -1
    fork.step_index, fork.done, fork.total_reward = source.step_index, source.done, source.total_reward
    store.insert_session(_session_row(fork))
    if source.episode_row is not None:
        fork.episode_row = store.copy_episode(source.episode_row, fork.id)
    return fork


def _copy_wrapper_state(source: gym.Env[Any, Any], target: gym.Env[Any, Any]) -> None:
    """Copy the bookkeeping of Gymnasium wrappers (order enforcing, time limits) along the chain."""
    while isinstance(source, gym.Wrapper) and isinstance(target, gym.Wrapper):
        for name in _WRAPPER_STATE:
            if name in vars(source):
                setattr(target, name, getattr(source, name))
        source, target = source.env, target.env
