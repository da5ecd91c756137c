"""The batch ledger: transitions, refusal, resume preparation, summary derived from it, crash reading."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import pytest

from agent_fleet.errors import UsageError
from agent_fleet.runner._batch_types import entries_from_summary
from agent_fleet.runner._ledger_views import ledger_record, record_forced_stop, write_records
from agent_fleet.runner._summary import task_record
from agent_fleet.runner.ledger import LEDGER_FILE, Ledger, holds_batch
from agent_fleet.runner.task import TaskResult, TaskStatus

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "summary.schema.json").read_text())


def _ledger(out: Path, ids: tuple[str, ...] = ("a", "b", "c")) -> Ledger:
    out.mkdir(parents=True, exist_ok=True)
    return Ledger.create(out, [(i, n + 1, {"id": i, "prompt": f"do {i}"}) for n, i in enumerate(ids)])


def _result(task_id: str, status: TaskStatus, session_id: str | None = None) -> dict[str, object]:
    result = TaskResult(task_id=task_id, status=status, reason=f"{status} because", session_id=session_id)
    return task_record(result, prompt=f"do {task_id}")


def test_a_new_ledger_queues_every_task_in_order(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    rows = list(ledger.rows())
    assert [(r.id, r.line, r.state, r.runs) for r in rows] == [
        ("a", 1, "queued", 0),
        ("b", 2, "queued", 0),
        ("c", 3, "queued", 0),
    ]
    assert rows[0].spec == {"id": "a", "prompt": "do a"}
    assert ledger.counts() == {"queued": 3}


def test_an_out_holding_a_batch_is_refused(tmp_path: Path) -> None:
    _ledger(tmp_path).close()
    with pytest.raises(UsageError, match=r"already holds a batch.*--resume"):
        _ledger(tmp_path)
    other = tmp_path / "old"
    other.mkdir()
    (other / "summary.json").write_text("{}")  # a batch of a version without the ledger
    assert holds_batch(other)
    with pytest.raises(UsageError, match="already holds a batch"):
        _ledger(other)


def test_open_refuses_what_is_not_a_ledger(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="holds no batch to resume"):
        Ledger.open(tmp_path)
    (tmp_path / LEDGER_FILE).write_text("not sqlite at all, just text " * 100)
    with pytest.raises(UsageError, match="is not a batch ledger"):
        Ledger.open(tmp_path)


def test_transitions_and_history(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    ledger.start("a", branch="agent-fleet/a", worktree="/wt/a", transcript="/out/a.jsonl")
    ledger.session("a", "thread-1")
    ledger.finish(
        "a", result=_result("a", "succeeded", session_id="thread-1"), attempts=3, worktree_kept=None
    )
    ledger.start("b", branch=None, worktree=None, transcript="/out/b.jsonl")
    ledger.session("b", "thread-2")
    ledger.finish("b", result=_result("b", "cancelled"), attempts=1, worktree_kept="/wt/b")
    a, b, c = ledger.rows()
    assert (a.state, a.status, a.session_id, a.runs, a.attempts, a.branch) == (
        "finished",
        "succeeded",
        "thread-1",
        1,
        3,
        "agent-fleet/a",
    )
    assert (b.state, b.status, b.session_id, b.worktree_kept) == (
        "interrupted",
        "cancelled",
        "thread-2",
        "/wt/b",
    )
    assert b.resumable and not a.resumable and not c.resumable
    assert [s for s, _ in ledger.history("a")] == ["running", "session", "finished"]
    assert ledger.history("b")[-1] == ("interrupted", {"status": "cancelled", "reason": "cancelled because"})
    assert ledger.counts() == {"finished": 1, "finished:succeeded": 1, "interrupted": 1, "queued": 1}


def test_a_process_that_died_mid_task_reads_as_interrupted_with_its_session(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    ledger.start("a", branch="agent-fleet/a", worktree="/wt/a", transcript="/out/a.jsonl")
    ledger.session("a", "thread-1")
    ledger.close()  # no finish: the process was killed here
    reopened = Ledger.open(tmp_path)
    row = reopened.get("a")
    assert row.state == "running" and row.resumable and row.session_id == "thread-1"
    entry = ledger_record(row, None)
    assert entry["status"] == "cancelled" and entry["state"] == "running"
    assert "--resume" in entry["reason"] and entry["prompt"] == "do a"
    assert entry["session_id"] == "thread-1" and entry["worktree"] == {"path": "/wt/a", "kept": True}


def test_rerun_failed_queues_the_failed_tasks_afresh(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    for task_id, status in (("a", "succeeded"), ("b", "failed"), ("c", "timeout")):
        ledger.start(task_id, branch=None, worktree=None, transcript="t")
        ledger.session(task_id, f"thread-{task_id}")
        ledger.finish(task_id, result=_result(task_id, status), attempts=1, worktree_kept=None)
    ledger.prepare_resume(rerun_failed=False)
    assert ledger.counts()["finished"] == 3
    ledger.prepare_resume(rerun_failed=True)
    rows = {r.id: r for r in ledger.rows()}
    assert rows["a"].state == "finished"
    assert [(rows[i].state, rows[i].fresh) for i in ("b", "c")] == [("queued", True), ("queued", True)]
    ledger.session("b", "thread-new")
    assert not ledger.get("b").fresh


def test_summary_is_derived_from_the_ledger_and_replaced_atomically(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    ledger.start("a", branch=None, worktree=None, transcript="t")
    ledger.finish("a", result=_result("a", "failed"), attempts=2, worktree_kept=None)
    path, written = write_records(
        ledger, started_at=None, duration=1.5, stopped="stopped by the user", fatal=False
    )
    summary = json.loads(path.read_text())
    assert summary == json.loads(json.dumps(written))
    assert (tmp_path / "report.html").exists()
    assert summary["counts"] == {"failed": 1, "cancelled": 2}
    assert summary["states"] == {"finished": 1, "queued": 2}
    assert summary["stopped"] == "stopped by the user" and summary["duration"] == 1.5
    assert summary["tasks"][0]["attempts"] == 2 and summary["tasks"][0]["runs"] == 1
    assert len(summary["tasks"]) == 1, "never-started tasks are listed compactly, not as records"
    assert summary["not_started"] == {"reason": "not started: stopped by the user", "task_ids": ["b", "c"]}
    jsonschema.Draft202012Validator(SCHEMA).validate(summary)
    assert not list(tmp_path.glob(".summary.json.*")), "no temporary file left behind"


def test_a_stopped_fleet_of_50000_lists_its_never_started_tasks_compactly(tmp_path: Path) -> None:
    """Issue 29: one Ctrl-C at 50,000 tasks wrote ~750 bytes per never-started task (37.6 MB)."""
    ids = tuple(f"task-{n:05d}" for n in range(50_000))
    ledger = _ledger(tmp_path, ids)
    for task_id in ids[:3]:
        ledger.start(task_id, branch=None, worktree=None, transcript="t")
        ledger.finish(task_id, result=_result(task_id, "succeeded"), attempts=1, worktree_kept=None)
    ledger.start(ids[3], branch=None, worktree=None, transcript="t")  # cut off running
    path, written = write_records(
        ledger, started_at=None, duration=9.0, stopped="stopped by the user", fatal=False
    )
    summary = json.loads(path.read_text())
    assert [t["task_id"] for t in summary["tasks"]] == list(ids[:4])
    assert summary["not_started"]["task_ids"] == list(ids[4:])
    assert summary["counts"] == {"succeeded": 3, "cancelled": 49_997}
    assert summary["states"] == {"finished": 3, "running": 1, "queued": 49_996}
    assert path.stat().st_size < 40 * len(ids), "a never-started task costs its id and little more"
    entries = entries_from_summary(written)
    assert [e.result.task_id for e in entries] == list(ids)
    assert entries[-1].state == "queued" and entries[-1].result.reason == "not started: stopped by the user"
    assert "task-49999" not in (tmp_path / "report.html").read_text(), "the page only counts them"


def test_a_forced_stop_writes_the_summary_from_another_thread_while_tasks_finish(tmp_path: Path) -> None:
    ids = tuple(f"t{n}" for n in range(300))
    ledger = _ledger(tmp_path, ids)
    ledger.note_pid(4242)
    errors: list[BaseException] = []
    done = threading.Event()

    def force() -> None:
        try:
            while not done.is_set():
                assert record_forced_stop(tmp_path, "stopped by force") == [4242]
        except BaseException as exc:  # pragma: no cover - the failure is reported below
            errors.append(exc)

    thread = threading.Thread(target=force)
    thread.start()
    for task_id in ids:
        ledger.start(task_id, branch=None, worktree=None, transcript="t")
        ledger.finish(task_id, result=_result(task_id, "succeeded"), attempts=1, worktree_kept=None)
    done.set()
    thread.join()
    assert not errors
    assert record_forced_stop(tmp_path, "stopped by force") == [4242]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["counts"] == {"succeeded": 300} and summary["forced"] is True


def test_pids_are_those_this_process_noted(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    ledger.note_pid(11)
    assert ledger.pids() == [11]
    assert ledger.pids(owner=1) == []  # another process's (e.g. a run that died before a resume)


_HOLD = """
import os, sys, time
from pathlib import Path
from agent_fleet.runner.ledger import Ledger
ledger = Ledger.open(Path(sys.argv[1]))
print("held", flush=True)
sys.stdin.readline()  # hold the lock until told, then die without closing anything
os.kill(os.getpid(), 9)
"""


def test_one_batch_at_a_time_and_a_dead_holder_does_not_block(tmp_path: Path) -> None:
    _ledger(tmp_path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(UsageError, match=rf"is in use by another batch \(pid {holder.pid}\)"):
            Ledger.open(tmp_path)
        # A reader beside the batch (the forced-exit path) does not need the lock.
        reader = Ledger.open(tmp_path, lock=False)
        assert reader.counts() == {"queued": 3}
        reader.close()
    finally:
        assert holder.stdin is not None
        holder.stdin.write("die\n")
        holder.stdin.close()
        holder.wait(timeout=30)
    assert holder.returncode == -9, "killed, never closed: the kernel released its lock"
    ledger = Ledger.open(tmp_path)
    ledger.close()


def test_the_lock_is_held_from_create_or_open_to_close(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    with pytest.raises(UsageError, match=rf"in use by another batch \(pid {os.getpid()}\)"):
        Ledger.open(tmp_path)  # (flock locks an open file: a second open in one process is refused too)
    ledger.close()
    ledger.close()  # idempotent
    again = Ledger.open(tmp_path)
    with pytest.raises(UsageError, match="in use by another batch"):
        Ledger.open(tmp_path)
    again.close()
    Ledger.open(tmp_path).close()


def test_a_discarded_ledger_leaves_nothing(tmp_path: Path) -> None:
    _ledger(tmp_path, ()).discard()
    assert list(tmp_path.iterdir()) == []


def test_attempts_are_counted_as_they_start_and_history_is_unchanged(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path, ("a",))
    ledger.start("a", branch=None, worktree=None, transcript="a.jsonl")
    ledger.attempt("a")
    ledger.attempt("a")  # a retry
    assert ledger.get("a").attempts == 2  # true before the run ends
    ledger.finish("a", result=_result("a", "succeeded"), attempts=0, worktree_kept=None)
    assert (ledger.get("a").runs, ledger.get("a").attempts) == (1, 2)
    assert [state for state, _ in ledger.history("a")] == ["running", "finished"]
    ledger.close()


def test_the_base_commit_is_kept_from_the_first_start_and_forgotten_by_a_fresh_rerun(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    ledger.start("a", branch=None, worktree=None, transcript="t")
    ledger.session("a", "thread-1", base_head="base1")
    ledger.finish("a", result=_result("a", "cancelled"), attempts=1, worktree_kept=None)
    ledger.start("a", branch=None, worktree=None, transcript="t")  # resumed: HEAD has moved since
    ledger.session("a", "thread-1", base_head="after-its-commit")
    assert ledger.get("a").base_head == "base1"
    ledger.finish("a", result=_result("a", "failed"), attempts=1, worktree_kept=None)
    ledger.prepare_resume(rerun_failed=True)  # afresh: measured from where the new run starts
    assert ledger.get("a").base_head is None
    ledger.session("a", "thread-2", base_head="base2")
    assert ledger.get("a").base_head == "base2"


def test_a_ledger_from_before_the_base_commit_opens_and_gains_it(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path)
    ledger.close()
    db = sqlite3.connect(tmp_path / LEDGER_FILE)
    db.execute("ALTER TABLE tasks DROP COLUMN base_head")
    db.commit()
    db.close()
    reader = Ledger.open(tmp_path, lock=False)  # a reader beside an older writer: read as it is
    assert [r.base_head for r in reader.rows()] == [None, None, None]
    reader.close()
    writer = Ledger.open(tmp_path)
    writer.start("a", branch=None, worktree=None, transcript="t")
    writer.session("a", "thread-1", base_head="base1")
    assert writer.get("a").base_head == "base1"


def test_a_forced_record_says_which_worktrees_are_on_disk_as_it_leaves(tmp_path: Path) -> None:
    """Left by force, the process cannot trust the ledger about worktrees mid-change: one recorded
    removed may still be there (its removal cut off), one recorded for a running task may not be yet.
    The forced record says what is on disk when it is written."""
    out, box = tmp_path / "out", tmp_path / "box"
    ledger = _ledger(out)
    ledger.set_meta("box", str(box))
    still_there, never_made, kept = box / "wt-a", box / "wt-b", box / "wt-c"
    still_there.mkdir(parents=True)
    kept.mkdir()
    elsewhere = tmp_path / "on-a-ray-node"  # not in this machine's box: reported as recorded
    ledger.start("a", branch="agent-fleet/a", worktree=str(still_there), transcript="t")
    removed = task_record(
        TaskResult(task_id="a", status="succeeded", reason="ok"), prompt="do a", worktree=str(still_there)
    )
    ledger.finish("a", result=removed, attempts=1, worktree_kept=None)  # recorded removed, still there
    ledger.start("b", branch="agent-fleet/b", worktree=str(never_made), transcript="t")  # running
    ledger.start("c", branch="agent-fleet/c", worktree=str(kept), transcript="t")  # running, on disk
    ledger = _ledger(out / "ray", ("r",))
    ledger.start("r", branch="agent-fleet/r", worktree=str(elsewhere), transcript="t")
    record_forced_stop(out, "stopped by force")
    record_forced_stop(out / "ray", "stopped by force")
    tasks = {t["task_id"]: t for t in json.loads((out / "summary.json").read_text())["tasks"]}
    assert tasks["a"]["worktree"] == {"path": str(still_there), "kept": True}
    assert tasks["b"]["worktree"] == {"path": str(never_made), "kept": False}
    assert tasks["c"]["worktree"] == {"path": str(kept), "kept": True}
    (ray,) = json.loads((out / "ray" / "summary.json").read_text())["tasks"]
    assert ray["worktree"] == {"path": str(elsewhere), "kept": True}  # as recorded: it may be on the node


def test_a_reader_beside_a_starting_batch_sees_no_ledger_or_a_whole_one(tmp_path: Path) -> None:
    """The ledger appears whole: a reader opening it while a batch is creating it (a ``report`` run, a
    dashboard) finds no batch yet or every task, never a file without its tables."""
    out = tmp_path / "out"
    out.mkdir()
    entries = [(f"t{n}", n + 1, {"id": f"t{n}", "prompt": "p"}) for n in range(30_000)]
    created = threading.Event()
    seen: list[str] = []
    failed: list[BaseException] = []

    def create() -> None:
        try:
            Ledger.create(out, entries).close()
        except BaseException as exc:
            failed.append(exc)
        finally:
            created.set()

    writer = threading.Thread(target=create)
    writer.start()
    while not created.is_set():
        try:
            reader = Ledger.open(out, lock=False)
        except UsageError as exc:
            assert "holds no batch" in str(exc), exc
            seen.append("none")
            time.sleep(0.0005)  # a poller, not a spin: the writer needs the GIL row by row
            continue
        try:
            seen.append(f"{sum(reader.counts().values())} tasks")
        finally:
            reader.close()
    writer.join()
    assert failed == []  # the readers never held the batch up
    assert "none" in seen  # the reader did look while the batch was being created
    assert set(seen) <= {"none", "30000 tasks"}, sorted(set(seen))
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # nothing left of the building
