"""The scripted Anthropic server speaks the Messages API (SSE and JSON) and records requests."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from agent_fleet.testing._anthropic import (
    AnthropicReply,
    AnthropicRequest,
    AnthropicText,
    AnthropicThinking,
    AnthropicToolUse,
    ScriptedAnthropicServer,
    scripted_claude_env,
)

TOOLS = [{"name": "Bash", "input_schema": {"type": "object"}}]


def _post(url: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


def _events(body: bytes) -> list[dict[str, Any]]:
    out = []
    for block in body.decode().split("\n\n"):
        lines = block.strip().splitlines()
        if not lines:
            continue
        assert lines[0].startswith("event: ")
        data = json.loads(lines[1].removeprefix("data: "))
        assert data["type"] == lines[0].removeprefix("event: ")
        out.append(data)
    return out


def test_streamed_text_tool_use_and_thinking() -> None:
    reply = AnthropicReply(
        blocks=(
            AnthropicThinking(thinking="let me see"),
            AnthropicText(text="running it"),
            AnthropicToolUse(name="Bash", input={"command": "echo hi"}, id="toolu_1"),
        ),
        usage={"input_tokens": 12, "output_tokens": 4},
    )
    with ScriptedAnthropicServer([reply]) as server:
        body = {
            "model": "claude-x",
            "stream": True,
            "tools": TOOLS,
            "messages": [{"role": "user", "content": "go"}],
        }
        status, headers, raw = _post(server.url, "/v1/messages?beta=true", body)
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    events = _events(raw)
    types = [e["type"] for e in events]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    assert events[0]["message"]["model"] == "claude-x"
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [b["type"] for b in starts] == ["thinking", "text", "tool_use"]
    assert starts[2]["id"] == "toolu_1" and starts[2]["name"] == "Bash"
    deltas = [e for e in events if e["type"] == "content_block_delta"]
    text = "".join(d["delta"]["text"] for d in deltas if d["delta"]["type"] == "text_delta")
    assert text == "running it"
    partial = "".join(d["delta"]["partial_json"] for d in deltas if d["delta"]["type"] == "input_json_delta")
    assert json.loads(partial) == {"command": "echo hi"}
    assert sum(e["type"] == "content_block_stop" for e in events) == 3
    assert events[-2]["delta"]["stop_reason"] == "tool_use" and events[-2]["usage"]["output_tokens"] == 4


def test_non_streaming_json_and_recording() -> None:
    with ScriptedAnthropicServer([AnthropicReply.text("plain answer")]) as server:
        body = {
            "model": "claude-y",
            "tools": TOOLS,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "q1"}]},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "out"}]},
            ],
        }
        status, _, raw = _post(server.url, "/v1/messages", body)
        [request] = server.agent_requests
    assert status == 200
    message = json.loads(raw)
    assert message["type"] == "message" and message["stop_reason"] == "end_turn"
    assert message["content"] == [{"type": "text", "text": "plain answer"}]
    assert isinstance(request, AnthropicRequest)
    assert not request.stream and request.model == "claude-y" and request.tool_names == ["Bash"]
    assert request.user_texts() == ["q1"] and request.ends_with_tool_result
    assert request.tool_result_text(request.tool_results()[0]) == "out"


def test_side_requests_do_not_consume_the_script() -> None:
    with ScriptedAnthropicServer([AnthropicReply.text("for the agent")]) as server:
        _, _, side = _post(server.url, "/v1/messages", {"messages": [{"role": "user", "content": "title?"}]})
        _, _, agent = _post(server.url, "/v1/messages", {"tools": TOOLS, "messages": []})
        assert json.loads(side)["content"][0]["text"] == "Scripted session"
        assert json.loads(agent)["content"][0]["text"] == "for the agent"
        assert len(server.requests) == 2 and len(server.agent_requests) == 1
        _, _, again = _post(server.url, "/v1/messages", {"tools": TOOLS, "messages": []})
        assert json.loads(again)["content"][0]["text"].startswith("(scripted model")
        assert server.unscripted == 1


def test_errors_other_endpoints_and_responder() -> None:
    def responder(request: AnthropicRequest) -> AnthropicReply | None:
        return AnthropicReply.http_error(529, "busy") if request.contains("overload me") else None

    with ScriptedAnthropicServer(responder=responder) as server:
        status, _, raw = _post(
            server.url, "/v1/messages", {"messages": [{"role": "user", "content": "overload me"}]}
        )
        assert status == 529
        assert json.loads(raw) == {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
        status, _, raw = _post(server.url, "/v1/messages/count_tokens", {"messages": []})
        assert status == 200 and json.loads(raw)["input_tokens"] >= 1
        status, _, raw = _post(server.url, "/api/something/new", {"x": 1})
        assert status == 200 and json.loads(raw) == {}
        assert [r.path for r in server.other_requests] == ["/v1/messages/count_tokens", "/api/something/new"]


def test_claude_env_is_private_and_offline(tmp_path: Path) -> None:
    with ScriptedAnthropicServer() as server:
        env = scripted_claude_env(server, tmp_path / "home")
        assert env["ANTHROPIC_BASE_URL"] == server.url and env["ANTHROPIC_API_KEY"]
    assert env["HOME"] == str(tmp_path / "home")
    assert Path(env["CLAUDE_CONFIG_DIR"]).is_dir()
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and env["DISABLE_AUTOUPDATER"] == "1"
