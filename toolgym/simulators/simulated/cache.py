"""A content-addressed SQLite cache of simulated responses, with record, replay and off modes."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Literal

from toolgym.simulators.simulated.values import digest

JsonDict = dict[str, Any]
CacheMode = Literal["record", "replay", "off"]
CACHE_MODES: tuple[CacheMode, ...] = ("record", "replay", "off")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    value TEXT NOT NULL,
    meta TEXT NOT NULL
)
"""


class ReplayMiss(LookupError):
    """Replay mode found no recorded response for a key."""


def cache_key(**parts: Any) -> str:
    """The content address of a response: SHA-256 of the canonical JSON of its parts.

    The simulator passes the tool spec digest, canonical arguments, the state digest, the
    backend's name, the prompt version and the seed.
    """
    return digest(parts)


class SimCache:
    """Responses by key in one SQLite file (or in memory when `path` is None).

    Modes: `record` reads hits and stores misses; `replay` only reads (a miss raises
    `ReplayMiss`); `off` never reads or writes.
    """

    def __init__(self, path: str | Path | None = None, mode: CacheMode = "record") -> None:
        if mode not in CACHE_MODES:
            raise ValueError(f"cache mode must be one of {CACHE_MODES}, got {mode!r}")
        self.mode: CacheMode = mode
        self.path = str(path) if path is not None else ":memory:"
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute(_SCHEMA)
        self._db.commit()

    @classmethod
    def from_config(cls, config: SimCache | str | JsonDict | None) -> SimCache:
        """Build from a mode name, `{"mode": …, "path": …}`, an existing cache, or None (record, in memory)."""
        if isinstance(config, SimCache):
            return config
        if config is None:
            return cls()
        if isinstance(config, str):
            return cls(mode=config)  # type: ignore[arg-type]
        unknown = set(config) - {"mode", "path"}
        if unknown:
            raise ValueError(f"unknown cache options {sorted(unknown)}; expected 'mode' and 'path'")
        return cls(path=config.get("path"), mode=config.get("mode", "record"))

    def lookup(self, key: str) -> tuple[Any, JsonDict] | None:
        """The stored (value, meta) for `key`, or None; in replay mode a miss raises `ReplayMiss`."""
        if self.mode == "off":
            return None
        with self._lock:
            row = self._db.execute("SELECT value, meta FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            if self.mode == "replay":
                raise ReplayMiss(f"replay mode: no recorded response for key {key[:16]}…")
            return None
        return json.loads(row[0]), json.loads(row[1])

    def store(self, key: str, kind: str, value: Any, meta: JsonDict) -> None:
        """Record a response (record mode only; the first recording of a key wins).

        The value keeps its key order, so a replayed response serializes to the same bytes.
        """
        if self.mode != "record":
            return
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO responses (key, kind, value, meta) VALUES (?, ?, ?, ?)",
                (key, kind, json.dumps(value, ensure_ascii=False), json.dumps(meta, sort_keys=True)),
            )
            self._db.commit()

    def entries(self) -> list[list[str]]:
        """Every stored response as `[key, kind, value JSON, meta JSON]`, in insertion order (for snapshots)."""
        with self._lock:
            rows = self._db.execute("SELECT key, kind, value, meta FROM responses ORDER BY rowid").fetchall()
        return [list(row) for row in rows]

    def load(self, entries: list[list[str]]) -> None:
        """Replace the contents with `entries()` output (whatever the mode)."""
        with self._lock:
            self._db.execute("DELETE FROM responses")
            self._db.executemany("INSERT INTO responses (key, kind, value, meta) VALUES (?, ?, ?, ?)", entries)
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()
