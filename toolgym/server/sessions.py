"""The session manager: live sessions, per-session exclusivity, env work off the event loop, TTLs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from toolgym.server import catalog, work
from toolgym.server.db import Store
from toolgym.server.errors import ApiError, internal_error
from toolgym.server.handoff import Handoff
from toolgym.server.settings import Settings
from toolgym.server.work import LiveSession, StepOutput

logger = logging.getLogger("toolgym.server")
T = TypeVar("T")
JsonDict = dict[str, Any]


@dataclass
class Counters:
    """Totals exported on `/metrics`."""

    sessions_created: int = 0
    sessions_expired: int = 0
    resets: int = 0
    steps: int = 0
    env_errors: int = 0
    step_timeouts: int = 0
    busy_rejections: int = 0
    step_seconds: float = 0.0


class SessionManager:
    """Owns every live session; all env and database work runs in a thread pool."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings, self.store = settings, store
        self.sessions: dict[str, LiveSession] = {}
        self.counters = Counters()
        self.handoff = Handoff(settings.worker_threads)

    # ------------------------------------------------------------------ lookup
    def get(self, owner: str, session_id: str) -> LiveSession:
        """The caller's live session; another key's session is as invisible as a missing one."""
        session = self.sessions.get(session_id)
        if session is None or session.owner != owner:
            raise ApiError(404, "session_not_found", f"no live session {session_id!r} for this API key")
        return session

    def check_stored(self, owner: str, session_id: str) -> JsonDict:
        """A stored (possibly ended) session row of the caller, or 404."""
        row = self.store.session(session_id)
        if row is None or row["owner"] != owner:
            raise ApiError(404, "session_not_found", f"no session {session_id!r} for this API key")
        return row

    # ------------------------------------------------------------------ thread hand-off
    async def _in_thread(self, session: LiveSession | None, fn: Callable[[], T], timeout: float) -> T:
        """Run `fn` in the pool, holding `session` exclusively; a timeout fails the session."""
        if session is not None:
            self._claim(session)
        release = None if session is None else (lambda: self._release(session))
        try:
            return await self.handoff.run(fn, timeout, release)
        except asyncio.TimeoutError:
            self.counters.step_timeouts += 1
            message = f"the env did not answer within the step time limit ({timeout:g} s, TOOLGYM_STEP_TIMEOUT_S)"
            if session is not None:
                session.failed = message
                message += "; the session can no longer step (fork an earlier state or create a new session)"
            raise ApiError(408, "step_timeout", message) from None

    def _claim(self, session: LiveSession) -> None:
        if session.closed:
            raise ApiError(404, "session_not_found", f"session {session.id} was closed")
        if session.failed:
            raise ApiError(409, "session_failed", f"session {session.id} can no longer step: {session.failed}")
        if session.busy:
            self.counters.busy_rejections += 1
            raise ApiError(409, "session_busy", f"session {session.id} is busy with another request; retry later")
        session.busy = True
        session.last_active = time.monotonic()

    def _release_all(self, sessions: list[LiveSession]) -> None:
        for session in sessions:
            self._release(session)

    def _release(self, session: LiveSession) -> None:
        session.busy = False
        session.last_active = time.monotonic()
        if session.closed:
            _close_env(session)

    def _env_failure(self, session: LiveSession, what: str, exc: Exception) -> ApiError:
        self.counters.env_errors += 1
        error = internal_error(f"{session.env_id} raised during {what} in session {session.id}", exc)
        session.failed = f"the env raised during {what} (error id {error.error_id})"
        return error

    # ------------------------------------------------------------------ operations
    async def create(self, owner: str, env_id: str, kwargs: JsonDict, seed: int | None) -> LiveSession:
        """Validate, build the env in a thread, record it, and hold it."""
        entry = catalog.lookup(env_id)
        checked = catalog.validate_kwargs(entry, kwargs)
        if len(self.sessions) >= self.settings.max_sessions:
            raise ApiError(429, "too_many_sessions", f"the server holds {self.settings.max_sessions} sessions already")
        try:
            session = await self._in_thread(
                None,
                lambda: work.create_session(self.store, owner, env_id, checked, seed),
                self.settings.step_timeout_s,
            )
        except ApiError:
            raise
        except Exception as exc:
            raise internal_error(f"building {env_id} failed", exc) from None
        self.sessions[session.id] = session
        self.counters.sessions_created += 1
        return session

    async def reset(self, session: LiveSession, seed: int | None, options: JsonDict | None) -> bytes:
        """Reset a session's env and record the new episode."""
        try:
            body = await self._in_thread(
                session, lambda: work.reset_session(self.store, session, seed, options), self.settings.step_timeout_s
            )
        except ApiError:
            raise
        except Exception as exc:
            raise self._env_failure(session, "reset", exc) from None
        self.counters.resets += 1
        return body

    async def step(self, session: LiveSession, action: str) -> bytes:
        """Step a session's env; the step is committed before this returns."""
        self._check_action(session, action)
        started = time.perf_counter()
        outputs = await self._in_thread(
            session, lambda: self._step_and_commit([session], [action])[0], self.settings.step_timeout_s
        )
        self.counters.step_seconds += time.perf_counter() - started
        if isinstance(outputs, ApiError):
            raise outputs
        return outputs.body

    async def batch(self, owner: str, items: list[tuple[str, str]]) -> list[bytes | ApiError]:
        """Step many sessions in one thread hand-off and one commit; errors are reported per item."""
        results: list[bytes | ApiError | None] = [None] * len(items)
        ready = self._claim_batch(owner, items, results, self._check_action)
        if ready:
            await self._run_batch(ready, results)
        return _filled(results)

    async def batch_reset(
        self, owner: str, items: list[tuple[str, int | None, JsonDict | None]]
    ) -> list[bytes | ApiError]:
        """Reset many sessions in one thread hand-off; errors (bad options, env failures) are per item."""
        results: list[bytes | ApiError | None] = [None] * len(items)
        ready = self._claim_batch(owner, [(sid, (seed, options)) for sid, seed, options in items], results)
        if not ready:
            return _filled(results)
        sessions, timeout = [session for _, session, _ in ready], self.settings.step_timeout_s * len(ready)
        try:
            outputs = await self.handoff.run(
                lambda: [self._reset_one(s, seed, options) for _, s, (seed, options) in ready],
                timeout,
                lambda: self._release_all(sessions),
            )
        except asyncio.TimeoutError:
            self.counters.step_timeouts += 1
            message = f"the batch reset did not finish within {timeout:g} s"
            outputs = [ApiError(408, "step_timeout", message)] * len(ready)
        for (index, _, _), output in zip(ready, outputs, strict=True):
            results[index] = output
        return _filled(results)

    def _claim_batch(
        self,
        owner: str,
        items: list[tuple[str, Any]],
        results: list[bytes | ApiError | None],
        check: Callable[[LiveSession, Any], None] | None = None,
    ) -> list[tuple[int, LiveSession, Any]]:
        """Claim every session of a batch; a missing, busy or repeated session is that item's error."""
        ready: list[tuple[int, LiveSession, Any]] = []
        seen: set[str] = set()
        for index, (session_id, payload) in enumerate(items):
            try:
                if session_id in seen:
                    raise ApiError(409, "session_busy", f"session {session_id} appears twice in this batch")
                seen.add(session_id)
                session = self.get(owner, session_id)
                if check is not None:
                    check(session, payload)
                self._claim(session)
                ready.append((index, session, payload))
            except ApiError as error:
                results[index] = error
        return ready

    def _reset_one(self, session: LiveSession, seed: int | None, options: JsonDict | None) -> bytes | ApiError:
        """Worker-thread body of one reset of a batch."""
        try:
            body = work.reset_session(self.store, session, seed, options)
        except ApiError as error:
            return error
        except Exception as exc:
            return self._env_failure(session, "reset", exc)
        self.counters.resets += 1
        return body

    async def _run_batch(
        self, ready: list[tuple[int, LiveSession, str]], results: list[bytes | ApiError | None]
    ) -> None:
        sessions, actions = [s for _, s, _ in ready], [a for _, _, a in ready]
        timeout = self.settings.step_timeout_s * len(ready)
        started = time.perf_counter()
        try:
            outputs = await self.handoff.run(
                lambda: self._step_and_commit(sessions, actions), timeout, lambda: self._release_all(sessions)
            )
        except asyncio.TimeoutError:
            self.counters.step_timeouts += 1
            message = f"the batch did not finish within {timeout:g} s (TOOLGYM_STEP_TIMEOUT_S per step)"
            for index, session, _ in ready:
                session.failed = message
                results[index] = ApiError(408, "step_timeout", message)
            return
        self.counters.step_seconds += time.perf_counter() - started
        for (index, _, _), output in zip(ready, outputs, strict=True):
            results[index] = output if isinstance(output, ApiError) else output.body

    def _step_and_commit(self, sessions: list[LiveSession], actions: list[str]) -> list[StepOutput | ApiError]:
        """Worker-thread body: step every env, then commit all finished steps in one transaction."""
        outputs: list[StepOutput | ApiError] = []
        for session, action in zip(sessions, actions, strict=True):
            try:
                outputs.append(work.run_step(session, action))
            except Exception as exc:
                outputs.append(self._env_failure(session, "step", exc))
        done = [o for o in outputs if isinstance(o, StepOutput)]
        try:
            work.commit_steps(self.store, done)
        except Exception as exc:
            error = internal_error("persisting steps failed", exc)
            for output in done:
                output.session.failed = f"its step could not be persisted (error id {error.error_id})"
            return [o if isinstance(o, ApiError) else error for o in outputs]
        self.counters.steps += len(done)
        return outputs

    def _check_action(self, session: LiveSession, action: str) -> None:
        if len(action) > self.settings.max_action_chars:
            raise ApiError(
                413,
                "action_too_large",
                f"the action has {len(action)} characters; the limit is {self.settings.max_action_chars}",
            )
        if session.closed:
            raise ApiError(404, "session_not_found", f"session {session.id} was closed")
        if session.failed:
            raise ApiError(409, "session_failed", f"session {session.id} can no longer step: {session.failed}")
        if session.episode_index < 0:
            raise ApiError(409, "reset_needed", "the session has no episode yet: reset it before stepping")
        if session.done:
            raise ApiError(409, "episode_over", "the episode is over: reset the session before stepping again")

    async def fork(self, session: LiveSession) -> LiveSession:
        """A new session in exactly the same state (env state, episode so far)."""
        if len(self.sessions) >= self.settings.max_sessions:
            raise ApiError(429, "too_many_sessions", f"the server holds {self.settings.max_sessions} sessions already")
        try:
            fork = await self._in_thread(
                session, lambda: work.fork_session(self.store, session), self.settings.step_timeout_s
            )
        except ApiError:
            raise
        except Exception as exc:
            raise internal_error(f"forking session {session.id} failed", exc) from None
        self.sessions[fork.id] = fork
        self.counters.sessions_created += 1
        return fork

    async def close(self, session: LiveSession, status: str = "closed") -> None:
        """End a session: forget it, record its status, close its env (after a running step, if any)."""
        self.sessions.pop(session.id, None)
        session.closed = True
        await self.handoff.run(lambda: self._end(session, status), self.settings.step_timeout_s)

    def _end(self, session: LiveSession, status: str) -> None:
        self.store.end_session(session.id, status)
        if not session.busy:  # otherwise `_release` closes it when the running step is done
            _close_env(session)

    # ------------------------------------------------------------------ lifecycle
    async def sweep_forever(self) -> None:
        """Expire idle sessions every `sweep_interval_s`."""
        while True:
            await asyncio.sleep(self.settings.sweep_interval_s)
            try:
                await self.expire_idle()
            except Exception:
                logger.exception("expiring idle sessions failed")

    async def expire_idle(self) -> int:
        """Close sessions idle for longer than the TTL; returns how many."""
        limit = time.monotonic() - self.settings.session_ttl_s
        idle = [s for s in self.sessions.values() if not s.busy and s.last_active < limit]
        for session in idle:
            await self.close(session, "expired")
        self.counters.sessions_expired += len(idle)
        return len(idle)

    def shutdown(self) -> None:
        """On a clean stop: record live sessions as interrupted and stop the pool."""
        for session in list(self.sessions.values()):
            with contextlib.suppress(Exception):
                self.store.end_session(session.id, "interrupted")
        self.sessions.clear()
        self.handoff.shutdown()


def _close_env(session: LiveSession) -> None:
    with contextlib.suppress(Exception):
        session.env.close()


def _filled(results: list[bytes | ApiError | None]) -> list[bytes | ApiError]:
    return [r if r is not None else ApiError(500, "internal_error", "missing result") for r in results]
