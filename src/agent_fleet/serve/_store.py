"""The daemon's session store: one SQLite file (stdlib ``sqlite3``) with every session and its events.

Written as things happen, on the event loop's thread (WAL; event records in one transaction per
terminal event or per flush interval, session rows at once), so a
restarted daemon serves the history of finished sessions and the exact event ids a client resumes from.
Sessions a crashed daemon left ``running`` are marked ``interrupted`` when the store opens.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    state TEXT NOT NULL,
    spec TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    turns INTEGER NOT NULL DEFAULT 1,
    usage TEXT,
    step TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
"""


class Store:
    """Sessions and their event records (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # Private before SQLite opens it (its -wal and -shm files take the database's mode).
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        os.chmod(path, 0o600)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._pending: list[tuple[str, int, str]] = []
        self.interrupted = self._db.execute(
            "UPDATE sessions SET state = 'interrupted', updated = ? WHERE state IN ('running', 'starting')",
            (time.time(),),
        ).rowcount

    def close(self) -> None:
        self.flush()
        self._db.close()

    def add_session(self, session_id: str, provider: str, spec: dict[str, Any]) -> None:
        now = time.time()
        self._db.execute(
            "INSERT OR REPLACE INTO sessions (id, provider, state, spec, created, updated) "
            "VALUES (?, ?, 'running', ?, ?, ?)",
            (session_id, provider, json.dumps(spec), now, now),
        )

    def update(self, session_id: str, **fields: Any) -> None:
        """Set ``state``, ``turns``, ``usage`` (a dict) or ``step`` of a session."""
        if "usage" in fields:
            fields["usage"] = json.dumps(fields["usage"])
        sets = ", ".join(f"{name} = ?" for name in fields)
        self._db.execute(
            f"UPDATE sessions SET {sets}, updated = ? WHERE id = ?",
            (*fields.values(), time.time(), session_id),
        )

    def append(self, session_id: str, seq: int, record: str) -> None:
        """Queue an event record (JSON text); ``flush()`` writes the queue in one transaction (the
        caller flushes at each terminal event and a few times a second: a crash loses at most that)."""
        self._pending.append((session_id, seq, record))

    def flush(self) -> None:
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT INTO events (session_id, seq, record) VALUES (?, ?, ?)", rows)

    def events(self, session_id: str, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        self.flush()
        rows = self._db.execute(
            "SELECT seq, record FROM events WHERE session_id = ? AND seq > ? ORDER BY seq",
            (session_id, after),
        )
        for seq, record in rows.fetchall():
            yield seq, json.loads(record)

    def last_seq(self, session_id: str) -> int:
        self.flush()
        row = self._db.execute("SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,)).fetchone()
        return int(row[0] or 0)

    def session(self, session_id: str) -> dict[str, Any] | None:
        rows = self._select("WHERE id = ?", (session_id,))
        return rows[0] if rows else None

    def sessions(self) -> list[dict[str, Any]]:
        return self._select("ORDER BY created DESC", ())

    def _select(self, tail: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
        cursor = self._db.execute(
            "SELECT id, provider, state, spec, created, updated, turns, usage, step FROM sessions " + tail,
            args,
        )
        out = []
        for sid, provider, state, spec, created, updated, turns, usage, step in cursor.fetchall():
            out.append(
                {
                    "session_id": sid,
                    "provider": provider,
                    "state": state,
                    "spec": json.loads(spec),
                    "created": created,
                    "updated": updated,
                    "turns": turns,
                    "usage": json.loads(usage) if usage else None,
                    "step": step,
                }
            )
        return out
