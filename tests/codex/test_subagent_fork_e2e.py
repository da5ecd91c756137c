"""Issue 32's acceptance test for sub-agents, from the real codex binary: a scripted ``spawn_agent``
whose sub-agent runs a command, asks a question and calls a ``Spec.tools`` function. The session's
stream has the sub-agent's ``ToolUse``/``ToolResult``, the answer came from the ``input_handler``, and
the tool ran.

What codex 0.163 lets a sub-agent reach the client with (source: openai/codex ``codex-rs/core``):

- ``Spec.tools``: a sub-agent has its session's ``dynamicTools`` when it is forked from the session's
  history -- ``spawn_agent`` with ``fork_context: true`` (multi_agent_v1), or under ``multi_agent_v2``
  with ``fork_turns`` omitted or ``"all"`` (its default) -- because a thread started from forked history
  without tools of its own takes the ones recorded in that history (``Codex::spawn``). A fresh sub-agent
  has none (``spawn_new_thread_with_source`` passes an empty list) unless ``multi_agent_v2`` runs with
  the ``multi_agent_v2_dynamic_tools`` feature (``agent/control/spawn.rs``). Its calls then arrive as
  ``item/tool/call`` with the sub-agent's ``threadId``.
- A question: never through ``request_user_input``, which codex answers itself for any sub-agent
  ("request_user_input can only be used by the root thread": ``tools/handlers/request_user_input.rs``
  checks ``session_source.is_non_root_agent()`` before anything else; no feature or setting changes
  it). The sub-agent's MCP servers may ask (``mcpServer/elicitation/request`` with its ``threadId``):
  that is the question that reaches the session's ``input_handler``.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import PermissionConfig, Result, Spec, System, ToolResult, ToolUse
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.events import Event
from agent_fleet.testing import FunctionCall, RecordedRequest, Reply, ScriptedModelServer, exec_command
from agent_fleet.user_input import InputAnswer, InputRequest

from .test_subagent_approval_e2e import _agent_tool, _Items, _outputs
from .test_subagent_events_e2e import ELICIT_SERVER, _output, _question

pytestmark = pytest.mark.e2e  # runs the real binary

TASK = "SUBTASK: look the key up"
ran: list[str] = []


def lookup(key: str) -> str:
    """Look ``key`` up in the fleet's settings."""
    ran.append(key)
    return f"value-of-{key}"


def _v2_tool(call_id: str, name: str, arguments: dict[str, Any]) -> Reply:
    item = {"type": "function_call", "call_id": call_id, "namespace": "collaboration", "name": name}
    return _Items(raw=({**item, "arguments": json.dumps(arguments)},))


def _sub_agent(answered: set[str]) -> Reply:
    """The sub-agent's turn: a command, a question codex refuses, an MCP tool whose server asks its
    client, the session's own tool, then its answer."""
    if "sub-cmd" not in answered:
        return Reply(items=(exec_command("echo sub-ran > proof.txt", call_id="sub-cmd"),))
    if "sub-ask" not in answered:
        return _question()
    if "sub-mcp" not in answered:
        call = {"type": "function_call", "call_id": "sub-mcp", "namespace": "mcp__asker"}
        return _Items(raw=({**call, "name": "ask_colour", "arguments": "{}"},))
    if "sub-tool" not in answered:
        return Reply(items=(FunctionCall(name="lookup", arguments='{"key": "k"}', call_id="sub-tool"),))
    return Reply.text("sub-agent done")


def _responder(
    version: str, sub_done: threading.Event, spawn: dict[str, Any] | None = None
) -> Callable[[RecordedRequest], Reply]:
    def respond(request: RecordedRequest) -> Reply:
        outputs = {str(o.get("call_id")): o for o in _outputs(request)}
        # The sub-agent's requests carry its task as a message (a user message under v1, an agent
        # message under v2); the session's carry it only inside its spawn_agent call's arguments.
        messages = [i for i in request.input if i.get("type") in ("message", "agent_message")]
        if TASK in json.dumps(messages):
            return _sub_agent(set(outputs))
        if version == "v1":
            if "s-1" not in outputs:  # codex's v1 agent tools are found with tool_search
                search = {"type": "tool_search_call", "call_id": "s-1", "execution": "client"}
                return _Items(raw=({**search, "status": "completed", "arguments": {"query": "spawn"}},))
            if "spawn-1" not in outputs:
                return _agent_tool("spawn-1", "spawn_agent", {"message": TASK, "fork_context": True})
            if not sub_done.is_set() and len(outputs) < 40:
                agent = json.loads(str(outputs["spawn-1"]["output"]))["agent_id"]
                wait = {"targets": [agent], "timeout_ms": 2000}
                return _agent_tool(f"wait-{len(outputs)}", "wait_agent", wait)
            return Reply.text("done")
        if "spawn-1" not in outputs:  # v2: fork_turns omitted ("all") unless ``spawn`` says otherwise
            arguments = {"task_name": "looker", "message": TASK, **(spawn or {})}
            return _v2_tool("spawn-1", "spawn_agent", arguments)
        if not sub_done.is_set() and len(outputs) < 20:
            return _v2_tool(f"wait-{len(outputs)}", "wait_agent", {"timeout_ms": 10000})
        return Reply.text("done")

    return respond


@pytest.mark.protocol_smoke
@pytest.mark.parametrize("version", ["v1", "v2"])
async def test_a_forked_sub_agent_runs_a_command_asks_and_calls_the_sessions_tool(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path, version: str
) -> None:
    ran.clear()
    sub_done = threading.Event()
    asked: list[InputRequest] = []

    async def answer(request: InputRequest) -> InputAnswer:
        asked.append(request)
        return InputAnswer(content={"colour": "blue"})

    scripted_model.responder = _responder(version, sub_done)
    config = dict(codex_options.config)
    if version == "v2":
        config["features.multi_agent_v2"] = True
    options = CodexOptions(config=config, env=codex_options.env, input_handler=answer)
    spec = Spec(
        prompt="delegate",
        cwd=workspace,
        tools=[lookup],
        sandbox="workspace-write",
        mcp_servers={"asker": {"command": sys.executable, "args": [str(ELICIT_SERVER)]}},
        permission=PermissionConfig(mcp_tools=("asker/ask_colour",)),
    )
    events: list[Event] = []
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(spec)
        async for event in handle.events():
            events.append(event)
            if isinstance(event, System) and event.subtype == "subagent_turn":
                sub_done.set()

    [ended] = [e for e in events if isinstance(e, System) and e.subtype == "subagent_turn"]
    agent = ended.agent
    assert agent is not None and agent != handle.session_id and ended.data["status"] == "completed"
    results = {e.id: e for e in events if isinstance(e, ToolResult) and not e.synthetic}
    uses = {e.name: e for e in events if isinstance(e, ToolUse) and not e.synthetic}
    # the sub-agent ran its command: the session's stream has its ToolUse and ToolResult, tagged
    assert (workspace / "proof.txt").read_text() == "sub-ran\n"
    shell = uses["shell"]
    assert shell.agent == agent and results[shell.id].agent == agent and results[shell.id].exit_code == 0
    # it asked: request_user_input is refused by codex itself, its MCP server's question reached the
    # session's input_handler, and the answer reached the MCP server and the sub-agent's model
    assert _output(scripted_model, "sub-ask") == "request_user_input can only be used by the root thread"
    assert [(r.kind, r.server, r.message) for r in asked] == [("elicitation", "asker", "Favourite colour?")]
    mcp = uses["mcp:asker/ask_colour"]
    assert mcp.agent == agent and "accept:blue" in results[mcp.id].output
    assert "accept:blue" in _output(scripted_model, "sub-mcp")
    # it called the session's Spec.tools function: the tool ran, in the session's stream
    assert ran == ["k"]
    tool = uses["lookup"]
    assert (tool.agent, tool.input) == (agent, {"arguments": {"key": "k"}})
    assert results[tool.id].agent == agent and "value-of-k" in results[tool.id].output
    assert _output(scripted_model, "sub-tool") == "value-of-k"
    assert isinstance(events[-1], Result) and events[-1].text == "done"


@pytest.mark.parametrize("dynamic_tools", [False, True], ids=["v2", "v2-dynamic-tools"])
async def test_a_fresh_sub_agent_has_the_sessions_tools_only_with_v2_dynamic_tools(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path, dynamic_tools: bool
) -> None:
    """``fork_turns: "none"``: codex gives the sub-agent its session's tools only under the
    ``multi_agent_v2_dynamic_tools`` feature; without it codex refuses the call itself."""
    ran.clear()
    sub_done = threading.Event()
    scripted_model.responder = _responder("v2", sub_done, {"fork_turns": "none"})
    config = {**codex_options.config, "features.multi_agent_v2": True}
    if dynamic_tools:
        config["features.multi_agent_v2_dynamic_tools"] = True
    spec = Spec(prompt="delegate", cwd=workspace, tools=[lookup], sandbox="workspace-write")
    async with CodexProvider(CodexOptions(config=config, env=codex_options.env)) as provider:
        handle = await provider.spawn(spec)
        events: list[Event] = []
        async for event in handle.events():
            events.append(event)
            if isinstance(event, System) and event.subtype == "subagent_turn":
                sub_done.set()
    [ended] = [e for e in events if isinstance(e, System) and e.subtype == "subagent_turn"]
    assert ended.agent is not None and isinstance(events[-1], Result)
    assert _output(scripted_model, "sub-ask") == "request_user_input can only be used by the root thread"
    called = [e for e in events if isinstance(e, ToolUse) and e.name == "lookup"]
    if dynamic_tools:
        assert ran == ["k"] and _output(scripted_model, "sub-tool") == "value-of-k"
        assert [e.agent for e in called] == [ended.agent]
    else:
        assert ran == [] and called == []
        assert _output(scripted_model, "sub-tool") == "unsupported call: lookup"
