"""Hermetic units of the daemon: the event/spec JSON codec, ``default="ask"`` and the approval queue."""

from __future__ import annotations

import asyncio
import json
import typing
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet._event_json import event_from_record, event_to_record, spec_from_json, spec_to_json
from agent_fleet.contract import PermissionConfig
from agent_fleet.errors import UsageError
from agent_fleet.events import (
    AssistantMessage,
    Compaction,
    Diff,
    Error,
    Event,
    Goal,
    ImageView,
    McpServerStatus,
    Plan,
    PlanStep,
    RateLimits,
    Reasoning,
    ReasoningDelta,
    Result,
    ReviewMode,
    SubAgent,
    System,
    TextDelta,
    TokenUsage,
    ToolProgress,
    ToolResult,
    ToolUse,
    UnknownEvent,
    WebSearch,
)
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision, evaluate_command
from agent_fleet.runner import TaskEvent, event_record
from agent_fleet.serve._approvals import ApprovalQueue
from agent_fleet.serve._store import Store

EVENTS: list[Event] = [
    TextDelta(text="hi", item_id="m1"),
    AssistantMessage(text="hello", item_id="m1", phase="final"),
    Reasoning(text="thinking"),
    ToolUse(id="t1", name="shell", input={"command": "ls"}),
    ToolResult(id="t1", output="a\nb", exit_code=0, status="completed"),
    Plan(steps=(PlanStep(step="one", status="done"),), explanation="why"),
    TokenUsage(input_tokens=3, output_tokens=4, total_tokens=7),
    System(subtype="approval_denied", data={"rule": "x", "source": "inner"}),
    Diff(diff="--- a\n+++ b\n", turn_id="t"),
    UnknownEvent(raw={"method": "new/thing"}),
    Result(session_id="s", turn_id="t", text="done", usage=TokenUsage(total_tokens=9), structured={"a": 1}),
    Error(code="cancelled", message="stopped", retryable=False, data={"k": 1}),
    ReasoningDelta(text="hm", item_id="r1"),
    Compaction(item_id="c1", turn_id="t"),
    WebSearch(item_id="w1", query="q", action={"type": "search"}, results=({"url": "u"},)),
    ImageView(item_id="i1", path="/tmp/a.png"),
    SubAgent(
        item_id="s1", tool="spawn", status="ok", prompt="p", model="m", agents={"a": {"status": "done"}}
    ),
    ReviewMode(entered=True, review="HEAD", item_id="rv"),
    ToolProgress(id="t1", message="half way"),
    RateLimits(used_percent=42.5, resets_at=1700000000.0, reached=False, raw={"primary": {}}),
    Goal(objective="ship it", status="active", token_budget=1000, tokens_used=10, agent="sub-1"),
    McpServerStatus(name="docs", status="failed", error="no binary", session_id="s"),
    Result(
        session_id="s",
        usage=TokenUsage(input_tokens=5, turn=TokenUsage(input_tokens=2), context_window=1000),
        cost_usd=0.5,
        duration_ms=12,
        permission_denials=({"tool": "Bash"},),
    ),
]


def test_the_examples_cover_every_event_type() -> None:
    assert {type(e) for e in EVENTS} == set(typing.get_args(Event))


def test_an_error_with_a_newer_code_still_ends_the_turn() -> None:
    event = event_from_record({"type": "Error", "code": "galaxy_full", "message": "m", "retryable": True})
    assert event == Error(code="protocol_error", message="m", retryable=True, data={"code": "galaxy_full"})


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_every_event_survives_the_wire(event: Event) -> None:
    assert event_from_record(json.loads(json.dumps(event_to_record(event)))) == event
    # The daemon sends transcript records (with ts, task_id, source): they decode the same.
    record = event_record(TaskEvent(task_id="sid", source="agent", event=event))
    assert event_from_record(json.loads(json.dumps(record))) == event


def test_a_record_of_an_unknown_type_or_shape_is_an_unknown_event() -> None:
    assert event_from_record({"type": "Hologram", "x": 1}) == UnknownEvent(raw={"type": "Hologram", "x": 1})
    assert isinstance(event_from_record({"type": "Error", "code": "cancelled"}), UnknownEvent)  # no message
    assert event_from_record({"type": "TextDelta", "text": "x", "added_later": 1}) == TextDelta(text="x")


def test_specs_survive_the_wire(tmp_path: Path) -> None:
    spec = Spec(
        prompt="do it",
        cwd=tmp_path,
        model="m",
        sandbox="workspace-write",
        permission=PermissionConfig(allow_patterns=["^git"], default="ask"),
        config={"a.b": 1},
        images=[tmp_path / "i.png"],
        timeout=5.0,
    )
    back = spec_from_json(json.loads(json.dumps(spec_to_json(spec))))
    assert back == Spec(
        prompt="do it",
        cwd=str(tmp_path),
        model="m",
        sandbox="workspace-write",
        permission=PermissionConfig(allow_patterns=("^git",), default="ask"),
        config={"a.b": 1},
        images=(str(tmp_path / "i.png"),),
        timeout=5.0,
    )
    assert spec_to_json(Spec(prompt="p")) == {"prompt": "p"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "JSON object"),
        ({}, "prompt"),
        ({"prompt": " "}, "prompt"),
        ({"prompt": "p", "nope": 1}, "nope"),
        ({"prompt": "p", "sandbox": "wide-open"}, "sandbox"),
        ({"prompt": "p", "permission": {"default": "maybe"}}, "default"),
        ({"prompt": "p", "permission": {"bad": 1}}, "permission"),
    ],
)
def test_bad_specs_are_usage_errors(data: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        spec_from_json(data)


def test_ask_declines_with_its_own_rule_and_built_in_rules_still_decide_first() -> None:
    ask = PermissionConfig(default="ask")
    undecided = evaluate_command("touch x", config=ask)
    assert undecided == Decision(action="decline", rule="default-ask", reason=undecided.reason)
    assert evaluate_command("git reset --hard", config=ask).rule == "git-reset-hard"
    assert evaluate_command(
        "rm x", config=PermissionConfig(default="ask", disallow_patterns=["^rm"])
    ).rule == ("user-deny")
    assert evaluate_command(
        "git status", config=PermissionConfig(default="ask", allow_patterns=["^git"])
    ).accepted
    inside = ApprovalRequest(kind="file_change", paths=("/w/a.py",), cwd="/w")
    assert ApprovalPolicy(ask).evaluate(inside).rule == "default-ask"
    # A permission request that names nothing is declined by the bridge rules, never parked.
    assert ApprovalPolicy(ask).evaluate(ApprovalRequest(kind="permissions")).rule == "no-paths"


async def test_the_queue_parks_only_ask_and_times_out_to_a_decline() -> None:
    queue = ApprovalQueue(timeout=0.2)
    allow = Decision(action="allow_for_session")
    assert await queue.handler(ApprovalRequest(kind="command", command="ls"), allow) is allow
    builtin = Decision(action="decline", rule="git-reset-hard")
    assert (
        await queue.handler(ApprovalRequest(kind="command", command="git reset --hard"), builtin) is builtin
    )
    assert queue.parked == 0
    ask = Decision(action="decline", rule="default-ask")
    timed_out = await queue.handler(ApprovalRequest(kind="command", command="touch x"), ask)
    assert timed_out.action == "decline" and timed_out.rule == "approval-timeout"
    assert queue.pending() == [] and queue.parked == 1


async def test_a_decision_answers_the_waiting_request() -> None:
    queue = ApprovalQueue(timeout=None)
    ask = Decision(action="decline", rule="default-ask")
    waiting = asyncio.create_task(queue.handler(ApprovalRequest(kind="command", command=["touch", "x"]), ask))
    while not queue.pending():
        await queue.changed.wait()
    [pending] = queue.pending()
    assert pending["command"] == ["touch", "x"] and pending["deadline"] is None
    with pytest.raises(UsageError):
        queue.decide(pending["approval_id"], "maybe")
    with pytest.raises(KeyError):
        queue.decide("a999", "allow_once")
    queue.decide(pending["approval_id"], "allow_once")
    assert (await waiting).action == "allow_once"


def test_the_store_keeps_sessions_and_marks_running_ones_interrupted(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    store.add_session("s1", "codex", {"prompt": "p"})
    store.add_session("s2", "codex", {"prompt": "q"})
    store.update("s2", state="idle", usage={"total_tokens": 3})
    store.append("s1", 1, json.dumps({"type": "TextDelta", "text": "a"}).encode())
    assert [seq for seq, _ in store.events("s1")] == [1]  # reading flushes what is queued
    store.close()
    again = Store(tmp_path / "s.sqlite3")
    assert again.interrupted == 1
    states = {row["session_id"]: row["state"] for row in again.sessions()}
    assert states == {"s1": "interrupted", "s2": "idle"}
    assert again.session("s2") is not None and again.session("s2")["usage"] == {"total_tokens": 3}  # type: ignore[index]
    assert again.last_seq("s1") == 1 and again.last_seq("nope") == 0
    again.close()
