"""The daemon's store: one SQLite file (stdlib ``sqlite3``) with every session, its turns and its events,
and the index of the daemon's batches.

Written as things happen, on the event loop's thread (WAL; event records in one transaction per
terminal event or per flush interval, other rows at once), so a restarted daemon serves the history
of finished sessions and the exact event ids a client resumes from. Sessions, turns and batches a
crashed daemon left ``running`` are marked ``interrupted`` when the store opens. A batch's tasks are
not here: its ledger (``<batch dir>/batch.db``) holds them; this table holds what the daemon did with
the batch (running, stopped, succeeded, failed, error and why).

No secret is stored: every value a write method takes passes the store's redactor (spec, prompts,
final texts, errors, usage, steps, a batch's reason); event records come redacted (``event_record``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from agent_fleet._redact import Redactor

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
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    prompt TEXT NOT NULL,
    status TEXT NOT NULL,
    text TEXT,
    error TEXT,
    usage TEXT,
    started REAL NOT NULL,
    ended REAL,
    first_event INTEGER NOT NULL,
    PRIMARY KEY (session_id, turn)
);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    total INTEGER NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX IF NOT EXISTS sessions_by_created ON sessions (created DESC, id DESC);
"""
# Columns added after the first release, with their definitions (added to an older store when it opens).
_ADDED: Final = {"sessions": {"archived": "INTEGER NOT NULL DEFAULT 0"}}
#: The most sessions one page lists (``GET /v1/sessions?limit``).
MAX_PAGE: Final = 1000


class Store:
    """Sessions and their event records (see the module docstring)."""

    def __init__(self, path: Path, *, redactor: Redactor | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._redact = redactor if redactor is not None else Redactor()
        # Private before SQLite opens it (its -wal and -shm files take the database's mode).
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        os.chmod(path, 0o600)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        for table, columns in _ADDED.items():
            have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            for name, definition in columns.items():
                if name not in have:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {definition}")
        self._pending: list[tuple[str, int, bytes]] = []
        now = time.time()
        self.interrupted = self._db.execute(
            "UPDATE sessions SET state = 'interrupted', updated = ? WHERE state IN ('running', 'starting')",
            (now,),
        ).rowcount
        self._db.execute("UPDATE turns SET status = 'interrupted' WHERE status = 'running'")
        self.interrupted_batches = self._db.execute(
            "UPDATE batches SET state = 'interrupted', updated = ? WHERE state = 'running'", (now,)
        ).rowcount

    def close(self) -> None:
        self.flush()
        self._db.close()

    def add_session(self, session_id: str, provider: str, spec: dict[str, Any]) -> None:
        now = time.time()
        self._db.execute(
            "INSERT OR REPLACE INTO sessions (id, provider, state, spec, created, updated) "
            "VALUES (?, ?, 'running', ?, ?, ?)",
            (session_id, provider, json.dumps(self._redact.value(spec)), now, now),
        )

    def update(self, session_id: str, **fields: Any) -> None:
        """Set ``state``, ``turns``, ``usage`` (a dict), ``step`` or ``archived`` of a session."""
        fields = self._redact.value(fields)
        if "usage" in fields:
            fields["usage"] = json.dumps(fields["usage"])
        sets = ", ".join(f"{name} = ?" for name in fields)
        self._db.execute(
            f"UPDATE sessions SET {sets}, updated = ? WHERE id = ?",
            (*fields.values(), time.time(), session_id),
        )

    def append(self, session_id: str, seq: int, record: bytes) -> None:
        """Queue an event record (UTF-8 JSON); ``flush()`` writes the queue in one transaction (the
        caller flushes at each terminal event and a few times a second: a crash loses at most that)."""
        self._pending.append((session_id, seq, record))  # kept as UTF-8 bytes (read back as bytes)

    def flush(self) -> None:
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT INTO events (session_id, seq, record) VALUES (?, ?, ?)", rows)

    def events(self, session_id: str, after: int = 0) -> Iterator[tuple[int, bytes]]:
        """``(seq, record)`` of the session's events after ``after``, records as stored (JSON)."""
        self.flush()
        rows = self._db.execute(
            "SELECT seq, record FROM events WHERE session_id = ? AND seq > ? ORDER BY seq",
            (session_id, after),
        )
        for seq, record in rows.fetchall():
            yield seq, record.encode() if isinstance(record, str) else bytes(record)

    def last_seq(self, session_id: str) -> int:
        self.flush()
        row = self._db.execute("SELECT MAX(seq) FROM events WHERE session_id = ?", (session_id,)).fetchone()
        return int(row[0] or 0)

    def session(self, session_id: str) -> dict[str, Any] | None:
        rows = self._select("WHERE id = ?", (session_id,))
        return rows[0] if rows else None

    def sessions(
        self, *, limit: int | None = None, before: str | None = None, states: tuple[str, ...] = ()
    ) -> list[dict[str, Any]]:
        """Sessions, newest first: at most ``limit``, those created before session ``before`` (a cursor:
        the last one of the previous page), in one of ``states`` when given."""
        where: list[str] = []
        args: list[Any] = []
        if before is not None:
            where.append("(created, id) < (SELECT created, id FROM sessions WHERE id = ?)")
            args.append(before)
        if states:
            where.append(f"state IN ({', '.join('?' for _ in states)})")
            args.extend(states)
        tail = (f"WHERE {' AND '.join(where)} " if where else "") + "ORDER BY created DESC, id DESC"
        if limit is not None:
            tail += " LIMIT ?"
            args.append(limit)
        return self._select(tail, tuple(args))

    def count(self, states: tuple[str, ...] = ()) -> int:
        if not states:
            return int(self._db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])
        marks = ", ".join("?" for _ in states)
        return int(
            self._db.execute(f"SELECT COUNT(*) FROM sessions WHERE state IN ({marks})", states).fetchone()[0]
        )

    # -- turns -------------------------------------------------------------------------------------------

    def add_turn(self, session_id: str, turn: int, prompt: str, first_event: int) -> None:
        """A turn started; its events start after ``first_event``."""
        self._db.execute(
            "INSERT OR REPLACE INTO turns (session_id, turn, prompt, status, started, first_event) "
            "VALUES (?, ?, ?, 'running', ?, ?)",
            (session_id, turn, self._redact.text(prompt), time.time(), first_event),
        )

    def end_turn(
        self,
        session_id: str,
        turn: int,
        *,
        status: str,
        text: str | None,
        error: dict[str, Any] | None,
        usage: dict[str, Any] | None,
    ) -> None:
        text, error, usage = self._redact.value([text, error, usage])
        self._db.execute(
            "UPDATE turns SET status = ?, text = ?, error = ?, usage = ?, ended = ? "
            "WHERE session_id = ? AND turn = ?",
            (
                status,
                text,
                json.dumps(error) if error else None,
                json.dumps(usage) if usage else None,
                time.time(),
                session_id,
                turn,
            ),
        )

    def turns(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT turn, prompt, status, text, error, usage, started, ended, first_event FROM turns "
            "WHERE session_id = ? ORDER BY turn",
            (session_id,),
        )
        return [
            {
                "turn": turn,
                "prompt": prompt,
                "status": status,
                "text": text,
                "error": json.loads(error) if error else None,
                "usage": json.loads(usage) if usage else None,
                "started": started,
                "ended": ended,
                "first_event_id": first + 1,
            }
            for turn, prompt, status, text, error, usage, started, ended, first in rows.fetchall()
        ]

    # -- batches -----------------------------------------------------------------------------------------

    def add_batch(self, batch_id: str, provider: str, total: int) -> None:
        now = time.time()
        self._db.execute(
            "INSERT INTO batches (id, provider, total, state, created, updated) "
            "VALUES (?, ?, ?, 'running', ?, ?)",
            (batch_id, provider, total, now, now),
        )

    def update_batch(self, batch_id: str, *, state: str, reason: str | None = None) -> None:
        self._db.execute(
            "UPDATE batches SET state = ?, reason = ?, updated = ? WHERE id = ?",
            (state, self._redact.text(reason) if reason else reason, time.time(), batch_id),
        )

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        rows = self._batches("WHERE id = ?", (batch_id,))
        return rows[0] if rows else None

    def batches(self) -> list[dict[str, Any]]:
        return self._batches("ORDER BY created DESC", ())

    def _batches(self, tail: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
        cursor = self._db.execute(
            "SELECT id, provider, total, state, reason, created, updated FROM batches " + tail, args
        )
        keys = ("batch_id", "provider", "total", "state", "reason", "created", "updated")
        return [dict(zip(keys, row, strict=True)) for row in cursor.fetchall()]

    # -- reading sessions ------------------------------------------------------------------------------

    def _select(self, tail: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
        cursor = self._db.execute(
            "SELECT id, provider, state, spec, created, updated, turns, usage, step, archived FROM sessions "
            + tail,
            args,
        )
        out = []
        for sid, provider, state, spec, created, updated, turns, usage, step, archived in cursor.fetchall():
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
                    "archived": bool(archived),
                }
            )
        return out
