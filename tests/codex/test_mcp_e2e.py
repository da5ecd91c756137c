"""MCP servers are each session's own (per-thread config), and their start-up is an event."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from agent_fleet import McpServerStatus, Spec
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.events import Event
from agent_fleet.testing import Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e  # runs the real binary

# The smallest stdio MCP server: answers initialize and lists no tools (no dependency on an MCP SDK).
SERVER = """
import json, sys

for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {
            "protocolVersion": msg["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "docs", "version": "1"},
        }
    elif msg["method"] == "tools/list":
        result = {"tools": []}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n")
    sys.stdout.flush()
"""


async def _two_turns(handle: object) -> list[Event]:
    events = [e async for e in handle.events()]  # type: ignore[attr-defined]
    await handle.send("again")  # type: ignore[attr-defined]
    return events + [e async for e in handle.events()]  # type: ignore[attr-defined]


async def test_two_sessions_define_one_server_name_differently(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    script = workspace / "docs_server.py"
    script.write_text(SERVER)
    scripted_model.responder = lambda request: Reply.text("ok")
    good = {"docs": {"command": sys.executable, "args": [str(script)]}}
    bad = {"docs": {"command": str(workspace / "no-such-server")}}
    async with CodexProvider(codex_options) as provider:
        a = await provider.spawn(Spec(prompt="a", cwd=workspace, mcp_servers=good))
        b = await provider.spawn(Spec(prompt="b", cwd=workspace, mcp_servers=bad))
        plain = await provider.spawn(Spec(prompt="c", cwd=workspace))
        events_a, events_b, events_plain = await asyncio.wait_for(
            asyncio.gather(_two_turns(a), _two_turns(b), _two_turns(plain)), 120
        )
    final_a = [e for e in events_a if isinstance(e, McpServerStatus) and e.status != "starting"]
    final_b = [e for e in events_b if isinstance(e, McpServerStatus) and e.status != "starting"]
    assert [(e.name, e.status, e.session_id) for e in final_a] == [("docs", "ready", a.session_id)]
    assert [(e.name, e.status, e.session_id) for e in final_b] == [("docs", "failed", b.session_id)]
    assert final_b[0].error
    assert not [e for e in events_plain if isinstance(e, McpServerStatus)]
