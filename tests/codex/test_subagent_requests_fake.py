"""A sub-agent's events and server requests against the fake app-server (real pipes): its items are
typed events tagged with it, its tokens are added to its session's, and its tool calls and questions are
answered as its session's own would be (``Spec.tools``, the ``input_handler``)."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

from agent_fleet import Result, Spec, System, TokenUsage, ToolResult, ToolUse
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.events import Event
from agent_fleet.user_input import InputAnswer, InputRequest

FAKE = Path(__file__).with_name("fake_app_server.py")
SUB = "sub-1"


def lookup(key: str) -> str:
    """Look ``key`` up."""
    return f"value-of-{key}"


def _note(method: str, params: dict[str, Any], thread: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"method": method, "params": params, "notify": True}
    if thread is not None:
        entry["thread"] = thread
    return entry


def _usage(total: int) -> dict[str, Any]:
    return {"tokenUsage": {"total": {"totalTokens": total, "inputTokens": total}, "last": {}}}


async def test_a_sub_agents_items_tokens_tool_calls_and_questions(tmp_path: Path) -> None:
    spawn = {"type": "collabAgentToolCall", "id": "spawn-1", "tool": "spawnAgent", "receiverThreadIds": [SUB]}
    command = {"type": "commandExecution", "id": "c1", "command": "ls", "exitCode": 0, "status": "completed"}
    questions = [{"id": "colour", "header": "Colour", "question": "Which colour?", "options": []}]
    scenario = [
        _note("item/completed", {"item": spawn}),
        _note("thread/tokenUsage/updated", _usage(100)),
        _note("item/completed", {"item": command}, SUB),
        _note("thread/tokenUsage/updated", _usage(40), SUB),
        {
            "method": "item/tool/call",
            "params": {"tool": "lookup", "arguments": {"key": "k"}, "callId": "t1"},
            "thread": SUB,
        },
        {
            "method": "item/tool/requestUserInput",
            "params": {"itemId": "q1", "questions": questions},
            "thread": SUB,
        },
        {
            "method": "item/tool/call",
            "params": {"tool": "lookup", "arguments": {"key": "x"}, "callId": "t2"},
            "thread": "stranger",
        },
    ]
    wrapper = tmp_path / "fake-codex"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    asked: list[InputRequest] = []

    async def answer(request: InputRequest) -> InputAnswer:
        asked.append(request)
        return InputAnswer(answers={"colour": ["blue"]})

    options = CodexOptions(
        codex_bin=wrapper, env={"FAKE_SCENARIO": json.dumps(scenario)}, input_handler=answer
    )
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=tmp_path, tools=[lookup]))
        events: list[Event] = [e async for e in handle.events()]
    result = events[-1]
    assert isinstance(result, Result)
    tool, question, stranger = (a for a in json.loads(result.text))
    assert tool["result"] == {"contentItems": [{"type": "inputText", "text": "value-of-k"}], "success": True}
    assert question["result"] == {"answers": {"colour": {"answers": ["blue"]}}}
    assert stranger["error"]["code"] == -32601  # a thread no session spawned gets nothing
    assert [q.id for r in asked for q in r.questions] == ["colour"]
    uses = [e for e in events if isinstance(e, ToolUse) and not e.synthetic]
    assert [(u.name, u.agent) for u in uses] == [("shell", SUB)]
    assert [e.agent for e in events if isinstance(e, ToolResult) and not e.synthetic] == [SUB]
    # the tool call's approval and the question's notice are the sub-agent's too
    assert {e.agent for e in events if isinstance(e, ToolUse) and e.synthetic} == {SUB}
    assert [e.agent for e in events if isinstance(e, System) and e.subtype == "user_input"] == [SUB]
    # its tokens are added to the session's own: 100 + 40
    usages = [e.total_tokens for e in events if isinstance(e, TokenUsage)]
    assert usages == [100, 140]
    assert result.usage is not None and result.usage.total_tokens == 140
