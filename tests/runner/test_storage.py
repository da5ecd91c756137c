"""The batch's record on a full disk (issue 29 item 7), file by file: a transcript, the ledger and the
summary each raise ``StorageError`` naming the file, keep what they had whole, and leave no temporary
file. (``test_full_disk_e2e.py`` runs a whole batch on a small disk.)"""

from __future__ import annotations

import errno
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_fleet.errors import StorageError
from agent_fleet.events import AssistantMessage
from agent_fleet.runner import TaskEvent
from agent_fleet.runner._ledger_views import dump_summary
from agent_fleet.runner._sqlite import transaction, writes
from agent_fleet.runner.transcript import TranscriptWriter


def _event(text: str) -> TaskEvent:
    return TaskEvent(task_id="a", source="agent", event=AssistantMessage(text=text))


def test_a_transcript_on_a_full_device_raises_once_naming_it_then_writes_nothing() -> None:
    writer = TranscriptWriter("/dev/full")  # every write: ENOSPC
    with pytest.raises(StorageError) as info:
        writer.write(_event("hello"))
    error = info.value
    assert error.path == "/dev/full" and error.what == "the transcript" and error.errno == errno.ENOSPC
    assert str(error) == "cannot write the transcript (/dev/full): No space left on device"
    assert writer.failed is error and error.retryable and error.code == "storage_error"
    writer.write(_event("more"))  # inert from now on: no second error
    writer.close()


@dataclass
class _Store:
    path: Path
    db: sqlite3.Connection

    @writes
    def add(self, size: int) -> None:
        with transaction(self.db):
            self.db.execute("INSERT INTO t (v) VALUES (?)", ("x" * size,))
            self.db.execute("INSERT INTO t (v) VALUES ('second')")


def test_a_full_ledger_raises_storage_error_and_keeps_every_transition_whole(tmp_path: Path) -> None:
    path = tmp_path / "batch.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE t (v TEXT)")
    db.execute("PRAGMA max_page_count = 8")  # a disk with room for a few pages: SQLITE_FULL after
    store = _Store(path, db)
    store.add(10)
    with pytest.raises(StorageError) as info:
        store.add(100_000)
    assert info.value.path == str(path) and info.value.what == "the ledger"
    assert info.value.errno == errno.ENOSPC and "full" in str(info.value)
    assert [v for (v,) in db.execute("SELECT v FROM t")] == ["x" * 10, "second"], "nothing half written"
    store.add(10)  # the connection is usable again: no transaction left open
    assert db.execute("SELECT COUNT(*) FROM t").fetchone() == (4,)


def test_a_summary_that_cannot_be_written_leaves_the_old_one_and_no_temporary_file(tmp_path: Path) -> None:
    dump_summary(tmp_path, {"stopped": None, "tasks": [{"task_id": "a"}]})
    (tmp_path / ".summary.json.tmp").mkdir()  # (never ours: a different name pattern)
    unencodable = {"stopped": None, "tasks": [{"task_id": "\ud800"}]}  # a write that fails midway
    with pytest.raises((StorageError, UnicodeEncodeError)):
        dump_summary(tmp_path, unencodable)
    assert json.loads((tmp_path / "summary.json").read_text())["tasks"] == [{"task_id": "a"}]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".summary.json.") and p.is_file()] == []
