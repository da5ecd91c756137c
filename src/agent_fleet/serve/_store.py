"""The daemon's store: one SQLite file (stdlib ``sqlite3``) with every session, its turns and its events,
the index of the daemon's batches, and what the dashboard shows beside them: the batch and task a
session belongs to, the model it really ran, the notes a batch's runner left on it (gates, follow-ups)
and the tasks of the batches a client runs (``batch --server``).

Written as things happen, on the event loop's thread (WAL; event records in one transaction per
terminal event or per flush interval, other rows at once), so a restarted daemon serves the history
of finished sessions and the exact event ids a client resumes from. Sessions, turns and batches a
crashed daemon left ``running`` are marked ``interrupted`` when the store opens. A batch's tasks are
not here: its ledger (``<batch dir>/batch.db``) holds them; this table holds what the daemon did with
the batch (running, stopped, succeeded, failed, error and why).

No secret is stored: every value a write method takes passes the store's redactor (spec, prompts,
final texts, errors, usage, steps, notes, a batch's name and reason, a client batch's tasks); event
records come redacted (``event_record``).
"""

from __future__ import annotations

import contextlib
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
CREATE TABLE IF NOT EXISTS notes (
    session_id TEXT NOT NULL,
    after INTEGER NOT NULL,
    at REAL NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS notes_by_session ON notes (session_id, after);
CREATE TABLE IF NOT EXISTS batch_tasks (
    batch_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    state TEXT NOT NULL,
    status TEXT,
    reason TEXT,
    session_id TEXT,
    prompt TEXT,
    runs INTEGER NOT NULL DEFAULT 0,
    updated REAL NOT NULL,
    PRIMARY KEY (batch_id, task_id)
);
"""
# Columns added after the first release, with their definitions (added to an older store when it opens).
_ADDED: Final = {
    "sessions": {
        "archived": "INTEGER NOT NULL DEFAULT 0",
        "task_id": "TEXT",  # the task and batch it runs for (a batch's runner says so)
        "batch_id": "TEXT",
        "model": "TEXT",  # the model it really runs, and the provider serving it (the session notice)
        "model_provider": "TEXT",
        "cost_usd": "REAL",  # what the provider reported it cost (Result.cost_usd, summed)
        "ended": "REAL",  # when its last turn ended (NULL while one runs)
    },
    "batches": {
        "kind": "TEXT NOT NULL DEFAULT 'daemon'",  # daemon: run here; client: run by batch --server
        "name": "TEXT",
    },
}
_INDEXES: Final = (
    "CREATE INDEX IF NOT EXISTS sessions_by_batch ON sessions (batch_id, created DESC, id DESC);"
)
_SESSION_COLUMNS: Final = (
    "session_id",
    "provider",
    "state",
    "spec",
    "created",
    "updated",
    "turns",
    "usage",
    "step",
    "archived",
    "task_id",
    "batch_id",
    "model",
    "model_provider",
    "cost_usd",
    "ended",
)
_TASK_COLUMNS: Final = ("task_id", "state", "status", "reason", "session_id", "prompt", "runs", "updated")
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
        self._db.executescript(_INDEXES)
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
        self._db.execute(
            "UPDATE batch_tasks SET state = 'interrupted', updated = ? WHERE state = 'running'", (now,)
        )

    def close(self) -> None:
        self.flush()
        self._db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """The writes inside as one transaction (one commit where each would have made its own: a turn's
        start and end write several rows); nested, the outer one commits."""
        if self._db.in_transaction:
            yield
            return
        self._db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def add_session(self, session_id: str, provider: str, spec: dict[str, Any]) -> None:
        now = time.time()
        self._db.execute(
            "INSERT OR REPLACE INTO sessions (id, provider, state, spec, created, updated) "
            "VALUES (?, ?, 'running', ?, ?, ?)",
            (session_id, provider, json.dumps(self._redact.value(spec)), now, now),
        )

    def update(self, session_id: str, **fields: Any) -> None:
        """Set ``state``, ``turns``, ``usage`` (a dict), ``step``, ``archived``, ``task_id``,
        ``batch_id``, ``model``, ``model_provider``, ``cost_usd`` or ``ended`` of a session."""
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
        with self.transaction():
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
        self,
        *,
        limit: int | None = None,
        before: str | None = None,
        states: tuple[str, ...] = (),
        batch: str | None = None,
        provider: str | None = None,
        text: str | None = None,
    ) -> list[dict[str, Any]]:
        """Sessions, newest first: at most ``limit``, those created before session ``before`` (a cursor:
        the last one of the previous page), filtered as ``count`` says."""
        where, args = self._filters(states, batch, provider, text)
        if before is not None:
            where.append("(created, id) < (SELECT created, id FROM sessions WHERE id = ?)")
            args.append(before)
        tail = (f"WHERE {' AND '.join(where)} " if where else "") + "ORDER BY created DESC, id DESC"
        if limit is not None:
            tail += " LIMIT ?"
            args.append(limit)
        return self._select(tail, tuple(args))

    def count(
        self,
        states: tuple[str, ...] = (),
        *,
        batch: str | None = None,
        provider: str | None = None,
        text: str | None = None,
        upto: str | None = None,
    ) -> int:
        """How many sessions are in one of ``states`` (any when empty), of batch ``batch``, on provider
        ``provider``, and hold ``text`` (case-insensitively, ASCII) in their id, task id, batch id,
        prompt, cwd or model; with ``upto``, only those listed before it and itself (newest first)."""
        where, args = self._filters(states, batch, provider, text)
        if upto is not None:
            where.append("(created, id) >= (SELECT created, id FROM sessions WHERE id = ?)")
            args.append(upto)
        tail = f" WHERE {' AND '.join(where)}" if where else ""
        return int(self._db.execute("SELECT COUNT(*) FROM sessions" + tail, args).fetchone()[0])

    @staticmethod
    def _filters(
        states: tuple[str, ...], batch: str | None, provider: str | None, text: str | None
    ) -> tuple[list[str], list[Any]]:
        where: list[str] = []
        args: list[Any] = []
        if states:
            where.append(f"state IN ({', '.join('?' for _ in states)})")
            args.extend(states)
        if batch is not None:
            where.append("batch_id = ?")
            args.append(batch)
        if provider is not None:
            where.append("provider = ?")
            args.append(provider)
        if text:
            fields = (
                "id",
                "task_id",
                "batch_id",
                "json_extract(spec, '$.prompt')",
                "json_extract(spec, '$.cwd')",
                "model",
                "json_extract(spec, '$.model')",
            )
            where.append("(" + " OR ".join(f"instr(lower(coalesce({f}, '')), ?) > 0" for f in fields) + ")")
            args.extend([text.lower()] * len(fields))
        return where, args

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

    def add_batch(
        self, batch_id: str, provider: str, total: int, *, kind: str = "daemon", name: str | None = None
    ) -> None:
        now = time.time()
        self._db.execute(
            "INSERT INTO batches (id, provider, total, state, created, updated, kind, name) "
            "VALUES (?, ?, ?, 'running', ?, ?, ?, ?)",
            (batch_id, provider, total, now, now, kind, self._redact.text(name) if name else name),
        )

    def update_batch(self, batch_id: str, *, state: str | None = None, reason: str | None = None) -> None:
        """Set the batch's ``state`` and ``reason`` (None: keep the state, and only note that the batch
        was heard from: its ``updated`` time)."""
        if state is None:
            self._db.execute("UPDATE batches SET updated = ? WHERE id = ?", (time.time(), batch_id))
            return
        self._db.execute(
            "UPDATE batches SET state = ?, reason = ?, updated = ? WHERE id = ?",
            (state, self._redact.text(reason) if reason else reason, time.time(), batch_id),
        )

    def set_task(self, batch_id: str, task_id: str, **fields: Any) -> None:
        """Create or update a task of a client's batch: ``state``, ``status``, ``reason``,
        ``session_id``, ``prompt``, ``runs`` (a new task is ``queued`` and goes last)."""
        now = time.time()
        fields = self._redact.value(fields)
        self._db.execute(
            "INSERT INTO batch_tasks (batch_id, task_id, position, state, updated) VALUES (?, ?, "
            "(SELECT COUNT(*) FROM batch_tasks WHERE batch_id = ?), 'queued', ?) "
            "ON CONFLICT (batch_id, task_id) DO NOTHING",
            (batch_id, task_id, batch_id, now),
        )
        if fields:
            sets = ", ".join(f"{name} = ?" for name in fields)
            self._db.execute(
                f"UPDATE batch_tasks SET {sets}, updated = ? WHERE batch_id = ? AND task_id = ?",
                (*fields.values(), now, batch_id, task_id),
            )

    def tasks(self, batch_id: str, *, limit: int | None = None) -> list[dict[str, Any]]:
        """A client's batch's tasks, in the order they were first heard of."""
        tail = " LIMIT ?" if limit is not None else ""
        args: tuple[Any, ...] = (batch_id, limit) if limit is not None else (batch_id,)
        cursor = self._db.execute(
            f"SELECT {', '.join(_TASK_COLUMNS)} FROM batch_tasks WHERE batch_id = ? ORDER BY position" + tail,
            args,
        )
        return [dict(zip(_TASK_COLUMNS, row, strict=True)) for row in cursor.fetchall()]

    def task_counts(self, batch_id: str) -> dict[str, int]:
        """A client's batch's tasks per state, and per ``finished:<status>``."""
        counts: dict[str, int] = {}
        cursor = self._db.execute(
            "SELECT state, status, COUNT(*) FROM batch_tasks WHERE batch_id = ? GROUP BY state, status",
            (batch_id,),
        )
        for state, status, n in cursor.fetchall():
            counts[state] = counts.get(state, 0) + n
            if state == "finished" and status:
                counts[f"finished:{status}"] = counts.get(f"finished:{status}", 0) + n
        return counts

    def batch(self, batch_id: str) -> dict[str, Any] | None:
        rows = self._batches("WHERE id = ?", (batch_id,))
        return rows[0] if rows else None

    def batches(self, *, limit: int | None = None) -> list[dict[str, Any]]:
        if limit is None:
            return self._batches("ORDER BY created DESC", ())
        return self._batches("ORDER BY created DESC LIMIT ?", (limit,))

    def _batches(self, tail: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
        columns = "id, provider, total, state, reason, created, updated, kind, name"
        cursor = self._db.execute(f"SELECT {columns} FROM batches " + tail, args)
        keys = ("batch_id", "provider", "total", "state", "reason", "created", "updated", "kind", "name")
        return [dict(zip(keys, row, strict=True)) for row in cursor.fetchall()]

    # -- reading sessions ------------------------------------------------------------------------------

    def _select(self, tail: str, args: tuple[Any, ...]) -> list[dict[str, Any]]:
        columns = ", ".join("id" if c == "session_id" else c for c in _SESSION_COLUMNS)
        cursor = self._db.execute(f"SELECT {columns} FROM sessions " + tail, args)
        out = []
        for values in cursor.fetchall():
            row = dict(zip(_SESSION_COLUMNS, values, strict=True))
            row["spec"] = json.loads(row["spec"])
            row["usage"] = json.loads(row["usage"]) if row["usage"] else None
            row["archived"] = bool(row["archived"])
            out.append(row)
        return out

    # -- notes ---------------------------------------------------------------------------------------

    def add_note(self, session_id: str, after: int, record: dict[str, Any]) -> float:
        """A note on the session (a batch runner's notice: a gate, a follow-up), after its event
        ``after``; returns its time."""
        at = time.time()
        self._db.execute(
            "INSERT INTO notes (session_id, after, at, record) VALUES (?, ?, ?, ?)",
            (session_id, after, at, json.dumps(self._redact.value(record))),
        )
        return at

    def notes(self, session_id: str) -> list[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT after, at, record FROM notes WHERE session_id = ? ORDER BY rowid", (session_id,)
        )
        return [{"after": after, "at": at, **json.loads(record)} for after, at, record in rows.fetchall()]
