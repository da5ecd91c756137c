"""``TaskCounters``: a task's counters from its events (what ``TaskResult`` and the live view share)."""

from __future__ import annotations

from agent_fleet.events import System, TokenUsage, ToolResult, ToolUse
from agent_fleet.runner import TaskCounters, TaskEvent
from agent_fleet.runner._types import Source, notice


def _ev(source: Source, event: object) -> TaskEvent:
    return TaskEvent(task_id="t", source=source, event=event)  # type: ignore[arg-type]


def test_counts_agent_commands_denials_followups_and_usage() -> None:
    c = TaskCounters()
    for e in [
        _ev("agent", ToolUse(id="1", name="shell", input={"command": "ls"})),
        _ev("agent", ToolUse(id="2", name="shell", synthetic=True)),  # not a command the agent ran
        _ev("review", ToolUse(id="3", name="shell")),  # the reviewer's, not the agent's
        _ev("agent", ToolUse(id="4", name="apply_patch")),
        _ev("agent", System(subtype="approval_denied", data={})),
        _ev("agent", TokenUsage(total_tokens=10)),
        _ev("agent", TokenUsage(total_tokens=25)),  # a session total: replaces, not adds
        notice("t", "followup", number=2, limit=3, prompt="again"),
    ]:
        c.feed(e)
    assert (c.commands, c.declined, c.followups, c.tokens) == (1, 1, 2, 25)


def test_review_usage_adds_up_over_reviews_and_counts_live() -> None:
    c = TaskCounters()
    c.feed(_ev("agent", TokenUsage(total_tokens=100)))
    c.feed(_ev("review", TokenUsage(total_tokens=5)))
    c.feed(_ev("review", TokenUsage(total_tokens=7)))
    assert c.tokens == 107 and c.usage is not None and c.usage.total_tokens == 100  # review 1 running
    c.feed(notice("t", "review", number=1))
    c.feed(_ev("review", TokenUsage(total_tokens=3)))  # review 2: a new session, its own total
    c.feed(notice("t", "review", number=2))
    assert c.tokens == 110 and c.usage is not None and c.usage.total_tokens == 110


def test_files_changed_are_the_agents_completed_file_edits() -> None:
    c = TaskCounters()
    patch = {"changes": [{"path": "/w/a.py", "kind": "add"}, {"path": "/w/b.py", "move_path": "/w/c.py"}]}
    for e in [
        _ev("agent", ToolUse(id="1", name="apply_patch", input=patch)),
        _ev("agent", ToolResult(id="1", status="completed")),
        _ev("agent", ToolUse(id="2", name="apply_patch", input={"changes": [{"path": "/w/no.py"}]})),
        _ev("agent", ToolResult(id="2", status="declined")),  # declined: nothing written
        _ev("agent", ToolUse(id="3", name="Write", input={"file_path": "/w/d.py"})),
        _ev("agent", ToolResult(id="3", is_error=True)),  # failed: nothing written
        _ev("review", ToolUse(id="4", name="Write", input={"file_path": "/w/r.py"})),
        _ev("review", ToolResult(id="4")),  # the reviewer's session: not the agent's
        _ev("agent", ToolUse(id="5", name="Edit", input={"file_path": "/w/a.py"})),
        _ev("agent", ToolResult(id="5", status="completed")),  # once
    ]:
        c.feed(e)
    assert list(c.files) == ["/w/a.py", "/w/b.py", "/w/c.py"]
