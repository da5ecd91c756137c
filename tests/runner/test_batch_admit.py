"""``run_batch`` before any work: tasks are checked as they are read; a refusal leaves nothing behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import Spec
from agent_fleet.errors import UsageError
from agent_fleet.runner import Task
from agent_fleet.runner._admit import Locator, admit
from agent_fleet.runner.batch import BatchTask, run_batch
from agent_fleet.runner.ledger import Ledger

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


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"prompt": "fix \udcff"}, "'prompt' is not valid text"),
        ({"timeout": -1.0}, "'timeout' must be a finite number of seconds > 0"),
        ({"sandbox": "yolo"}, "'sandbox' must be one of"),
        ({"max_followups": -2}, "'max_followups' must be >= 0"),
    ],
)
async def test_a_task_built_in_code_is_checked_up_front_like_a_line(
    tmp_path: Path, bad: dict[str, Any], message: str
) -> None:
    # The run reads each task back from the ledger: what would not read back is refused before any work.
    tasks = [BatchTask(id="ok", prompt="p", line=1), BatchTask(id="bad", line=2, **{"prompt": "p", **bad})]
    with pytest.raises(UsageError, match=r"task 'bad' \(line 2\): ") as info:
        await run_batch(tasks, template=TEMPLATE, out_dir=tmp_path / "out", cwd=tmp_path)
    assert message in str(info.value)
    assert not (tmp_path / "out").exists()


def _recorded(out: Path, entries: list[tuple[str, dict[str, object]]], finished: dict[str, str]) -> Ledger:
    out.mkdir()
    ledger = Ledger.create(out, [(task_id, n + 1, obj) for n, (task_id, obj) in enumerate(entries)])
    for task_id, status in finished.items():
        ledger.start(task_id, branch=None, worktree=None, transcript=str(out / f"{task_id}.jsonl"))
        ledger.finish(task_id, result={"status": status, "reason": "r"}, attempts=1, worktree_kept=None)
    return ledger


async def test_a_resume_checks_only_the_tasks_that_will_run(tmp_path: Path) -> None:
    (tmp_path / "here").mkdir()
    gone = str(tmp_path / "gone")  # the directories of tasks that finished were removed since
    ledger = _recorded(
        tmp_path / "out",
        [
            ("done", {"id": "done", "prompt": "p", "cwd": gone}),
            ("broke", {"id": "broke", "prompt": "p", "cwd": gone, "provider": "claude"}),
            ("next", {"id": "next", "prompt": "p", "cwd": str(tmp_path / "here"), "provider": "codex-exec"}),
        ],
        {"done": "succeeded", "broke": "failed"},
    )
    locator = Locator(tmp_path, worktrees=False, template_needs_commit=False)
    out = tmp_path / "out"
    names = await admit(None, ledger, locator, out, default_provider="codex", template_review=False)
    assert names == {"codex-exec"}, "only the task that will run was checked (and its provider started)"
    with pytest.raises(UsageError, match=r"task 'broke' \(line 2\): directory .*gone.* does not exist"):
        await admit(
            None, ledger, locator, out, default_provider="codex", template_review=False, rerun_failed=True
        )
    ledger.close()


async def test_a_resume_leaves_an_entry_that_no_longer_reads_as_a_task_to_the_run(tmp_path: Path) -> None:
    # e.g. written by another version: it must not block the resume of every other task
    ledger = _recorded(
        tmp_path / "out",
        [("bad", {"id": "bad", "prompt": "p", "timeout": -1}), ("good", {"id": "good", "prompt": "p"})],
        {},
    )
    locator = Locator(tmp_path, worktrees=False, template_needs_commit=False)
    names = await admit(
        None, ledger, locator, tmp_path / "out", default_provider="codex", template_review=False
    )
    assert names == {None}
    ledger.close()
