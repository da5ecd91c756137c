"""Issue 29, item 9: no record the runner writes keeps a secret. An error message carrying every secret
shape of ``secrets_corpus`` goes through each record kind — the batch ledger (``reason``, ``history``,
the stored record), ``summary.json`` (a stop's reason in its header and in the records it makes up),
the report page (also rendered from a summary written by someone else), the ``--json`` summary line
and the daemon's store — and none of it is found in what was written, raw or decoded."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console

from agent_fleet._redact import REDACTED, Redactor
from agent_fleet.runner._ledger_views import write_records
from agent_fleet.runner._summary import task_record
from agent_fleet.runner.ledger import LEDGER_FILE, Ledger
from agent_fleet.runner.report import write_batch_report
from agent_fleet.runner.task import TaskResult

from ..secrets_corpus import LOOKALIKES, SECRETS

# One error message with every shape (a cut-off key block runs to the end of a text: it comes last).
EVERY = "\n".join([*(t for n, (t, _) in SECRETS.items() if n != "pem_cut"), SECRETS["pem_cut"][0]])
ERROR = "the turn failed: " + EVERY


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
        try:
            decoded = json.loads(value)
        except ValueError:
            return
        if not isinstance(decoded, str):
            yield from _strings(decoded)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def _assert_clean(where: str, *texts: str) -> None:
    for text in texts:
        for name, (_, secret) in SECRETS.items():
            assert secret not in text, (where, name)


def _assert_db_clean(path: Path) -> None:
    """Every cell of every table, raw and JSON-decoded, and the files' bytes (WAL included)."""
    db = sqlite3.connect(path)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        cells = [c for t in tables for row in db.execute(f"SELECT * FROM {t}") for c in row]
    finally:
        db.close()
    _assert_clean(path.name, *_strings([c for c in cells if isinstance(c, str)]))
    for file in path.parent.glob(path.name + "*"):
        _assert_clean(file.name, file.read_bytes().decode("utf-8", "replace"))


def _failed(task_id: str) -> dict[str, Any]:
    result = TaskResult(task_id=task_id, status="error", reason=ERROR, error_code="turn_failed")
    return task_record(result, prompt=f"do {task_id}")


def test_an_error_message_leaves_no_secret_in_the_ledger(tmp_path: Path) -> None:
    """The reported case: ``reason`` and ``history`` kept 35 of 35 keys of one error message."""
    ledger = Ledger.create(
        tmp_path, [(i, n + 1, {"id": i, "prompt": f"do {i}"}) for n, i in enumerate("abc")]
    )
    ledger.start("a", branch="fleet/a", worktree=None, transcript="a.jsonl")
    ledger.finish("a", result=_failed("a"), attempts=1, worktree_kept=None)
    ledger.start("b", branch=None, worktree=None, transcript="b.jsonl")
    ledger.replace_record("b", _failed("b"))
    ledger.finish("b", result=_failed("b"), attempts=1, worktree_kept=None)
    row = ledger.get("a")
    assert row.reason is not None and row.reason.startswith("the turn failed: ") and REDACTED in row.reason
    assert REDACTED in json.dumps(ledger.history("a"))
    ledger.close()
    _assert_db_clean(tmp_path / LEDGER_FILE)


def test_look_alikes_in_a_reason_are_kept(tmp_path: Path) -> None:
    ledger = Ledger.create(tmp_path, [("a", 1, {"id": "a", "prompt": "do a"})])
    ledger.start("a", branch=None, worktree=None, transcript="a.jsonl")
    looks = "\n".join(LOOKALIKES)
    result = task_record(TaskResult(task_id="a", status="failed", reason=looks), prompt="do a")
    ledger.finish("a", result=result, attempts=1, worktree_kept=None)
    assert ledger.get("a").reason == looks
    assert ledger.history("a")[-1][1]["reason"] == looks
    ledger.close()


def test_a_stop_reason_leaves_no_secret_in_the_summary_or_the_report(tmp_path: Path) -> None:
    """The batch's own fields (its stop reason, which never-started tasks repeat) and the records it
    makes up for tasks cut off running or queued again."""
    ledger = Ledger.create(
        tmp_path, [(i, n + 1, {"id": i, "prompt": f"do {i}"}) for n, i in enumerate("abcd")]
    )
    ledger.start("a", branch=None, worktree=None, transcript="a.jsonl")
    ledger.finish("a", result=_failed("a"), attempts=1, worktree_kept=None)
    ledger.start("b", branch=None, worktree=None, transcript="b.jsonl")  # cut off running
    ledger.start("c", branch=None, worktree=None, transcript="c.jsonl")
    ledger.finish("c", result=_failed("c"), attempts=1, worktree_kept=None)
    ledger.prepare_resume(rerun_failed=True)  # a and c queued again: their records are made up
    path, document = write_records(
        ledger, started_at=None, duration=1.0, stopped=ERROR, fatal=False, extra={"note": ERROR}
    )
    ledger.close()
    summary = path.read_text()
    _assert_clean("summary.json", summary, *_strings(json.loads(summary)), *_strings(document))
    assert REDACTED in json.loads(summary)["stopped"]
    _assert_clean("report.html", (tmp_path / "report.html").read_text())
    _assert_db_clean(tmp_path / LEDGER_FILE)


def test_the_report_of_a_summary_written_elsewhere_holds_no_secret(tmp_path: Path) -> None:
    """``agent-fleet report DIR`` renders whatever summary.json is there (an older version's, a
    hand-made one): the page redacts it."""
    ledger = Ledger.create(tmp_path, [("a", 1, {"id": "a", "prompt": "do a"})])
    ledger.start("a", branch=None, worktree=None, transcript="a.jsonl")
    ledger.finish("a", result=_failed("a"), attempts=1, worktree_kept=None)
    path, _ = write_records(ledger, started_at=None, duration=1.0, stopped=None, fatal=False)
    ledger.close()
    summary = json.loads(path.read_text())
    summary["stopped"] = ERROR
    summary["tasks"][0].update(reason=ERROR, prompt=ERROR, final_text=ERROR)
    path.write_text(json.dumps(summary))
    page = write_batch_report(tmp_path).read_text()
    _assert_clean("report.html", page)
    assert REDACTED in page


def test_the_json_summary_line_holds_no_secret() -> None:
    from agent_fleet.cli._view import Progress

    out = io.StringIO()
    progress = Progress(Console(file=io.StringIO()), json_output=True, batch=True, out=out)
    progress.summary({"stopped": ERROR, "tasks": [{"reason": ERROR, "nested": {"error": [ERROR]}}]})
    _assert_clean("--json", out.getvalue(), *_strings(json.loads(out.getvalue())))
    assert REDACTED in out.getvalue()


def test_the_daemons_store_holds_no_secret(tmp_path: Path) -> None:
    from agent_fleet.serve._store import Store

    store = Store(tmp_path / "sessions.sqlite3", redactor=Redactor({}))
    store.add_session("s1", "codex", {"prompt": ERROR, "env": {"X": ERROR}})
    store.update("s1", step=ERROR, usage={"note": ERROR})
    store.add_turn("s1", 1, ERROR, 0)
    store.end_turn("s1", 1, status="failed", text=ERROR, error={"code": "x", "message": ERROR}, usage=None)
    store.add_batch("b1", "codex", 3)
    store.update_batch("b1", state="error", reason=ERROR)
    store.add_batch("b2", "codex", 1, kind="client", name=ERROR)
    store.set_task("b2", "t1", state="finished", status="failed", reason=ERROR, prompt=ERROR)
    store.add_note("s1", 0, {"subtype": "runner.gate_finished", "output": ERROR})
    assert REDACTED in (store.batch("b1") or {}).get("reason", "")
    store.close()
    _assert_db_clean(tmp_path / "sessions.sqlite3")
