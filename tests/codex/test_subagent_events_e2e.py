"""A sub-agent seen (issue 32), from the real codex binary: its thread has no handle; its items reach
its session's stream as the usual typed events with ``agent`` set, its approvals are its session's, its
tokens count in the session's usage, and its MCP server's questions are answered by the session's
``input_handler``. (A forked sub-agent calling the session's ``Spec.tools``: test_subagent_fork_e2e.)"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_fleet import PermissionConfig, Result, Spec, System, TokenUsage, ToolResult, ToolUse
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.events import AssistantMessage, Event
from agent_fleet.testing import FunctionCall, RecordedRequest, Reply, ScriptedModelServer, exec_command
from agent_fleet.user_input import InputAnswer, InputRequest

from .test_subagent_approval_e2e import _agent_tool, _Items, _outputs

pytestmark = pytest.mark.e2e  # runs the real binary

TASK = "SUBTASK: check the repository"
SUB_USAGE = {"input_tokens": 1000, "output_tokens": 10}


def lookup(key: str) -> str:
    """Look ``key`` up in the fleet's settings."""
    ran.append(key)
    return f"value-of-{key}"


ran: list[str] = []


def _question() -> Reply:
    questions = [
        {
            "id": "colour",
            "header": "Colour",
            "question": "Which colour?",
            "options": [{"label": "red", "description": "warm"}, {"label": "blue", "description": "cool"}],
        }
    ]
    call = FunctionCall(
        name="request_user_input", arguments=json.dumps({"questions": questions}), call_id="sub-ask"
    )
    return Reply(items=(call,), usage=SUB_USAGE)


def _output(server: ScriptedModelServer, call_id: str) -> str:
    """What codex sent the sub-agent's model for its call ``call_id``."""
    found = [o for r in server.requests for o in r.input if o.get("call_id") == call_id and "output" in o]
    return str(found[-1]["output"]) if found else ""


def _responder(sub_done: threading.Event) -> Callable[[RecordedRequest], Reply]:
    def respond(request: RecordedRequest) -> Reply:
        outputs = _outputs(request)
        if request.contains(TASK) and not request.contains("tool_search"):  # the sub-agent's own turn
            answered = {str(o.get("call_id")) for o in outputs}
            if "sub-cmd" not in answered:
                return Reply(
                    items=(exec_command("echo sub-ran > proof.txt", call_id="sub-cmd"),), usage=SUB_USAGE
                )
            if "sub-ask" not in answered:
                return _question()
            if "sub-tool" not in answered:
                call = FunctionCall(name="lookup", arguments='{"key": "k"}', call_id="sub-tool")
                return Reply(items=(call,), usage=SUB_USAGE)
            return Reply(items=Reply.text("sub-agent done").items, usage=SUB_USAGE)
        if not outputs:
            search = {
                "type": "tool_search_call",
                "call_id": "s-1",
                "execution": "client",
                "status": "completed",
            }
            return _Items(raw=({**search, "arguments": {"query": "spawn agent"}},))
        if len(outputs) == 1:
            return _agent_tool("spawn-1", "spawn_agent", {"message": TASK})
        if not sub_done.is_set() and len(outputs) < 60:
            agent = json.loads(str(outputs[1]["output"]))["agent_id"]
            return _agent_tool(f"wait-{len(outputs)}", "wait_agent", {"targets": [agent], "timeout_ms": 2000})
        return Reply.text("done")

    return respond


@pytest.mark.protocol_smoke
async def test_a_sub_agents_command_question_and_tokens_reach_its_session(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    sub_done = threading.Event()
    asked: list[InputRequest] = []

    async def answer(request: InputRequest) -> InputAnswer:
        asked.append(request)
        return InputAnswer(answers={"colour": ["blue"]})

    scripted_model.responder = _responder(sub_done)
    options = CodexOptions(config=codex_options.config, env=codex_options.env, input_handler=answer)
    events: list[Event] = []
    async with CodexProvider(options) as provider:
        spec = Spec(prompt="delegate", cwd=workspace, tools=[lookup], sandbox="workspace-write")
        handle = await provider.spawn(spec)
        version = provider.version
        async for event in handle.events():
            events.append(event)
            if isinstance(event, System) and event.subtype == "subagent_turn":
                sub_done.set()

    [session] = [e for e in events if isinstance(e, System) and e.subtype == "session"]
    assert session.data["codex_version"] == version and version
    turn_end = [e for e in events if isinstance(e, System) and e.subtype == "subagent_turn"]
    assert len(turn_end) == 1 and turn_end[0].data["status"] == "completed"
    agent = turn_end[0].agent
    assert agent is not None and agent != handle.session_id
    # the sub-agent ran its command: the session's stream has its ToolUse and ToolResult, tagged
    assert (workspace / "proof.txt").read_text() == "sub-ran\n"
    uses = [e for e in events if isinstance(e, ToolUse) and e.name == "shell" and not e.synthetic]
    results = {e.id: e for e in events if isinstance(e, ToolResult) and not e.synthetic}
    assert [u.agent for u in uses] == [agent] and "proof.txt" in str(uses[0].input["command"])
    assert results[uses[0].id].agent == agent and results[uses[0].id].exit_code == 0
    # codex 0.163 answers this sub-agent's question and Spec.tools call itself, before any server
    # request: "request_user_input can only be used by the root thread" (any sub-agent), and a fresh
    # sub-agent (spawned without fork_context) has none of its session's dynamicTools. A forked one has
    # them, and its call runs the session's tool: test_subagent_fork_e2e.
    assert _output(scripted_model, "sub-ask") == "request_user_input can only be used by the root thread"
    assert _output(scripted_model, "sub-tool") == "unsupported call: lookup"
    assert asked == [] and ran == []
    # its messages are the session's events too, and its tokens count in the session's usage
    assert any(
        isinstance(e, AssistantMessage) and e.agent == agent and e.text == "sub-agent done" for e in events
    )
    result = events[-1]
    assert isinstance(result, Result) and result.text == "done" and result.usage is not None
    assert result.usage.input_tokens >= 4 * SUB_USAGE["input_tokens"]
    assert result.usage.turn is not None and result.usage.turn.input_tokens >= 4 * SUB_USAGE["input_tokens"]
    usages = [e for e in events if isinstance(e, TokenUsage)]
    assert usages[-1].input_tokens == result.usage.input_tokens


ELICIT_SERVER = Path(__file__).resolve().parents[1] / "elicit_mcp_server.py"
ASK = "SUBTASK: ask the user's colour"


def _mcp_responder() -> Callable[[RecordedRequest], Reply]:
    def respond(request: RecordedRequest) -> Reply:
        outputs = {str(o.get("call_id")): o for o in _outputs(request)}
        if any(ASK in text for text in request.user_texts()):  # the sub-agent's own turn
            if "sub-mcp" not in outputs:  # an MCP tool whose server asks its client a question
                call = {"type": "function_call", "call_id": "sub-mcp", "namespace": "mcp__asker"}
                return _Items(raw=({**call, "name": "ask_colour", "arguments": "{}"},))
            return Reply.text("sub-agent done")
        if "search-1" not in outputs:
            search = {
                "type": "tool_search_call",
                "call_id": "search-1",
                "execution": "client",
                "status": "completed",
            }
            return _Items(raw=({**search, "arguments": {"query": "spawn agent"}},))
        if "spawn-1" not in outputs:
            return _agent_tool("spawn-1", "spawn_agent", {"message": ASK})
        waits = sum(1 for key in outputs if key.startswith("wait-"))
        if waits < 3:
            agent = json.loads(str(outputs["spawn-1"]["output"]))["agent_id"]
            return _agent_tool(f"wait-{waits}", "wait_agent", {"targets": [agent], "timeout_ms": 3000})
        return Reply.text("done")

    return respond


@pytest.mark.protocol_smoke
async def test_a_sub_agents_mcp_elicitation_is_answered_by_its_sessions_input_handler(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    asked: list[InputRequest] = []

    async def answer(request: InputRequest) -> InputAnswer:
        asked.append(request)
        return InputAnswer(content={"colour": "blue"})

    scripted_model.responder = _mcp_responder()
    options = CodexOptions(config=codex_options.config, env=codex_options.env, input_handler=answer)
    server = {"command": sys.executable, "args": [str(ELICIT_SERVER)]}
    spec = Spec(
        prompt="delegate",
        cwd=workspace,
        mcp_servers={"asker": server},
        permission=PermissionConfig(mcp_tools=("asker/ask_colour",)),
    )
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(spec)
        events = [e async for e in handle.events()]
    [use] = [e for e in events if isinstance(e, ToolUse) and e.name == "mcp:asker/ask_colour"]
    agent = use.agent
    assert agent is not None and agent != handle.session_id
    # the tool call's approval was the session's policy's, the server's question its input_handler's
    assert [(r.kind, r.server, r.message) for r in asked] == [("elicitation", "asker", "Favourite colour?")]
    notices = [e for e in events if isinstance(e, System) and e.subtype == "user_input"]
    assert [(n.agent, n.data["source"], n.data["action"]) for n in notices] == [(agent, "handler", "accept")]
    [result] = [e for e in events if isinstance(e, ToolResult) and e.id == use.id]
    assert result.agent == agent and "accept:blue" in result.output  # what the MCP server got back
    assert "accept:blue" in _output(scripted_model, "sub-mcp")
    assert isinstance(events[-1], Result) and events[-1].text == "done"
