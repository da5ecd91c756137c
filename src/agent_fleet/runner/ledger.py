"""The batch ledger: every task's state in one SQLite file (``OUT/batch.db``), written as it changes.

Theory of operation
-------------------
A batch's record must survive anything (a crash, ``kill -9``, a second Ctrl-C), so the ledger is the
source of truth and ``summary.json`` is a view derived from it (``runner._ledger_views.write_records``),
never the only copy. ``create`` builds the file whole under a name of its own and then puts it in
place, so a reader beside a starting batch finds no ledger or all of it.
Each transition is one short SQLite transaction (WAL journal, ``synchronous=NORMAL``: a commit is in the
OS before the call returns, so a killed process loses nothing; a power cut may lose the last commits,
never the file's consistency). Every transition also appends a row to ``history``.

A task's ``state``::

    queued --start--> running --finish--> finished     (status succeeded / failed / timeout / error)
                         |    --finish--> interrupted  (status cancelled: stopped, resumable)
                         +--(the process died)--> still "running" on disk: read as interrupted

    resume:   running | interrupted -> resumed with their session (when one is known), else started
              finished (not succeeded), with rerun_failed -> queued, started afresh (branch kept)

``session_id`` is recorded as soon as the session exists, so an interrupted task can continue its
conversation; with it, the first time, ``base_head``: HEAD when the task first started, the commit its
work is measured from (``--require-commit``, the review, the final diff) however often it is resumed.
A re-run afresh (``rerun_failed``) forgets it. ``runs`` counts the times the batch started the task;
``attempts`` the turns tried over all runs (each run's first and its turn-level retries). The local
backend records each attempt as it starts (``attempt``: the run's start, then each retry once it is
decided, its backoff included), so a process killed mid-retry leaves a true count; a backend that
learns of them only at the end adds them with ``finish(attempts=...)``.

Writers: one ``Ledger`` per process, used from the event loop's thread (each call is a few hundred
microseconds). ``read_summary`` opens its own connection, so it is safe from another thread (the
CLI's forced-exit path) while the batch writes.

One batch at a time: ``create`` and ``open`` take an exclusive ``flock`` on ``OUT/batch.lock`` (its
content: the holder's pid, for the refusal's message) and hold it until ``close``, so two runs of
the same ``--out`` (two ``--resume``, a resume and a re-run) never write one ledger at once; a second
one is refused (``UsageError``) naming the holder. The kernel releases the lock when its process dies,
however it dies, so a crash never leaves the batch locked; the descriptor is not inherited by the
providers' processes. Readers that must work while the batch runs (the forced-exit path) pass
``lock=False``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from agent_fleet._pidlock import hold_lock
from agent_fleet.errors import UsageError
from agent_fleet.runner._sqlite import transaction as _transaction
from agent_fleet.runner._sqlite import writes as _writes
from agent_fleet.runner.transcript import Redactor

__all__ = [
    "LEDGER_FILE",
    "LOCK_FILE",
    "SUMMARY_FILE",
    "Ledger",
    "LedgerRow",
    "TaskState",
    "holds_batch",
]

LEDGER_FILE: Final = "batch.db"
LOCK_FILE: Final = "batch.lock"
SUMMARY_FILE: Final = "summary.json"
_SCHEMA_VERSION: Final = 1

TaskState = Literal["queued", "running", "interrupted", "finished"]
_STATES: Final = ("queued", "running", "interrupted", "finished")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    position INTEGER NOT NULL UNIQUE,
    line INTEGER NOT NULL,
    spec TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'interrupted', 'finished')),
    status TEXT,
    reason TEXT,
    session_id TEXT,
    runs INTEGER NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    fresh INTEGER NOT NULL DEFAULT 0,
    branch TEXT,
    worktree TEXT,
    worktree_kept TEXT,
    transcript TEXT,
    result TEXT,
    started_at REAL,
    ended_at REAL,
    updated_at REAL NOT NULL,
    base_head TEXT
);
CREATE INDEX IF NOT EXISTS tasks_state ON tasks (state, position);
CREATE TABLE IF NOT EXISTS history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL,
    at REAL NOT NULL,
    state TEXT NOT NULL,
    detail TEXT
);
CREATE TABLE IF NOT EXISTS pids (pid INTEGER NOT NULL, owner INTEGER NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (pid, owner));
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerRow:
    """One task as the ledger holds it. ``spec`` is the task's tasks-file entry (a JSON object)."""

    id: str
    position: int
    line: int
    spec_json: str
    state: TaskState
    status: str | None
    reason: str | None
    session_id: str | None
    runs: int
    attempts: int
    fresh: bool
    branch: str | None
    worktree: str | None
    worktree_kept: str | None
    transcript: str | None
    result: dict[str, Any] | None
    base_head: str | None = None

    @property
    def spec(self) -> dict[str, Any]:
        """The task's tasks-file entry (decoded on demand: a summary of many tasks does not need it)."""
        value: dict[str, Any] = json.loads(self.spec_json)
        return value

    @property
    def resumable(self) -> bool:
        """Stopped mid-run (or the process died): resume its session when one is known."""
        return self.state in ("running", "interrupted")


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=10.0, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=10000")
    return db


def holds_batch(out: Path) -> bool:
    """True when ``out`` already holds a batch record (a ledger, or a summary of an older version)."""
    return (out / LEDGER_FILE).exists() or (out / SUMMARY_FILE).exists()


def _lock(out: Path) -> io.FileIO:
    """An exclusive lock on ``out``'s batch (see the module docstring): the open file holding it (a file
    object, so a ledger dropped without ``close`` still lets go when it is collected). Raises
    ``UsageError`` naming the process that holds it."""

    def failed(exc: OSError) -> UsageError:
        return UsageError(f"cannot lock the batch in {str(out)!r}: {exc.strerror or exc}")

    def busy(who: str) -> UsageError:
        return UsageError(
            f"--out {str(out)!r} is in use by another batch ({who}): wait for it to end or stop it"
        )

    return hold_lock(out / LOCK_FILE, busy=busy, failed=failed)


def _build(
    path: Path, entries: Sequence[tuple[str, int, Mapping[str, Any]]], meta: Mapping[str, Any] | None
) -> None:
    """A whole new ledger at ``path``, left in WAL mode with its WAL folded in and gone: the finished file
    is all of it, and no reader must change its journal mode (a lock that would hold up the batch)."""
    db, now = sqlite3.connect(path, timeout=10.0, isolation_level=None), time.time()
    try:
        db.executescript(_SCHEMA)  # (executescript commits on its own)
        with _transaction(db):
            db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [
                    ("schema", json.dumps(_SCHEMA_VERSION)),
                    ("created_at", json.dumps(now)),
                    *((k, json.dumps(v)) for k, v in (meta or {}).items()),
                ],
            )
            db.executemany(
                "INSERT INTO tasks (id, position, line, spec, state, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    (task_id, position, line, json.dumps(obj, ensure_ascii=False), "queued", now)
                    for position, (task_id, line, obj) in enumerate(entries)
                ),
            )
        db.execute("PRAGMA journal_mode=WAL")
    finally:
        db.close()


def _publish(built: Path, path: Path) -> None:
    """Put the ledger ``built`` at ``path``, never over an existing one (two racing batches)."""
    try:
        os.link(built, path)
    except FileExistsError as exc:
        raise UsageError(f"--out {str(path.parent)!r} already holds a batch") from exc
    except OSError:  # a file system without hard links: the batch's lock keeps other batches out
        os.replace(built, path)
    built.unlink(missing_ok=True)


class Ledger:
    """The ledger of the batch in ``out`` (see the module docstring). Use ``create`` or ``open``."""

    def __init__(self, out: Path, db: sqlite3.Connection, lock: io.FileIO | None = None) -> None:
        self.out = out
        self.path = out / LEDGER_FILE
        self._db = db
        self._lock = lock
        #: what a run produces is redacted as it comes in (``finish``'s record and reason,
        #: ``replace_record``, every history row): the ledger holds no secret, and the summary needs no
        #: second pass over a whole fleet. A task's tasks-file entry (``spec``) and the batch's settings
        #: (``meta``) are kept as given: they are the operator's input, which ``--resume`` runs again.
        self.redactor = Redactor()

    # -- opening ---------------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        out: Path,
        entries: Sequence[tuple[str, int, Mapping[str, Any]]],
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> Ledger:
        """A new ledger with ``entries`` (id, line, tasks-file object) queued, in order; it holds the
        batch's lock until ``close``.

        Raises ``UsageError`` when ``out`` already holds a batch (never overwrites one) or another
        process holds its lock.
        """
        if holds_batch(out):
            raise UsageError(
                f"--out {str(out)!r} already holds a batch; continue it with `agent-fleet batch --resume "
                f"{out}` (add `--rerun failed` to run its failed tasks again), or choose another --out"
            )
        held = _lock(out)
        path = out / LEDGER_FILE
        # Built whole under a name of its own, then put in place: a reader beside a starting batch (a
        # `report` run, a dashboard) finds no ledger or all of it, never a file without its tables.
        building = out / f".{LEDGER_FILE}.{os.getpid()}.new"
        try:
            for stale in out.glob(f".{LEDGER_FILE}.*.new"):  # left by a batch killed while starting
                stale.unlink(missing_ok=True)
            try:
                fd = os.open(building, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            except OSError as exc:
                raise UsageError(f"cannot create the batch ledger {str(path)!r}: {exc.strerror}") from exc
            os.close(fd)
            _build(building, entries, meta)
            _publish(building, path)
        except BaseException:
            building.unlink(missing_ok=True)
            held.close()
            raise
        db = _connect(path)
        return cls(out, db, held)

    @classmethod
    def open(cls, out: Path, *, lock: bool = True) -> Ledger:
        """The ledger of an existing batch, holding its lock until ``close`` (unless ``lock=False``: a
        reader beside the batch's own writer). Raises ``UsageError`` when ``out`` holds none, or (with
        ``lock``) another process holds its lock."""
        path = out / LEDGER_FILE
        if not path.is_file():
            raise UsageError(f"{str(out)!r} holds no batch to resume (no {LEDGER_FILE} in it)")
        held = _lock(out) if lock else None
        try:
            try:
                db = _connect(path)
                version = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            except sqlite3.DatabaseError as exc:
                raise UsageError(f"{str(path)!r} is not a batch ledger: {exc}") from exc
            if version is None or json.loads(version[0]) != _SCHEMA_VERSION:
                db.close()
                raise UsageError(f"{str(path)!r} was written by another version of agent-fleet")
            if lock and "base_head" not in {r[1] for r in db.execute("PRAGMA table_info(tasks)")}:
                db.execute("ALTER TABLE tasks ADD COLUMN base_head TEXT")  # a ledger from before it
        except BaseException:
            if held is not None:
                held.close()
            raise
        return cls(out, db, held)

    def close(self) -> None:
        """Close the ledger and release the batch's lock. Idempotent."""
        self._db.close()
        if self._lock is not None:
            self._lock.close()  # (the lock file stays: unlinking it would race the next taker)
            self._lock = None

    def discard(self) -> None:
        """Close and delete the ledger (a batch that never started: nothing ran, nothing to keep)."""
        self._db.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                self.path.with_name(self.path.name + suffix).unlink()
        if self._lock is not None:
            with contextlib.suppress(FileNotFoundError):
                (self.out / LOCK_FILE).unlink()  # while still held: nothing was there before us
            self._lock.close()
            self._lock = None

    @_writes
    def add(self, entries: Sequence[tuple[str, int, Mapping[str, Any]]]) -> None:
        """Queue more tasks (id, line, tasks-file object) after those already in. Raises ``UsageError``
        for an id already in the ledger."""
        now = time.time()
        try:
            with _transaction(self._db):
                (last,) = self._db.execute("SELECT COALESCE(MAX(position), -1) FROM tasks").fetchone()
                self._db.executemany(
                    "INSERT INTO tasks (id, position, line, spec, state, updated_at) "
                    "VALUES (?, ?, ?, ?, 'queued', ?)",
                    (
                        (task_id, last + 1 + n, line, json.dumps(obj, ensure_ascii=False), now)
                        for n, (task_id, line, obj) in enumerate(entries)
                    ),
                )
        except sqlite3.IntegrityError as exc:
            raise UsageError(f"a task id is used twice in the batch ({exc})") from exc

    # -- reading ---------------------------------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._db.execute("SELECT key, value FROM meta")}

    @_writes
    def set_meta(self, key: str, value: Any) -> None:
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, json.dumps(value)),
        )

    def rows(self, *, states: Sequence[TaskState] | None = None) -> Iterator[LedgerRow]:
        """Every task (or those in ``states``) in tasks-file order, read in pages (memory stays flat)."""
        if states is None:
            return map(_row, self._raw_rows())
        return map(_row, self._raw_rows(f" AND state IN ({', '.join('?' for _ in states)})", list(states)))

    def to_run(self, *, rerun_failed: bool) -> Iterator[LedgerRow]:
        """The tasks a resumed run will run (before ``prepare_resume``): queued, running and interrupted
        ones, and with ``rerun_failed`` the finished ones that did not succeed; in tasks-file order."""
        extra = " OR (state = 'finished' AND status != 'succeeded')" if rerun_failed else ""
        return map(_row, self._raw_rows(f" AND (state IN ('queued', 'running', 'interrupted'){extra})"))

    def started_rows(self) -> Iterator[LedgerRow]:
        """The tasks started at least once (whatever their state now), in tasks-file order."""
        return map(_row, self._raw_rows(" AND (state != 'queued' OR runs > 0)"))

    def never_started(self) -> list[str]:
        """The ids of the tasks never started (queued, no run yet), in tasks-file order."""
        query = "SELECT id FROM tasks WHERE state = 'queued' AND runs = 0 ORDER BY position"
        return [task_id for (task_id,) in self._db.execute(query)]

    def _raw_rows(self, where: str = "", args: Sequence[Any] = ()) -> Iterator[Sequence[Any]]:
        last = -1
        while True:
            page = self._db.execute(
                f"SELECT * FROM tasks WHERE position > ?{where} ORDER BY position LIMIT 500",
                [last, *args],
            ).fetchall()
            if not page:
                return
            yield from page
            last = page[-1][1]

    def get(self, task_id: str) -> LedgerRow:
        raw = self._db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if raw is None:
            raise KeyError(task_id)
        return _row(raw)

    def counts(self) -> dict[str, int]:
        """Tasks per state, and per final status for finished ones (``finished:<status>``)."""
        out: dict[str, int] = {}
        for state, status, n in self._db.execute(
            "SELECT state, status, COUNT(*) FROM tasks GROUP BY state, status"
        ):
            out[state] = out.get(state, 0) + n
            if state == "finished":
                out[f"finished:{status}"] = n
        return out

    def history(self, task_id: str) -> list[tuple[str, dict[str, Any]]]:
        return [
            (state, json.loads(detail) if detail else {})
            for state, detail in self._db.execute(
                "SELECT state, detail FROM history WHERE task_id = ? ORDER BY seq", (task_id,)
            )
        ]

    # -- transitions -----------------------------------------------------------------------------------

    @_writes
    def prepare_resume(self, *, rerun_failed: bool) -> None:
        """Before a resumed run: with ``rerun_failed`` every finished task that did not succeed is queued
        again (to start afresh on its branch). Running and interrupted tasks stay as they are: the run
        resumes them."""
        if not rerun_failed:
            return
        now = time.time()
        with _transaction(self._db):
            ids = [
                r[0]
                for r in self._db.execute(
                    "SELECT id FROM tasks WHERE state = 'finished' AND status != 'succeeded'"
                )
            ]
            self._db.execute(
                "UPDATE tasks SET state = 'queued', fresh = 1, base_head = NULL, updated_at = ? "
                "WHERE state = 'finished' AND status != 'succeeded'",
                (now,),
            )
            self._db.executemany(
                "INSERT INTO history (task_id, at, state, detail) VALUES (?, ?, 'queued', ?)",
                ((i, now, self._detail({"why": "rerun failed"})) for i in ids),
            )

    @_writes
    def start(self, task_id: str, *, branch: str | None, worktree: str | None, transcript: str) -> None:
        now = time.time()
        with _transaction(self._db):
            self._db.execute(
                "UPDATE tasks SET state = 'running', runs = runs + 1, branch = ?, worktree = ?, "
                "worktree_kept = NULL, transcript = ?, started_at = ?, ended_at = NULL, updated_at = ? "
                "WHERE id = ?",
                (branch, worktree, transcript, now, now, task_id),
            )
            self._history(task_id, now, "running", {"branch": branch, "worktree": worktree})

    @_writes
    def session(self, task_id: str, session_id: str, *, base_head: str | None = None) -> None:
        """The task's session exists (a new one, or the one it resumed); ``base_head`` is HEAD when the
        run started, kept only the first time (see the module docstring)."""
        now = time.time()
        with _transaction(self._db):
            self._db.execute(
                "UPDATE tasks SET session_id = ?, fresh = 0, base_head = COALESCE(base_head, ?), "
                "updated_at = ? WHERE id = ?",
                (session_id, base_head, now, task_id),
            )
            self._history(task_id, now, "session", {"session_id": session_id})

    @_writes
    def attempt(self, task_id: str) -> None:
        """An attempt of the task's turn starts (the run's first, or a retry): counted at once."""
        self._db.execute(
            "UPDATE tasks SET attempts = attempts + 1, updated_at = ? WHERE id = ?", (time.time(), task_id)
        )

    @_writes
    def annotate(self, task_id: str, what: str, detail: Mapping[str, Any]) -> None:
        """Add to the task's history without a transition (redacted): e.g. an attempt a backend
        abandoned, with what it did."""
        self._history(task_id, time.time(), what, self.redactor.value(dict(detail)))

    @_writes
    def replace_record(self, task_id: str, record: Mapping[str, Any]) -> None:
        """Replace the record of a task's last run (completed after the fact, e.g. on Ray), without a
        transition."""
        redacted = self.redactor.value(dict(record))
        self._db.execute(
            "UPDATE tasks SET result = ?, updated_at = ? WHERE id = ?",
            (json.dumps(redacted, ensure_ascii=False, default=str), time.time(), task_id),
        )

    @_writes
    def finish(
        self,
        task_id: str,
        *,
        result: Mapping[str, Any],
        attempts: int,
        worktree_kept: str | None,
    ) -> None:
        """Record a run's end: ``result`` is the task's record (``BatchEntry.to_dict``); ``attempts``
        are added to those ``attempt`` counted (0 when each was counted as it started)."""
        status = str(result.get("status"))
        state: TaskState = "interrupted" if status == "cancelled" else "finished"
        now = time.time()
        session_id = result.get("session_id")
        record: dict[str, Any] = self.redactor.value(dict(result))  # the reason column, record and history
        reason = str(record.get("reason") or "")
        with _transaction(self._db):
            self._db.execute(
                "UPDATE tasks SET state = ?, status = ?, reason = ?, "
                "session_id = COALESCE(?, session_id), attempts = attempts + ?, worktree_kept = ?, "
                "result = ?, ended_at = ?, updated_at = ? WHERE id = ?",
                (
                    state,
                    status,
                    reason,
                    session_id if isinstance(session_id, str) else None,
                    attempts,
                    worktree_kept,
                    json.dumps(record, ensure_ascii=False, default=str),
                    now,
                    now,
                    task_id,
                ),
            )
            self._history(task_id, now, state, {"status": status, "reason": reason or None})

    @_writes
    def note_pid(self, pid: int) -> None:
        """A provider process started by this process (the CLI's forced exit ends its process group)."""
        self._db.execute(
            "INSERT OR REPLACE INTO pids (pid, owner, at) VALUES (?, ?, ?)", (pid, os.getpid(), time.time())
        )

    def pids(self, *, owner: int | None = None) -> list[int]:
        """Provider processes noted by ``owner`` (a process id; default: this process)."""
        owner = os.getpid() if owner is None else owner
        return [r[0] for r in self._db.execute("SELECT pid FROM pids WHERE owner = ? ORDER BY pid", (owner,))]

    def _history(self, task_id: str, at: float, state: str, detail: Mapping[str, Any]) -> None:
        self._db.execute(
            "INSERT INTO history (task_id, at, state, detail) VALUES (?, ?, ?, ?)",
            (task_id, at, state, self._detail(detail)),
        )

    def _detail(self, detail: Mapping[str, Any]) -> str:
        """A history row's detail as stored: redacted (the one place history is written from)."""
        return json.dumps(self.redactor.value(dict(detail)), ensure_ascii=False, default=str)


_COLUMNS: Final = (
    "id",
    "position",
    "line",
    "spec",
    "state",
    "status",
    "reason",
    "session_id",
    "runs",
    "attempts",
    "fresh",
    "branch",
    "worktree",
    "worktree_kept",
    "transcript",
    "result",
    "started_at",
    "ended_at",
    "updated_at",
    "base_head",
)


def _row(raw: Sequence[Any]) -> LedgerRow:
    """A ``SELECT *`` row (columns in ``_COLUMNS`` order) as a ``LedgerRow``."""
    values: tuple[Any, ...] = (*raw[: len(_COLUMNS)], *(None,) * (len(_COLUMNS) - len(raw)))  # older: padded
    (
        task_id, position, line, spec, state, status, reason, session_id, runs, attempts, fresh, branch,
        worktree, worktree_kept, transcript, result, _started, _ended, _updated, base_head,
    ) = values  # fmt: skip
    return LedgerRow(
        id=task_id,
        position=position,
        line=line,
        spec_json=spec,
        state=state,
        status=status,
        reason=reason,
        session_id=session_id,
        runs=runs,
        attempts=attempts,
        fresh=bool(fresh),
        branch=branch,
        worktree=worktree,
        worktree_kept=worktree_kept,
        transcript=transcript,
        result=json.loads(result) if result else None,
        base_head=base_head,
    )
