"""Views of the batch ledger: ``summary.json`` (``build_summary`` over every task's record) and
``report.html``, written at the end of a run or by a process leaving by force (see ``runner.ledger``)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from agent_fleet.errors import StorageError
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.runner._summary import build_summary, task_record
from agent_fleet.runner.ledger import SUMMARY_FILE, Ledger, LedgerRow
from agent_fleet.runner.report import write_report
from agent_fleet.runner.task import TaskResult
from agent_fleet.runner.transcript import Redactor

__all__ = [
    "REPORT_FILE",
    "dump_summary",
    "ledger_record",
    "ledger_size",
    "record_forced_stop",
    "write_records",
]

REPORT_FILE: Final = "report.html"


def ledger_size(ledger: Ledger) -> int:
    """How many tasks the batch has."""
    return sum(n for k, n in ledger.counts().items() if ":" not in k)


@functools.lru_cache(maxsize=8)
def _not_started(stopped: str | None) -> Mapping[str, Any]:
    return task_record(TaskResult(task_id="", status="cancelled", reason=not_started_reason(stopped)))


@functools.lru_cache(maxsize=8)
def _not_started_redacted(stopped: str | None, redactor: Redactor) -> Mapping[str, Any]:
    redacted: Mapping[str, Any] = redactor.value(dict(_not_started(stopped)))
    return redacted


def ledger_record(row: LedgerRow, stopped: str | None, redactor: Redactor | None = None) -> dict[str, Any]:
    """A task's record (``task_record``'s shape) as the ledger knows it, with its ``state``, ``runs`` and
    ``attempts``: the record of its last run (redacted when it was stored), or one made up here saying
    it never started or was cut off running (redacted with ``redactor``: it holds the prompt, and the
    reason a stopped batch gives)."""
    redact = redactor.value if redactor is not None else (lambda value: value)
    if row.result is not None and row.state in ("finished", "interrupted"):
        record = dict(row.result)
    elif row.state == "running":  # the process died (or left by force) while the task ran
        result = TaskResult(
            task_id=row.id,
            status="cancelled",
            reason="interrupted while running (the batch was stopped by force or died); "
            "`agent-fleet batch --resume` continues its session",
            error_code="cancelled",
            session_id=row.session_id,
            transcript=Path(row.transcript) if row.transcript else None,
        )
        record = redact(
            task_record(
                result,
                prompt=str(row.spec.get("prompt") or ""),
                branch=row.branch,
                worktree=row.worktree,
                worktree_kept=row.worktree is not None,
            )
        )
    else:  # never started (or queued again): built from one template, redacted once per reason
        record = dict(_not_started(stopped) if redactor is None else _not_started_redacted(stopped, redactor))
        record.update(task_id=row.id, prompt=redact(str(row.spec.get("prompt") or "")), branch=row.branch)
    record["session_id"] = row.session_id or record.get("session_id")  # recorded as soon as it existed
    record["state"] = row.state
    record["runs"] = row.runs
    record["attempts"] = row.attempts
    return record


def write_records(
    ledger: Ledger,
    *,
    started_at: float | None,
    duration: float,
    stopped: str | None,
    fatal: bool,
    provider_pids: Sequence[int] = (),
    prices: PriceTable | None = None,
    extra: Mapping[str, Any] | None = None,
    worktrees_on_disk: bool = False,
) -> tuple[Path, dict[str, Any]]:
    """``summary.json`` (``build_summary`` over every task's ``ledger_record``, redacted) and
    ``report.html``, written from the ledger. Returns the summary's path and the document. Raises
    ``StorageError`` naming the file that could not be written (a full disk); no temporary file stays.
    ``worktrees_on_disk``: each task's worktree in this machine's box is reported kept when it is on
    disk now, whatever the ledger says (for a process leaving by force, whose removals and additions may
    be cut off; a Ray node's worktrees are on the node, and reported as recorded)."""
    redactor = ledger.redactor
    records = [ledger_record(row, stopped, redactor) for row in ledger.started_rows()]
    box = ledger.meta().get("box") if worktrees_on_disk else None
    if isinstance(box, str):
        inside = os.path.join(box, "")
        for record in records:
            worktree = record.get("worktree")
            if isinstance(worktree, dict) and isinstance(worktree.get("path"), str):
                path = worktree["path"]
                if path.startswith(inside):
                    record["worktree"] = {**worktree, "kept": os.path.isdir(path)}
    not_started = ledger.never_started()  # the bulk of a stopped fleet: listed by id alone (issue 29)
    summary = build_summary(
        records,
        started_at=started_at,
        finished_at=started_at + duration if started_at is not None else None,
        duration=duration,
        stopped=stopped,
        fatal=fatal,
        provider_pids=provider_pids,
        prices=prices,
    )
    document: dict[str, Any] = {k: v for k, v in summary.items() if k != "tasks"}
    states: dict[str, int] = {}
    for record in records:
        states[record["state"]] = states.get(record["state"], 0) + 1
    if not_started:
        states["queued"] = states.get("queued", 0) + len(not_started)
        counts = document["counts"]
        counts["cancelled"] = counts.get("cancelled", 0) + len(not_started)  # every task is counted
    document.update(states=states, ledger=str(ledger.path), **dict(extra or {}))
    document["not_started"] = {"reason": not_started_reason(stopped) if not_started else None}
    # Everything but the task records (redacted as they were stored, or as made up above), once; the
    # never-started tasks' ids in one pass.
    document = redactor.value(document)
    document["not_started"]["task_ids"] = (
        redactor.text("\n".join(not_started)).split("\n") if not_started else []
    )
    document["tasks"] = summary["tasks"]
    path = dump_summary(ledger.out, document)
    # The page lists the tasks that ran; never-started ones are only counted.
    report = ledger.out / REPORT_FILE
    try:
        write_report(document, report, prices=prices, redacted=True)
    except OSError as exc:
        with contextlib.suppress(OSError):
            report.with_name(f".{report.name}.tmp").unlink()
        raise StorageError(str(report), "the report", exc) from exc
    return path, document


def not_started_reason(stopped: str | None) -> str:
    """The reason given for the tasks a stopped batch never started."""
    return f"not started: {stopped or 'the batch stopped'}"


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


def dump_summary(out: Path, payload: Mapping[str, Any]) -> Path:
    """Write ``payload`` as ``out/summary.json`` atomically (a temporary file renamed over it).

    One task a line: readable, and fast for a fleet (``json`` encodes in C only without ``indent``);
    the never-started tasks' ids on one line."""
    path = out / SUMMARY_FILE
    tmp = path.with_name(f".{SUMMARY_FILE}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write("{\n")
            for key, value in payload.items():
                if key != "tasks":
                    f.write(f"  {json.dumps(key)}: {json.dumps(value, default=str)},\n")
            tasks = payload.get("tasks") or []
            f.write('  "tasks": [')
            if tasks:
                f.write("\n    " + ",\n    ".join(map(_ENCODER.encode, tasks)) + "\n  ")
            f.write("]\n}\n")
        os.replace(tmp, path)
    except BaseException as exc:  # (a full disk): the summary stays as it was, no temporary file
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise StorageError(str(path), "the summary", exc) from exc
        raise
    return path


def record_forced_stop(out: Path, stopped: str) -> list[int]:
    """For a process about to leave by force: write ``summary.json`` and ``report.html`` from the ledger
    (through a connection of its own, so any thread may call this while the batch writes) and return
    the provider processes this process started (for the caller to end). Tasks still ``running`` are
    reported interrupted."""
    ledger = Ledger.open(out, lock=False)  # the batch's own ledger holds the lock
    try:
        started = ledger.meta().get("run_started_at")
        started_at = float(started) if isinstance(started, int | float) else None
        duration = time.time() - started_at if started_at is not None else 0.0
        write_records(
            ledger,
            started_at=started_at,
            duration=duration,
            stopped=stopped,
            fatal=False,
            extra={"forced": True},
            worktrees_on_disk=True,
        )
        return ledger.pids()
    finally:
        ledger.close()
