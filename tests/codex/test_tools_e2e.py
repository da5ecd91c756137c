"""``Spec.tools`` on the real codex app-server: the scripted model calls Python functions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import PermissionConfig, Result, Spec, System, ToolResult, ToolUse
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.events import Event
from agent_fleet.testing import Reply, ScriptedModelServer
from agent_fleet.tools import Tool

from ..sample_tools import add, explode, lookup, picture

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]  # runs the real binary


def _call(name: str, arguments: dict[str, Any], call_id: str) -> Reply:
    return Reply.call(name, arguments, call_id=call_id)


def _output(server: ScriptedModelServer, call_id: str) -> Any:
    """What codex sent back to the model for ``call_id``."""
    for request in server.requests:
        for item in request.tool_outputs():
            if item.get("call_id") == call_id:
                return item["output"]
    raise AssertionError(f"no output for {call_id} in {[r.tool_outputs() for r in server.requests]}")


def _text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "".join(part.get("text", "") for part in output if isinstance(part, dict))


@pytest.mark.protocol_smoke
async def test_sync_and_async_tools_answer_the_model(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(
        _call("add", {"a": 2, "b": 40}, "call-add"),
        _call("lookup", {"key": "colour"}, "call-lookup"),
        Reply.text("done"),
    )
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="use the tools", cwd=workspace, tools=[add, lookup]))
        events: list[Event] = [e async for e in handle.events()]

    # the model was offered both tools with the derived schemas
    offered = {t.get("name"): t for t in scripted_model.requests[0].body["tools"]}
    assert offered["add"]["parameters"]["required"] == ["a", "b"]
    assert offered["add"]["description"] == "Add two integers."
    assert offered["lookup"]["parameters"]["required"] == ["key"]
    # and what each function returned is what codex sent back to the model
    assert _text(_output(scripted_model, "call-add")) == "42"
    assert json.loads(_text(_output(scripted_model, "call-lookup"))) == {"key": "colour", "value": "blue"}
    # the last request (the model's final turn) carries both results
    last = [_text(item["output"]) for item in scripted_model.requests[-1].tool_outputs()]
    assert last == ["42", '{"key": "colour", "value": "blue"}']
    uses = [e for e in events if isinstance(e, ToolUse) and not e.synthetic]
    results = [e for e in events if isinstance(e, ToolResult) and not e.synthetic]
    assert [u.name for u in uses] == ["add", "lookup"]
    assert [r.is_error for r in results] == [False, False]
    assert isinstance(events[-1], Result) and events[-1].text == "done"


async def test_a_raising_tool_and_bad_arguments_are_failed_results_the_model_reads(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(
        _call("explode", {"reason": "on purpose"}, "call-boom"),
        _call("add", {"a": "two"}, "call-bad"),
        _call("missing", {}, "call-missing"),
        Reply.text("recovered"),
    )
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="go", cwd=workspace, tools=[explode, add]))
        events: list[Event] = [e async for e in handle.events()]

    assert "RuntimeError: exploded: on purpose" in _text(_output(scripted_model, "call-boom"))
    bad = _text(_output(scripted_model, "call-bad"))
    assert "invalid arguments for tool add" in bad and "a:" in bad and "b:" in bad
    assert "missing" in _text(_output(scripted_model, "call-missing"))  # codex refuses it itself
    results = [e for e in events if isinstance(e, ToolResult) and not e.synthetic]
    assert results and all(r.is_error for r in results)
    assert isinstance(events[-1], Result) and events[-1].text == "recovered"


async def test_tool_calls_pass_the_approval_policy(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(
        _call("explode", {"reason": "x"}, "call-denied"),
        _call("add", {"a": 1, "b": 1}, "call-ok"),
        Reply.text("ok"),
    )
    permission = PermissionConfig(default="deny", tool_disallow_patterns=("^explode$",))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(
            Spec(prompt="go", cwd=workspace, tools=[explode, add], permission=permission)
        )
        events: list[Event] = [e async for e in handle.events()]

    assert "Declined by the agent-fleet approval policy (tool-deny)" in _text(
        _output(scripted_model, "call-denied")
    )
    assert _text(_output(scripted_model, "call-ok")) == "2"  # default=deny does not apply to own tools
    denied = [e for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert [d.data["tool"] for d in denied] == ["explode"]
    decisions = [e.status for e in events if isinstance(e, ToolResult) and e.synthetic]
    assert decisions == ["decline", "allow_for_session"]


async def test_an_image_result_reaches_the_model_as_an_image(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(_call("pic", {}, "call-pic"), Reply.text("seen"))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(
            Spec(prompt="look", cwd=workspace, tools=[Tool(picture, name="pic", description="a picture")])
        )
        result = await handle.wait()
    assert result.text == "seen"
    output = _output(scripted_model, "call-pic")
    assert [part["type"] for part in output] == ["input_text", "input_image"]
    assert output[0]["text"] == "a red pixel"
    assert output[1]["image_url"].startswith("data:image/png;base64,")


async def test_tools_keep_working_after_resume(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    # thread/resume takes no dynamicTools: codex keeps the thread's own; the new handle answers them.
    scripted_model.enqueue(
        Reply.text("first"), _call("add", {"a": 5, "b": 6}, "call-later"), Reply.text("second")
    )
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="one", cwd=workspace, tools=[add]))
        await handle.wait()
        await handle.stop()
        resumed = await provider.resume(handle.session_id, Spec(prompt="two", cwd=workspace, tools=[add]))
        result = await resumed.wait()
    assert result.text == "second"
    assert "add" in {t.get("name") for t in scripted_model.requests[1].body["tools"]}
    assert _text(_output(scripted_model, "call-later")) == "11"
