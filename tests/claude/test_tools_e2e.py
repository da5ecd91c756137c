"""``Spec.tools`` on the Claude provider: the same definitions as the codex test, served by the SDK's
in-process MCP server, called by the scripted Anthropic model through the real Claude Code CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_fleet import PermissionConfig, Result, Spec, System, ToolResult, ToolUse
from agent_fleet.claude import ClaudeOptions, ClaudeProvider
from agent_fleet.events import Event
from agent_fleet.testing._anthropic import AnthropicReply, AnthropicToolUse, ScriptedAnthropicServer
from agent_fleet.tools import Tool

from ..sample_tools import add, explode, lookup, picture

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


def _call(name: str, arguments: dict[str, object], use_id: str) -> AnthropicReply:
    return AnthropicReply(
        blocks=(AnthropicToolUse(name=f"mcp__agent_fleet__{name}", input=arguments, id=use_id),)
    )


def _result(server: ScriptedAnthropicServer, use_id: str) -> dict[str, object]:
    """The ``tool_result`` block the CLI sent back to the model for ``use_id``."""
    for request in server.agent_requests:
        for block in request.tool_results():
            if block.get("tool_use_id") == use_id:
                return block
    raise AssertionError(f"no tool_result for {use_id}")


async def test_sync_async_raising_and_denied_tools(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(
        _call("add", {"a": 2, "b": 40}, "toolu_add"),
        _call("lookup", {"key": "colour"}, "toolu_lookup"),
        _call("explode", {"reason": "on purpose"}, "toolu_boom"),
        _call("secret", {}, "toolu_denied"),
        AnthropicReply.text("done"),
    )
    permission = PermissionConfig(tool_disallow_patterns=("^secret$",))
    tools = [add, lookup, explode, Tool(lambda: "hidden", name="secret", description="never runs")]
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(
            Spec(prompt="use the tools", cwd=workspace, tools=tools, permission=permission)
        )
        events: list[Event] = [e async for e in handle.events()]

    offered = anthropic_server.agent_requests[0].tool_names
    assert {"mcp__agent_fleet__add", "mcp__agent_fleet__lookup"} <= set(offered)
    text = anthropic_server.agent_requests[-1].tool_result_text
    assert text(_result(anthropic_server, "toolu_add")) == "42"
    assert json.loads(text(_result(anthropic_server, "toolu_lookup"))) == {"key": "colour", "value": "blue"}
    boom = _result(anthropic_server, "toolu_boom")
    assert boom.get("is_error") is True and "RuntimeError: exploded: on purpose" in text(boom)
    denied = _result(anthropic_server, "toolu_denied")
    assert denied.get("is_error") is True and "tool-deny" in text(denied)
    assert "hidden" not in json.dumps(anthropic_server.agent_requests[-1].body)

    uses = [e for e in events if isinstance(e, ToolUse) and not e.synthetic]
    assert [u.name for u in uses] == ["add", "lookup", "explode", "secret"]
    results = {e.id: e for e in events if isinstance(e, ToolResult) and not e.synthetic}
    assert results["toolu_add"].is_error is False and results["toolu_boom"].is_error is True
    about = [e.input for e in events if isinstance(e, ToolUse) and e.synthetic]
    assert about == [{"kind": "tool", "tool": name} for name in ("add", "lookup", "explode", "secret")]
    notices = [e for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert [n.data["tool"] for n in notices] == ["secret"]
    assert isinstance(events[-1], Result) and events[-1].text == "done"


async def test_an_image_result_reaches_the_model(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(_call("pic", {}, "toolu_pic"), AnthropicReply.text("seen"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(
            Spec(prompt="look", cwd=workspace, tools=[Tool(picture, name="pic", description="a picture")])
        )
        result = await handle.wait()
    assert result.text == "seen"
    content = _result(anthropic_server, "toolu_pic")["content"]
    assert isinstance(content, list)
    assert content[0] == {"type": "text", "text": "a red pixel"}
    [image] = [part for part in content if part["type"] == "image"]
    assert image["source"]["media_type"] == "image/png" and image["source"]["data"].startswith("iVBOR")


ASK = {
    "questions": [
        {
            "question": "Which database?",
            "header": "Database",
            "options": [
                {"label": "sqlite", "description": "small"},
                {"label": "postgres", "description": "big"},
            ],
            "multiSelect": False,
        }
    ]
}


async def test_ask_user_question_without_a_handler_tells_claude_to_decide(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(
        AnthropicReply(blocks=(AnthropicToolUse(name="AskUserQuestion", input=ASK, id="toolu_ask"),)),
        AnthropicReply.text("decided myself"),
    )
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="set up", cwd=workspace))
        events: list[Event] = [e async for e in handle.events()]
    block = _result(anthropic_server, "toolu_ask")
    text = anthropic_server.agent_requests[-1].tool_result_text(block)
    assert "No user is available to answer" in text
    [notice] = [e for e in events if isinstance(e, System) and e.subtype == "user_input"]
    assert notice.data["action"] == "decline" and notice.data["questions"] == ["Which database?"]
    assert isinstance(events[-1], Result)


async def test_ask_user_question_with_canned_answers(
    anthropic_server: ScriptedAnthropicServer, claude_home: Path, workspace: Path
) -> None:
    from agent_fleet.testing._anthropic import scripted_claude_env

    options = ClaudeOptions(
        env=scripted_claude_env(anthropic_server, claude_home), canned_answers={"Database": "postgres"}
    )
    anthropic_server.enqueue(
        AnthropicReply(blocks=(AnthropicToolUse(name="AskUserQuestion", input=ASK, id="toolu_ask"),)),
        AnthropicReply.text("using postgres"),
    )
    async with ClaudeProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="set up", cwd=workspace))
        result = await handle.wait()
    block = _result(anthropic_server, "toolu_ask")
    text = anthropic_server.agent_requests[-1].tool_result_text(block)
    assert "postgres" in text and not block.get("is_error")
    assert result.text == "using postgres"


ELICIT_SERVER = Path(__file__).parent.parent / "elicit_mcp_server.py"


async def test_mcp_elicitations_are_cancelled_by_claude_code_itself(
    anthropic_server: ScriptedAnthropicServer, claude_home: Path, workspace: Path
) -> None:
    """Pins a limitation of the bundled CLI (2.1.330): in an SDK session it cancels an MCP server's
    elicitation without asking the host, and an SDK callback hook's answer to the ``Elicitation``
    event is not used; so ``input_handler`` is not consulted. When a CLI version changes this, this
    test fails and the Claude provider can route elicitations like the codex provider does."""
    import sys

    from agent_fleet.testing._anthropic import scripted_claude_env
    from agent_fleet.user_input import InputAnswer, InputRequest

    seen: list[InputRequest] = []

    async def handler(request: InputRequest) -> InputAnswer:
        seen.append(request)
        return InputAnswer(content={"colour": "teal"})

    options = ClaudeOptions(env=scripted_claude_env(anthropic_server, claude_home), input_handler=handler)
    server = {"type": "stdio", "command": sys.executable, "args": [str(ELICIT_SERVER)], "alwaysLoad": True}
    anthropic_server.enqueue(
        AnthropicReply(blocks=(AnthropicToolUse(name="mcp__asker__ask_colour", input={}, id="toolu_el"),)),
        AnthropicReply.text("noted"),
    )
    async with ClaudeProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="ask", cwd=workspace, mcp_servers={"asker": server}))
        await handle.wait()
    text = anthropic_server.agent_requests[-1].tool_result_text(_result(anthropic_server, "toolu_el"))
    assert text == "cancel:-"  # the server's tool ran and its elicitation was answered "cancel"
    assert seen == []
