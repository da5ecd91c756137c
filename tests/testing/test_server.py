"""The scripted model server speaks the Responses API SSE format and records requests."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from agent_fleet.testing import RecordedRequest, Reply, ScriptedModelServer, Text, exec_command


def _post(url: str, body: dict[str, Any]) -> tuple[int, bytes]:
    req = urllib.request.Request(
        url + "/responses", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


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


def test_text_reply_streams_deltas_and_completes() -> None:
    with ScriptedModelServer([Reply.text("hello big world")]) as server:
        status, body = _post(server.url, {"input": [{"type": "message", "role": "user", "content": "hi"}]})
    assert status == 200
    events = _events(body)
    types = [e["type"] for e in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == "hello big world"
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert done[0]["item"]["content"][0]["text"] == "hello big world"
    assert server.requests[0].user_texts() == ["hi"]


def test_function_call_and_patch_items() -> None:
    reply = Reply(items=(Text(text="ok"), exec_command("ls -la", call_id="c1")))
    with ScriptedModelServer([reply, Reply.patch("*** Begin Patch\n*** End Patch")]) as server:
        events = _events(_post(server.url, {})[1])
        call = (
            [e["item"] for e in events if e["item"]["type"] == "function_call"]
            if False
            else [e["item"] for e in events if e.get("item", {}).get("type") == "function_call"]
        )
        assert call == [
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "exec_command",
                "arguments": '{"cmd": "ls -la"}',
            }
        ]
        events = _events(_post(server.url, {})[1])
        custom = [e["item"] for e in events if e.get("item", {}).get("type") == "custom_tool_call"]
        assert custom[0]["name"] == "apply_patch"
        assert custom[0]["input"].startswith("*** Begin Patch")


@pytest.mark.parametrize("status", [401, 429, 500])
def test_http_errors(status: int) -> None:
    with ScriptedModelServer([Reply.http_error(status, "nope")]) as server:
        got, body = _post(server.url, {})
    assert got == status
    assert json.loads(body)["error"]["message"] == "nope"


def test_rate_limited_reply_has_the_api_body_and_a_retry_after_header() -> None:
    with ScriptedModelServer([Reply.rate_limited(2.5)]) as server:
        req = urllib.request.Request(server.url + "/responses", data=b"{}")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(req, timeout=10)
    assert caught.value.code == 429
    assert caught.value.headers["Retry-After"] == "2.5"
    assert json.loads(caught.value.read())["error"]["code"] == "rate_limit_exceeded"


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (Reply.context_window_exceeded(), "context_length_exceeded"),
        (Reply.usage_limit_exceeded(), "insufficient_quota"),
    ],
)
def test_context_window_and_usage_limit_fail_the_response_as_the_api_does(reply: Reply, code: str) -> None:
    with ScriptedModelServer([reply]) as server:
        events = _events(_post(server.url, {})[1])
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == code


def test_cut_after_drops_the_stream_before_its_terminal_event() -> None:
    with ScriptedModelServer([Reply(items=[Text(text="one two three")], cut_after=3)]) as server:
        events = _events(_post(server.url, {})[1])
    assert len(events) == 3
    assert not any(e["type"] in ("response.completed", "response.failed") for e in events)


def test_failed_response() -> None:
    with ScriptedModelServer([Reply(failed=("server_error", "kaput"))]) as server:
        events = _events(_post(server.url, {})[1])
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["message"] == "kaput"


def test_responder_decides_before_queue_and_default_after() -> None:
    def responder(request: RecordedRequest) -> Reply | None:
        return Reply.text("routed") if request.contains("token-7") else None

    with ScriptedModelServer([Reply.text("queued")], responder=responder) as server:
        first = _events(
            _post(server.url, {"input": [{"type": "message", "role": "user", "content": "token-7"}]})[1]
        )
        second = _events(_post(server.url, {})[1])
        third = _events(_post(server.url, {})[1])
        assert server.unscripted == 1
        assert len(server.requests) == 3

    def text_of(events: list[dict[str, Any]]) -> str:
        return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")

    assert text_of(first) == "routed"
    assert text_of(second) == "queued"
    assert "no reply scripted" in text_of(third)


def test_codex_config_points_at_the_server() -> None:
    with ScriptedModelServer() as server:
        config = server.codex_config(provider="local", env_key="K")
        assert config["model_provider"] == "local"
        entry = config["model_providers.local"]
        assert entry["base_url"] == server.url and server.url.startswith("http://127.0.0.1:")
        assert entry["wire_api"] == "responses" and entry["env_key"] == "K"


def test_fixtures(codex_env: Any, scripted_model: ScriptedModelServer) -> None:
    assert codex_env.server is scripted_model
    assert codex_env.env["CODEX_HOME"] == str(codex_env.codex_home)
    assert codex_env.codex_home.is_dir()
    assert codex_env.env[codex_env.env_key]
    assert codex_env.codex_args()[0] == "-c"


async def test_wait_for_request_returns_the_nth_match_while_the_loop_runs() -> None:
    def body(text: str) -> dict[str, Any]:
        return {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}

    with ScriptedModelServer() as server:
        waiter = asyncio.ensure_future(server.wait_for_request(lambda r: r.contains("wanted"), count=2))
        for text in ("other", "wanted one", "wanted two"):
            await asyncio.to_thread(_post, server.url, body(text))
        found = await waiter
    assert found.contains("wanted two")


async def test_wait_for_request_gives_up_when_the_server_stops_or_the_wait_is_cancelled() -> None:
    with ScriptedModelServer() as server:
        cancelled = asyncio.ensure_future(server.wait_for_request())
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await asyncio.shield(cancelled)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        stopped = asyncio.ensure_future(server.wait_for_request())
        server.stop()
        with pytest.raises(RuntimeError, match="gave up"):
            await stopped
