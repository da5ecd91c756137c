"""A sub-agent's events in what people read (issue 32): the live view marks them, the record, the
summary (schema-valid) and the report page name the sub-agent that ran a command, and the transcript
record carries ``agent`` only when it is set."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from agent_fleet.cli import describe
from agent_fleet.events import AssistantMessage, System, ToolResult, ToolUse
from agent_fleet.runner import TaskEvent
from agent_fleet.runner._record import TaskRecorder
from agent_fleet.runner._summary import build_summary, task_record
from agent_fleet.runner.report import render_report
from agent_fleet.runner.transcript import event_record

from .test_summary import T0, _result

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "summary.schema.json").read_text())
AGENT = "01a21886-7425-7f80-a026-56aecb85026d"


def _event(event: object, at: float = T0) -> TaskEvent:
    return TaskEvent(task_id="t", source="agent", event=event, time=at)  # type: ignore[arg-type]


def test_the_live_view_marks_a_sub_agents_lines() -> None:
    shell = ToolUse(id="c1", name="shell", input={"command": "/bin/bash -lc 'make test'"}, agent=AGENT)
    assert describe(_event(shell)) == f"[sub-agent {AGENT[-8:]}] $ make test"
    said = AssistantMessage(text="checked it\nmore", agent=AGENT)
    assert describe(_event(said)) == f"[sub-agent {AGENT[-8:]}] agent: checked it"
    ended = System(subtype="subagent_turn", data={"status": "completed", "text": "all good"}, agent=AGENT)
    assert describe(_event(ended)) == f"[sub-agent {AGENT[-8:]}] finished (completed): all good"
    assert describe(_event(ToolUse(id="c2", name="shell", input={"command": "ls"}))) == "$ ls"


def test_record_summary_and_report_name_the_sub_agent_of_a_command() -> None:
    recorder = TaskRecorder(task_id="t")
    for event in (
        ToolUse(id="c1", name="shell", input={"command": "make test"}, agent=AGENT),
        ToolResult(id="c1", output="ok", exit_code=0, status="completed", agent=AGENT),
        ToolUse(id="c2", name="shell", input={"command": "ls"}),
        ToolResult(id="c2", output="", exit_code=0, status="completed"),
    ):
        recorder.observe(_event(event, T0 + 1))
    recorded = recorder.record()
    assert [c.get("agent") for c in recorded["commands"]] == [AGENT, None]
    summary = build_summary(
        [task_record(_result(), recorded=recorded)], started_at=T0, finished_at=T0 + 2, duration=2.0
    )
    jsonschema.Draft202012Validator(SCHEMA).validate(summary)
    commands = summary["tasks"][0]["commands"]
    assert commands[0]["agent"] == AGENT and "agent" not in commands[1]
    assert f"(sub-agent {AGENT[-8:]})" in render_report(summary)


def test_a_transcript_record_carries_agent_only_when_set() -> None:
    mine = event_record(_event(ToolUse(id="c", name="shell")))
    theirs = event_record(_event(ToolUse(id="c", name="shell", agent=AGENT)))
    assert "agent" not in mine and theirs["agent"] == AGENT
