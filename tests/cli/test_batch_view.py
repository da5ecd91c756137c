"""The batch live view at scale: a header of counts, running and failed tasks pinned, fits any height."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from agent_fleet.cli._view import Progress, summary_table
from agent_fleet.events import TokenUsage
from agent_fleet.runner import TaskEvent, TaskResult
from agent_fleet.runner._types import notice
from agent_fleet.runner.batch import BatchEntry, BatchResult


def _fleet(
    height: int,
    *,
    running: int = 20,
    failed: int = 30,
    succeeded: int = 250,
    total: int = 1000,
    width: int = 120,
    tokens: int = 10,
) -> str:
    console = Console(file=io.StringIO(), width=width, height=height, force_terminal=True)
    progress = Progress(console, json_output=False, batch=True)
    progress.expect(total, {"succeeded": 7})  # seven succeeded in an earlier run (a resume)
    n = 0
    for count, status in ((succeeded, "succeeded"), (failed, "failed"), (running, None)):
        for _ in range(count):
            task_id = f"{status or 'running'}-{n:04d}"
            n += 1
            progress.on_event(notice(task_id, "started", prompt="p"))
            progress.on_event(
                TaskEvent(task_id=task_id, source="agent", event=TokenUsage(total_tokens=tokens))
            )
            if status is not None:
                progress.on_event(notice(task_id, "finished", status=status, reason=f"{status} because"))
    console.print(progress.render())
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return Text.from_ansi(str(out)).plain


def test_the_header_counts_the_whole_fleet() -> None:
    header = _fleet(40).splitlines()[0]
    assert "running 20" in header and "queued 693" in header  # 1000 - 7 earlier - 300 started
    assert "succeeded 257" in header and "failed 30" in header
    assert "tokens 3,000" in header and "elapsed" in header


def test_running_then_failed_are_pinned_and_the_view_fits_a_short_terminal() -> None:
    for height in (5, 12, 30):
        lines = _fleet(height).rstrip("\n").splitlines()
        assert len(lines) <= height, f"{len(lines)} lines in a terminal of {height}"
    short = _fleet(12)
    assert "running-" in short and "succeeded-" not in short
    assert "more running" in short and "30 more failed" in short
    tall = _fleet(60)
    rows = [line.split()[0] for line in tall.splitlines()[2:] if line.strip() and not line.startswith("…")]
    assert rows[:20] == [f"running-{n:04d}" for n in range(280, 300)]  # the running tasks, in start order
    assert rows[20:50] == [f"failed-{n:04d}" for n in range(279, 249, -1)]  # then failures, newest first
    assert "more running" not in tall and "more failed" not in tall
    assert all(r.startswith("succeeded-") for r in rows[50:])


def _entry(task_id: str, status: str, reason: str, state: str = "finished") -> BatchEntry:
    return BatchEntry(result=TaskResult(task_id=task_id, status=status, reason=reason), state=state)  # type: ignore[arg-type]


def test_the_final_table_wraps_reasons_instead_of_cutting_them() -> None:
    reason = "the gate never passed: " + " ".join(f"word{n}" for n in range(60))
    result = BatchResult(entries=(_entry("a", "failed", reason),), duration=1.0)
    console = Console(file=io.StringIO(), width=80)
    console.print(summary_table(result, console.width))
    text = " ".join(console.file.getvalue().split())  # type: ignore[attr-defined]
    assert "word0" in text and "word59" in text


@pytest.mark.parametrize("width", [40, 60, 80, 120, 200])
def test_the_final_table_fits_the_terminal_and_keeps_every_reason_whole(width: int) -> None:
    entries = tuple(
        BatchEntry(
            result=TaskResult(
                task_id=f"task-with-a-rather-long-name-{n}",
                status="failed" if n % 2 else "succeeded",  # type: ignore[arg-type]
                reason=f"reason {n}: " + " ".join(f"w{n}x{k}" for k in range(25)),
                followups=n,
                duration=12.5,
            ),
            branch=f"agent-fleet/task-with-a-rather-long-name-{n}",
            state="finished",
        )
        for n in range(4)
    )
    console = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    console.print(summary_table(BatchResult(entries=entries, duration=1.0), console.width))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert max(cell_len(line) for line in out.splitlines()) <= width
    words = out.split()
    for n in range(4):
        assert f"w{n}x0" in words and f"w{n}x24" in words  # the reason wraps at spaces, nothing is cut
    # the least needed columns go first on a narrow terminal; a wide one has them all
    header = out.splitlines()[1]
    if width >= 200:
        assert "branch" in header and "tokens" in header
    if width <= 40:
        assert "branch" not in header and "tokens" not in header


def test_the_final_table_of_a_big_fleet_lists_what_did_not_succeed() -> None:
    entries = [_entry(f"ok{n}", "succeeded", "fine") for n in range(900)]
    entries += [_entry(f"bad{n}", "failed", "broken") for n in range(3)]
    entries += [_entry(f"later{n}", "cancelled", "not started", state="queued") for n in range(97)]
    console = Console(file=io.StringIO(), width=120)
    console.print(summary_table(BatchResult(entries=tuple(entries), duration=1.0, summary_path=Path("s"))))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "bad0" in text and "bad2" in text and "ok1 " not in text and "later" not in text
    assert "1,000 tasks: 900 succeeded, 97 not started" in text


def test_a_long_fleet_keeps_only_recent_finished_rows_but_counts_every_task() -> None:
    console = Console(file=io.StringIO(), width=120, height=40, force_terminal=True)
    progress = Progress(console, json_output=False, batch=True)
    progress.expect(5000)
    for n in range(3000):
        task_id = f"t{n}"
        progress.on_event(notice(task_id, "started", prompt="p"))
        progress.on_event(TaskEvent(task_id=task_id, source="agent", event=TokenUsage(total_tokens=2)))
        status = "failed" if n % 1000 == 0 else "succeeded"
        progress.on_event(notice(task_id, "finished", status=status, reason="r"))
    assert len(progress.rows) <= 203  # the latest 200 finished, and the three failures (pinned)
    assert {"t0", "t1000", "t2000", "t2999"} <= set(progress.rows)
    header = progress.header().plain
    assert "succeeded 2,997" in header and "failed 3" in header and "queued 2,000" in header
    assert "tokens 6,000" in header


@pytest.mark.parametrize("width", [30, 40, 60, 75, 100, 160])
@pytest.mark.parametrize("height", [2, 4, 8, 12, 40])
def test_the_view_fits_any_width_and_height(width: int, height: int) -> None:
    # Under ~75 columns the header used to wrap into a line the layout did not count (13 lines in 12),
    # the step column shrank to "…" and token counts were cut.
    lines = _fleet(height, width=width, tokens=1_234_567).rstrip("\n").splitlines()
    assert len(lines) <= height, f"{len(lines)} lines in {width}x{height}"
    assert all(cell_len(line) <= width for line in lines), max(lines, key=cell_len)
    text = " ".join(lines)
    if height >= 4 and width >= 40:  # the header, wrapped as needed, is there in full
        for part in (
            "running 20",
            "queued 693",
            "succeeded 257",
            "failed 30",
            "tokens 370,370,100",
            "elapsed",
        ):
            assert part in text, (part, lines)
    assert not re.search(r"\d…", text), "a number was cut"
    if height >= 8 and width >= 40:
        rows = [line for line in lines if line.startswith(("running-", "failed-"))]
        assert rows, lines
        assert all("running" in row or "failed" in row for row in rows)  # the status is never cut
        if width >= 60:
            assert all("1,234,567" in row for row in rows), "tokens shown whole (or not at all)"
            assert all(" starting " in row or "failed beca" in row for row in rows), "the step keeps room"


def test_failed_rows_are_bounded_and_the_newest_are_pinned() -> None:
    console = Console(file=io.StringIO(), width=120, height=30, force_terminal=True)
    progress = Progress(console, json_output=False, batch=True)
    progress.expect(3000)
    for n in range(2000):
        task_id = f"f{n:04d}"
        progress.on_event(notice(task_id, "started", prompt="p"))
        progress.on_event(TaskEvent(task_id=task_id, source="agent", event=TokenUsage(total_tokens=1)))
        progress.on_event(notice(task_id, "finished", status="failed", reason="broken"))
    assert len(progress.rows) <= 100, "older failures folded into counts (summary.json has them all)"
    header = progress.header().plain
    assert "failed 2,000" in header and "tokens 2,000" in header and "queued 1,000" in header
    console.print(progress.render())
    lines = Text.from_ansi(console.file.getvalue()).plain.splitlines()  # type: ignore[attr-defined]
    rows = [line.split()[0] for line in lines if line.startswith("f")]
    assert rows[:3] == ["f1999", "f1998", "f1997"], "newest failure first"
    assert any("more failed" in line and f"{2000 - len(rows):,} more failed" in line for line in lines)
