"""The live view: counters come from the runner (``TaskCounters``, then the ``TaskResult``)."""

from __future__ import annotations

import io

from rich.console import Console

from agent_fleet.cli._view import Progress
from agent_fleet.events import System, TokenUsage, ToolUse
from agent_fleet.runner import TaskEvent
from agent_fleet.runner._types import notice


def test_rows_count_while_running_then_show_the_task_result() -> None:
    console = Console(file=io.StringIO(), force_terminal=False)
    progress = Progress(console, json_output=False, batch=True)
    progress.on_event(TaskEvent(task_id="a", source="agent", event=ToolUse(id="1", name="shell", input={})))
    progress.on_event(TaskEvent(task_id="a", source="agent", event=TokenUsage(total_tokens=40)))
    progress.on_event(TaskEvent(task_id="a", source="review", event=TokenUsage(total_tokens=2)))
    row = progress.rows["a"]
    assert (row.command_count, row.tokens, row.followups) == (1, 42, 0)
    # The finished notice carries the TaskResult summary; from then on its numbers are shown.
    progress.on_event(
        notice("a", "finished", status="succeeded", reason="ok", tokens=50, commands=3, followups=1)
    )
    assert (row.status, row.command_count, row.tokens, row.followups) == ("succeeded", 3, 50, 1)


def test_the_header_says_when_the_policy_is_the_only_guard() -> None:
    from agent_fleet.cli import describe

    def started(**data: object) -> str | None:
        event = System(subtype="runner.started", data={"provider": "codex", **data})
        return describe(TaskEvent(task_id="t", source="runner", event=event))

    line = started(approvals_enforced=True, sandbox="danger-full-access")
    assert line is not None and "sandbox: OFF" in line and "the approval policy is the only guard" in line
    assert started(approvals_enforced=True, sandbox="workspace-write") is None
    both = started(approvals_enforced=False, sandbox="danger-full-access")
    assert both is not None and "NOT enforced" in both and "sandbox: OFF" in both
    # a provider whose OS sandbox cannot start here (Claude with sandbox_optional)
    none = started(approvals_enforced=True, sandbox="workspace-write", os_sandbox=None)
    assert none is not None and "no OS sandbox for the codex provider" in none and "only guard" in none
    assert started(approvals_enforced=True, sandbox="workspace-write", os_sandbox="bwrap") is None
    refused = System(subtype="codex_refused", data={"kind": "unsandboxed_run", "command": "./escape.sh"})
    assert describe(TaskEvent(task_id="t", source="agent", event=refused)) == (
        "refused to re-run outside the sandbox: ./escape.sh"
    )


def test_a_session_without_os_sandbox_gets_a_line() -> None:
    from agent_fleet.cli import describe

    event = System(subtype="no_os_sandbox", data={"provider": "claude", "reason": "no bwrap"})
    assert describe(TaskEvent(task_id="t", source="agent", event=event)) == (
        "no OS sandbox (no bwrap): the approval policy is the only guard"
    )


def test_retries_get_a_line() -> None:
    from agent_fleet.cli import describe

    retry = System(
        subtype="runner.retry",
        data={"attempt": 1, "max_attempts": 2, "delay": 4.8, "code": "server_error", "message": "boom\nmore"},
    )
    assert describe(TaskEvent(task_id="t", source="runner", event=retry)) == (
        "retry 1/2 in 4.8s after server_error: boom"
    )
    stream = System(
        subtype="stream_retry",
        data={
            "message": "Reconnecting... 3/5",
            "cause": "stream disconnected before completion: stream closed early",
            "kind": "responseStreamDisconnected",
            "attempt": 3,
            "max_attempts": 5,
        },
    )
    assert describe(TaskEvent(task_id="t", source="agent", event=stream)) == (
        "model stream dropped (stream disconnected before completion: stream closed early): "
        "codex retries it, attempt 3/5 (it gives up after 5)"
    )
    bare = System(subtype="stream_retry", data={"message": "Reconnecting"})
    assert describe(TaskEvent(task_id="t", source="agent", event=bare)) == (
        "model stream dropped (Reconnecting): codex retries it"
    )


def test_a_push_gets_a_line_whether_it_went_through_or_not() -> None:
    from agent_fleet.cli import describe

    pushed = System(
        subtype="runner.push", data={"branch": "agent-fleet/t", "commit": "0123456789abcdef", "pushed": True}
    )
    refused = System(
        subtype="runner.push",
        data={"branch": "agent-fleet/t", "pushed": False, "error": "! [rejected] (non-fast-forward)\nhint"},
    )
    assert describe(TaskEvent(task_id="t", source="runner", event=pushed)) == (
        "pushed agent-fleet/t (0123456789ab)"
    )
    assert describe(TaskEvent(task_id="t", source="runner", event=refused)) == (
        "push of agent-fleet/t refused: ! [rejected] (non-fast-forward)"
    )
