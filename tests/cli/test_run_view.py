"""What ``run`` and ``batch`` show of the agent (issue 33): messages in full, the message being streamed,
verbosity, queued tasks and failed gates in the fleet view, the final table's totals and the report link."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console
from rich.text import Text

from agent_fleet.cli._describe import BRIEF, MESSAGES, VERBOSE, describe
from agent_fleet.cli._final import link, summary_table
from agent_fleet.cli._run_view import Question
from agent_fleet.cli._view import Progress
from agent_fleet.events import AssistantMessage, Reasoning, TextDelta, ToolResult, ToolUse
from agent_fleet.runner import TaskEvent, TaskResult
from agent_fleet.runner._types import notice
from agent_fleet.runner.batch import BatchEntry, BatchResult
from agent_fleet.runner.gate import GateCheck, GateResult

MESSAGE = "Fixed the test.\nThe cause was an off-by-one in the loop.\nAll 12 tests pass."


def _agent(event: object, task_id: str = "t") -> TaskEvent:
    return TaskEvent(task_id=task_id, source="agent", event=event)  # type: ignore[arg-type]


def _plain(console: Console) -> str:
    return Text.from_ansi(console.file.getvalue()).plain  # type: ignore[attr-defined]


def test_describe_gives_the_agents_words_in_full_when_asked() -> None:
    message = _agent(AssistantMessage(text=MESSAGE))
    assert describe(message, BRIEF) == "agent: Fixed the test."
    assert describe(message, MESSAGES) == f"agent: {MESSAGE}"
    thinking = _agent(Reasoning(text="**Plan**\nread the test, then the loop"))
    assert describe(thinking, MESSAGES) == "thinking: **Plan**\nread the test, then the loop"
    done = _agent(ToolResult(id="1", output="a\nb\nc\nd\n", exit_code=0))
    assert describe(done, MESSAGES) is None  # a command that went well: no line but at -v
    assert describe(done, VERBOSE) == "  (exit 0)\n  | b\n  | c\n  | d"
    failed = _agent(ToolResult(id="1", output="boom", exit_code=2))
    assert describe(failed, BRIEF) == "  (exit 2)"
    assert describe(failed, VERBOSE) == "  (exit 2)\n  | boom"


def test_run_prints_each_message_whole_and_its_lines_under_it() -> None:
    console = Console(file=io.StringIO(), width=100)
    progress = Progress(console, json_output=False, batch=False)
    with progress:
        progress.on_event(_agent(AssistantMessage(text=MESSAGE)))
    out = _plain(console).splitlines()
    assert out == [
        "agent: Fixed the test.",
        "  The cause was an off-by-one in the loop.",
        "  All 12 tests pass.",
    ]


def test_a_batch_prints_first_lines_tagged_and_quiet_prints_nothing() -> None:
    console = Console(file=io.StringIO(), width=100)
    progress = Progress(console, json_output=False, batch=True)
    progress.on_event(_agent(AssistantMessage(text=MESSAGE), "a"))
    assert _plain(console) == "[a] agent: Fixed the test.\n"
    quiet = Console(file=io.StringIO(), width=100, force_terminal=True)
    progress = Progress(quiet, json_output=False, batch=False, verbosity=-1)
    with progress:
        progress.on_event(_agent(AssistantMessage(text=MESSAGE)))
        progress.on_event(_agent(ToolUse(id="1", name="shell", input={"command": "make"})))
    assert progress.live_mode is False and _plain(quiet) == ""


def test_the_live_view_shows_the_message_as_it_streams_redacted() -> None:
    console = Console(file=io.StringIO(), width=100, height=30, force_terminal=True)
    progress = Progress(console, json_output=False, batch=False)
    key = "sk-proj-" + "A" * 40
    for part in ("Looking at the loop.\nThe key is sk-proj-", "A" * 40, " and the fix is near"):
        progress.on_event(_agent(TextDelta(text=part)))
    view = Console(file=io.StringIO(), width=100, height=30)
    view.print(progress.render())
    shown = _plain(view)
    assert "agent" in shown and "The key is" in shown and "the fix is near" in shown
    assert key not in shown and "sk-proj-AAAA" not in shown, "a secret split across deltas is redacted"
    progress.on_event(_agent(AssistantMessage(text="done")))
    view = Console(file=io.StringIO(), width=100, height=30)
    view.print(progress.render())
    assert "Looking at the loop" not in _plain(view), "the finished message left the live part"


def test_the_question_is_drawn_above_the_run_view() -> None:
    progress = Progress(Console(file=io.StringIO()), json_output=False, batch=False)
    progress.on_event(_agent(ToolUse(id="1", name="shell", input={"command": "rm -rf build"})))
    progress.question = Question(kind="command", what="rm -rf build", cwd="/repo", why="no rule")
    view = Console(file=io.StringIO(), width=80, height=30)
    view.print(progress.render())
    shown = _plain(view)
    assert shown.index("approve?") < shown.index("step")
    assert "$ rm -rf build" in shown and "in /repo" in shown
    assert "[y] allow once" in shown and "[s] allow for this session" in shown and "[n] decline" in shown


def test_the_fleet_view_shows_queued_tasks_and_failed_gates_last_lines() -> None:
    console = Console(file=io.StringIO(), width=120, height=40, force_terminal=True)
    progress = Progress(console, json_output=False, batch=True)
    progress.expect(10, queued=[f"t{n}" for n in range(10)])
    progress.on_event(notice("t0", "started", prompt="p"))
    progress.on_event(notice("t1", "started", prompt="p"))
    progress.on_event(notice("t1", "gate", passed=False, summary="tests", output_tail="x\nE assert 1 == 2\n"))
    progress.on_event(notice("t1", "finished", status="failed", reason="the gate never passed"))
    view = Console(file=io.StringIO(), width=120, height=40)
    view.print(progress.render())
    lines = _plain(view).splitlines()
    rows = [line.split()[:2] for line in lines if re.match(r"t\d ", line)]
    assert rows[:2] == [["t0", "running"], ["t1", "failed"]]
    assert rows[2:7] == [[f"t{n}", "queued"] for n in range(2, 7)], "the next five to start"
    assert "failed gates (last line of their output):" in lines
    assert "[t1] E assert 1 == 2" in lines


def _gate_failed(task_id: str) -> BatchEntry:
    gate = GateResult(
        checks=(
            GateCheck(
                name="command",
                passed=False,
                detail="pytest exited with code 1",
                output="collected 12 items\n\nFAILED test_loop.py::test_edge\n1 failed, 11 passed",
                exit_code=1,
            ),
        )
    )
    result = TaskResult(task_id=task_id, status="failed", reason="the gate never passed", gate=gate)
    return BatchEntry(result=result)


def test_the_final_table_has_totals_and_the_failed_gates_last_lines() -> None:
    entries = (
        BatchEntry(result=TaskResult(task_id="ok", status="succeeded", reason="gate passed", followups=1)),
        _gate_failed("bad"),
        BatchEntry(
            result=TaskResult(task_id="later", status="cancelled", reason="not started"), state="queued"
        ),
    )
    console = Console(file=io.StringIO(), width=120)
    console.print(summary_table(BatchResult(entries=entries, duration=75.25), console.width))
    out = _plain(console)
    total = next(line for line in out.splitlines() if line.startswith("total 3"))
    assert "1/3 ok" in total and "75.2s" in total
    assert "1 succeeded, 1 failed, 1 not started" in total
    tail = out[out.index("failed gates") :].splitlines()
    assert tail[1:] == [
        "  bad:",
        "    collected 12 items",
        "    FAILED test_loop.py::test_edge",
        "    1 failed, 11 passed",
    ]


def test_the_report_path_is_a_link_on_a_terminal_and_plain_text_elsewhere(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    terminal = Console(file=io.StringIO(), force_terminal=True, soft_wrap=True)
    terminal.print(link("report: ", page))
    raw = terminal.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b]8;id=" in raw and f";{page.resolve().as_uri()}\x1b\\" in raw  # OSC 8
    assert Text.from_ansi(raw).plain == f"report: {page}\n"
    plain = Console(file=io.StringIO(), soft_wrap=True)
    plain.print(link("report: ", page))
    assert plain.file.getvalue() == f"report: {page}\n"  # type: ignore[attr-defined]
