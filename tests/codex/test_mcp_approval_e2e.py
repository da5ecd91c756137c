"""MCP tool approvals from the real codex binary (issue 16): codex asks with an elicitation carrying
``_meta.codex_approval_kind = "mcp_tool_call"``; the policy answers (``PermissionConfig.mcp_tools``),
never the ``input_handler``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import PermissionConfig, Result, Spec, System, ToolResult, ToolUse
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.events import Event
from agent_fleet.testing import Reply, ScriptedModelServer
from agent_fleet.user_input import InputAnswer, InputRequest

pytestmark = pytest.mark.e2e  # runs the real binary

# A stdio MCP server with one tool, "wipe", that leaves a mark when it runs.
SERVER = """
import json, sys
mark = sys.argv[1]
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "docs", "version": "1"}}
    elif msg["method"] == "tools/list":
        schema = {"type": "object", "properties": {"what": {"type": "string"}}}
        result = {"tools": [{"name": "wipe", "description": "Wipe things.", "inputSchema": schema}]}
    elif msg["method"] == "tools/call":
        open(mark, "a").write(json.dumps(msg["params"]["arguments"]) + "\\n")
        result = {"content": [{"type": "text", "text": "wiped"}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Items(Reply):
    """A reply of raw output items: codex defers MCP tools behind ``tool_search`` and exposes them in
    a namespace, two item shapes the testing kit does not script."""

    raw: tuple[dict[str, Any], ...] = ()

    def sse_events(self) -> Iterator[dict[str, Any]]:
        yield {"type": "response.created", "response": {"id": "resp_raw"}}
        for item in self.raw:
            yield {"type": "response.output_item.done", "item": item}
        usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        yield {"type": "response.completed", "response": {"id": "resp_raw", "usage": usage}}


def _search() -> Reply:
    arguments = {"query": "wipe"}
    item = {"type": "tool_search_call", "call_id": "search-1", "execution": "client", "status": "completed"}
    return _Items(raw=({**item, "arguments": arguments},))


def _call_wipe() -> Reply:
    arguments = json.dumps({"what": "all"})
    item = {"type": "function_call", "call_id": "wipe-1", "namespace": "mcp__docs", "name": "wipe"}
    return _Items(raw=({**item, "arguments": arguments},))


async def _run(
    codex_options: CodexOptions,
    scripted_model: ScriptedModelServer,
    workspace: Path,
    permission: PermissionConfig,
) -> tuple[list[Event], list[InputRequest], Path]:
    script, mark = workspace / "docs_server.py", workspace / "wiped.log"
    script.write_text(SERVER)
    scripted_model.enqueue(_search(), _call_wipe(), Reply.text("done"))
    questions: list[InputRequest] = []

    async def input_handler(request: InputRequest) -> InputAnswer:
        questions.append(request)
        return InputAnswer(content={})  # an input handler that says yes to anything

    options = CodexOptions(
        config=dict(codex_options.config), env=dict(codex_options.env), input_handler=input_handler
    )
    servers = {"docs": {"command": sys.executable, "args": [str(script), str(mark)]}}
    spec = Spec(prompt="wipe it", cwd=workspace, mcp_servers=servers, permission=permission)
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(spec)
        events = [e async for e in handle.events()]
    return events, questions, mark


def _verdicts(events: list[Event]) -> list[tuple[object, str | None]]:
    uses = {e.id: e.input for e in events if isinstance(e, ToolUse) and e.synthetic}
    return [(uses[e.id].get("tool"), e.status) for e in events if isinstance(e, ToolResult) and e.id in uses]


async def test_an_mcp_tool_not_in_mcp_tools_is_declined(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    events, questions, mark = await _run(codex_options, scripted_model, workspace, PermissionConfig())
    assert _verdicts(events) == [("mcp:docs/wipe", "decline")]
    denied = [e.data for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert [d["rule"] for d in denied] == ["mcp-not-allowed"]
    assert not mark.exists()  # the tool never ran
    assert questions == []  # the input handler that says yes was never asked
    assert isinstance(events[-1], Result) and events[-1].text == "done"
    told = json.dumps(scripted_model.requests[-1].tool_outputs())
    assert "rejected" in told


async def test_an_mcp_tool_in_mcp_tools_runs(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    permission = PermissionConfig(mcp_tools=("docs/wipe",))
    events, questions, mark = await _run(codex_options, scripted_model, workspace, permission)
    assert _verdicts(events) == [("mcp:docs/wipe", "allow_for_session")]
    assert mark.read_text() == '{"what": "all"}\n'
    assert questions == []
    assert isinstance(events[-1], Result) and events[-1].text == "done"
