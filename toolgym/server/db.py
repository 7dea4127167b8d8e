"""SQLModel tables and the store that persists sessions, episodes and steps (SQLite or PostgreSQL)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, Text, event, insert, inspect, select, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Field, SQLModel, create_engine

JsonDict = dict[str, Any]


class SessionRow(SQLModel, table=True):
    """A session: one env instance owned by one API key, possibly forked from another session."""

    __tablename__ = "toolgym_session"
    id: str = Field(primary_key=True, max_length=64)
    owner: str = Field(index=True, max_length=64)
    env_id: str = Field(max_length=200)
    kwargs_json: str = Field(sa_column=Column(Text, nullable=False))
    seed: str | None = Field(default=None, sa_column=Column(Text))  # text: seeds may exceed 64 bits
    parent_id: str | None = Field(default=None, max_length=64)
    status: str = Field(default="live", index=True, max_length=16)  # live|closed|expired|interrupted|failed
    created_at: float
    closed_at: float | None = None


class EpisodeRow(SQLModel, table=True):
    """One episode of a session: from a reset to its end (or to the next reset)."""

    __tablename__ = "toolgym_episode"
    id: int | None = Field(default=None, primary_key=True)
    session_id: str = Field(index=True, max_length=64)
    index: int
    episode_id: str = Field(max_length=64)
    seed: str | None = Field(default=None, sa_column=Column(Text))
    options_json: str = Field(sa_column=Column(Text, nullable=False))
    reset_observation: str = Field(sa_column=Column(Text, nullable=False))
    reset_info_json: str = Field(sa_column=Column(Text, nullable=False))
    status: str = Field(default="running", max_length=16)  # running|terminated|truncated|interrupted|closed
    total_reward: float = 0.0
    started_at: float
    ended_at: float | None = None


class StepRow(SQLModel, table=True):
    """One acknowledged step: the action, what the env answered, and when."""

    __tablename__ = "toolgym_step"
    id: int | None = Field(default=None, primary_key=True)
    episode_row_id: int = Field(index=True)
    session_id: str = Field(max_length=64)
    index: int
    action: str = Field(sa_column=Column(Text, nullable=False))
    observation: str = Field(sa_column=Column(Text, nullable=False))
    reward: float
    terminated: bool
    truncated: bool
    info_json: str = Field(sa_column=Column(Text, nullable=False))
    started_at: float
    finished_at: float


STEP_COLUMNS = (
    "episode_row_id",
    "session_id",
    "index",
    "action",
    "observation",
    "reward",
    "terminated",
    "truncated",
    "info_json",
    "started_at",
    "finished_at",
)
EPISODE_COLUMNS = (
    "session_id",
    "index",
    "episode_id",
    "seed",
    "options_json",
    "reset_observation",
    "reset_info_json",
    "status",
    "total_reward",
    "started_at",
)
SESSIONS, EPISODES, STEPS = SessionRow.__table__, EpisodeRow.__table__, StepRow.__table__  # type: ignore[attr-defined]


def _statements(mark: str) -> dict[str, str]:
    """The hot-path SQL, with the driver's placeholder (`?` for sqlite3, `%s` for psycopg)."""

    def insert_sql(table: str, columns: tuple[str, ...]) -> str:
        names = ", ".join(f'"{c}"' for c in columns)
        return f"INSERT INTO {table} ({names}) VALUES ({', '.join([mark] * len(columns))})"

    return {
        "insert_step": insert_sql("toolgym_step", STEP_COLUMNS),
        "insert_episode": insert_sql("toolgym_episode", EPISODE_COLUMNS) + " RETURNING id",
        "end_running": f"UPDATE toolgym_episode SET status = {mark}, ended_at = {mark} "
        f"WHERE id = {mark} AND status = 'running'",
        "end_episode": f"UPDATE toolgym_episode SET status = {mark}, total_reward = {mark}, ended_at = {mark} "
        f"WHERE id = {mark}",
    }


def make_engine(url: str) -> Engine:
    """An engine for `url`; SQLite files get WAL journaling (a commit survives a killed process)."""
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, pool_size=8, max_overflow=16)
    engine = create_engine(url, connect_args={"check_same_thread": False}, pool_size=8, max_overflow=32)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.close()

    return engine


@dataclass
class _Ticket:
    """Rows waiting for a group commit, and its outcome."""

    steps: Sequence[JsonDict]
    endings: Sequence[JsonDict]
    done: bool = False
    error: Exception | None = None


class Store:
    """All database reads and writes of the server; every method commits before it returns."""

    def __init__(self, url: str) -> None:
        self.engine = make_engine(url)
        self._sqlite = url.startswith("sqlite")
        self._write_lock = threading.Lock()  # SQLite has one writer; the hot path has one connection
        self._writer: Any = None
        self._commit_lock, self._queue_lock = threading.Lock(), threading.Lock()
        self._queue: list[_Ticket] = []
        self._sql = _statements("?" if self.engine.dialect.paramstyle == "qmark" else "%s")

    def create_tables(self) -> None:
        """Create the tables that do not exist yet."""
        SQLModel.metadata.create_all(self.engine, tables=[SESSIONS, EPISODES, STEPS])

    def has_tables(self) -> bool:
        """Whether the database holds toolgym's tables."""
        return bool(inspect(self.engine).has_table(SESSIONS.name))

    def dispose(self) -> None:
        """Close the writer and every pooled connection."""
        with self._write_lock:
            self._drop_writer()
        self.engine.dispose()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        if self._sqlite:
            with self._write_lock, self.engine.begin() as conn:
                yield conn
        else:
            with self.engine.begin() as conn:
                yield conn

    # ------------------------------------------------------------------ writes
    def mark_interrupted(self) -> int:
        """At start-up: sessions left live by a previous process become interrupted, with their episodes."""
        now = time.time()
        with self._write() as conn:
            live = [row.id for row in conn.execute(select(SESSIONS.c.id).where(SESSIONS.c.status == "live"))]
            if live:
                conn.execute(
                    update(SESSIONS).where(SESSIONS.c.id.in_(live)).values(status="interrupted", closed_at=now)
                )
                conn.execute(
                    update(EPISODES)
                    .where(EPISODES.c.session_id.in_(live), EPISODES.c.status == "running")
                    .values(status="interrupted", ended_at=now)
                )
        return len(live)

    def insert_session(self, row: JsonDict) -> None:
        """Record a new session."""
        with self._write() as conn:
            conn.execute(insert(SESSIONS), [row])

    def start_episode(self, row: JsonDict, previous: int | None = None) -> int:
        """Record a reset: the session's previous episode (row id `previous`) is closed if it still runs,
        a new one starts. By row id: a session's episode count does not slow its resets down."""
        with self._raw() as cursor:
            if previous is not None:
                cursor.execute(self._sql["end_running"], ("closed", row["started_at"], previous))
            cursor.execute(self._sql["insert_episode"], tuple(row[c] for c in EPISODE_COLUMNS))
            return int(cursor.fetchone()[0])

    def record_steps(self, steps: Sequence[JsonDict], endings: Sequence[JsonDict]) -> None:
        """Insert step rows and end the episodes they ended; committed when this returns.

        Group commit: callers that arrive while another commit runs are committed together by the
        next one in, in one transaction (one fsync on PostgreSQL), so concurrent steps share the cost.
        """
        ticket = _Ticket(steps, endings)
        with self._queue_lock:
            self._queue.append(ticket)
        with self._commit_lock:
            if not ticket.done:
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._commit_batch(batch)
        if ticket.error is not None:
            raise ticket.error

    def _commit_batch(self, batch: list[_Ticket]) -> None:
        try:
            with self._raw() as cursor:
                rows = [tuple(r[c] for c in STEP_COLUMNS) for t in batch for r in t.steps]
                if rows:
                    cursor.executemany(self._sql["insert_step"], rows)
                for end in (e for t in batch for e in t.endings):
                    values = (end["status"], end["total_reward"], end["ended_at"], end["id"])
                    cursor.execute(self._sql["end_episode"], values)
        except Exception as exc:
            for ticket in batch:
                ticket.error = exc
        for ticket in batch:
            ticket.done = True

    @contextmanager
    def _raw(self) -> Iterator[Any]:
        """A cursor of the one writer connection, in a transaction committed on exit.

        Plain DB-API on a dedicated connection: SQLAlchemy's Core and pool cost ~100 µs a step.
        """
        with self._write_lock:
            if self._writer is None:
                self._writer = self.engine.raw_connection()
            connection = self._writer
            try:
                cursor = connection.cursor()
                yield cursor
                connection.commit()
            except BaseException:
                self._drop_writer()
                raise

    def _drop_writer(self) -> None:
        connection, self._writer = self._writer, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.rollback()
            with contextlib.suppress(Exception):
                connection.close()

    def end_session(self, session_id: str, status: str) -> None:
        """Close, expire or fail a session; its running episode ends with it."""
        now = time.time()
        episode_status = "closed" if status in ("closed", "expired") else "interrupted"
        with self._write() as conn:
            conn.execute(update(SESSIONS).where(SESSIONS.c.id == session_id).values(status=status, closed_at=now))
            self._end_running(conn, session_id, episode_status, now)

    def copy_episode(self, episode_row_id: int, new_session_id: str) -> int:
        """Copy an episode and its steps into a forked session; returns the new episode row id."""
        with self._write() as conn:
            episode = dict(conn.execute(select(EPISODES).where(EPISODES.c.id == episode_row_id)).mappings().one())
            episode.pop("id")
            episode.update(session_id=new_session_id, index=0)
            new_id = int(conn.execute(insert(EPISODES).returning(EPISODES.c.id), [episode]).scalar_one())
            rows = conn.execute(select(STEPS).where(STEPS.c.episode_row_id == episode_row_id)).mappings().all()
            copies = [{**dict(r), "episode_row_id": new_id, "session_id": new_session_id} for r in rows]
            for copy in copies:
                copy.pop("id")
            if copies:
                conn.execute(insert(STEPS), copies)
        return new_id

    @staticmethod
    def _end_running(conn: Connection, session_id: str, status: str, now: float) -> None:
        conn.execute(
            update(EPISODES)
            .where(EPISODES.c.session_id == session_id, EPISODES.c.status == "running")
            .values(status=status, ended_at=now)
        )

    # ------------------------------------------------------------------ reads
    def session(self, session_id: str) -> JsonDict | None:
        """The session row as a dict, or None."""
        with self.engine.connect() as conn:
            row = conn.execute(select(SESSIONS).where(SESSIONS.c.id == session_id)).mappings().first()
        return dict(row) if row else None

    def session_ids(self, env_id: str | None = None, status: str | None = None) -> list[str]:
        """Ids of the stored sessions, oldest first, optionally filtered."""
        query = select(SESSIONS.c.id).order_by(SESSIONS.c.created_at)
        if env_id:
            query = query.where(SESSIONS.c.env_id == env_id)
        if status:
            query = query.where(SESSIONS.c.status == status)
        with self.engine.connect() as conn:
            return [row.id for row in conn.execute(query)]

    def trajectory(self, session_id: str) -> list[JsonDict]:
        """Every episode of a session, oldest first, each with its steps decoded."""
        with self.engine.connect() as conn:
            episodes = conn.execute(
                select(EPISODES).where(EPISODES.c.session_id == session_id).order_by(EPISODES.c.index)
            ).mappings()
            out = [_episode_json(dict(e)) for e in episodes]
            for episode in out:
                rows = conn.execute(
                    select(STEPS).where(STEPS.c.episode_row_id == episode.pop("row_id")).order_by(STEPS.c.index)
                ).mappings()
                episode["steps"] = [_step_json(dict(r)) for r in rows]
        return out


def _episode_json(row: JsonDict) -> JsonDict:
    return {
        "row_id": row["id"],
        "index": row["index"],
        "episode_id": row["episode_id"],
        "seed": None if row["seed"] is None else int(row["seed"]),
        "options": json.loads(row["options_json"]),
        "reset_observation": row["reset_observation"],
        "reset_info": json.loads(row["reset_info_json"]),
        "status": row["status"],
        "total_reward": row["total_reward"],
        "started_at": row["started_at"],
        "ended_at": row["ended_at"],
    }


def _step_json(row: JsonDict) -> JsonDict:
    return {
        "index": row["index"],
        "action": row["action"],
        "observation": row["observation"],
        "reward": row["reward"],
        "terminated": bool(row["terminated"]),
        "truncated": bool(row["truncated"]),
        "info": json.loads(row["info_json"]),
        "started_at": row["started_at"],
        "finished_at": row["finished_at"],
    }
