"""``run_batch`` before any work: tasks are checked as they are read; a refusal leaves nothing behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.errors import UsageError
from agent_fleet.runner import Task
from agent_fleet.runner.batch import BatchTask, run_batch

TEMPLATE = Task(spec=Spec(prompt="-"))


def _tasks(tmp_path: Path, bad_at: int, total: int = 3000) -> Iterator[BatchTask]:
    for n in range(total):
        cwd = tmp_path / ("missing" if n == bad_at else "work")
        yield BatchTask(id=f"t{n}", prompt="p", cwd=cwd, line=n + 1)


async def test_a_bad_task_deep_in_a_stream_leaves_no_ledger_and_no_out(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    out = tmp_path / "out"
    consumed: list[int] = []

    def counted() -> Iterator[BatchTask]:
        for t in _tasks(tmp_path, bad_at=1100):
            consumed.append(t.line)
            yield t

    with pytest.raises(UsageError, match=r"task 't1100' \(line 1101\): directory .*missing.* does not exist"):
        await run_batch(counted(), template=TEMPLATE, out_dir=out, cwd=tmp_path)
    assert not out.exists(), "nothing ran: nothing is left behind"
    assert max(consumed) <= 1500, "read in chunks, not all at once before checking"


async def test_a_duplicate_id_from_code_is_refused(tmp_path: Path) -> None:
    tasks = [BatchTask(id="same", prompt="p"), BatchTask(id="same", prompt="q")]
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(UsageError, match="a task id is used twice"):
        await run_batch(tasks, template=TEMPLATE, out_dir=out, cwd=tmp_path)
    assert list(out.iterdir()) == [], "an --out that existed stays, empty"


async def test_resume_takes_the_ledger_s_tasks_and_needs_a_ledger(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="tasks=None with resume=True"):
        await run_batch([BatchTask(id="a", prompt="p")], template=TEMPLATE, out_dir=tmp_path, resume=True)
    with pytest.raises(UsageError, match="holds no batch to resume"):
        await run_batch(None, template=TEMPLATE, out_dir=tmp_path, resume=True)
    with pytest.raises(UsageError, match="rerun_failed needs resume"):
        await run_batch([], template=TEMPLATE, out_dir=tmp_path, rerun_failed=True)


async def test_a_review_the_task_s_provider_cannot_do_names_the_line(tmp_path: Path) -> None:
    tasks = [
        BatchTask(id="fine", prompt="p", line=1),
        BatchTask(id="no-reviewer", prompt="p", provider="claude", review=True, line=2),
    ]
    with pytest.raises(
        UsageError, match=r"task 'no-reviewer' \(line 2\): review needs a provider that can review"
    ):
        await run_batch(tasks, template=TEMPLATE, out_dir=tmp_path / "out", cwd=tmp_path)
    assert not (tmp_path / "out").exists()
