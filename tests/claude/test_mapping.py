"""SDK messages -> events (pure: SDK dataclasses in, events out)."""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import (
    AssistantMessage as SDKAssistantMessage,
)
from claude_agent_sdk import (
    RateLimitEvent,
    RateLimitInfo,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from agent_fleet import (
    AssistantMessage,
    Error,
    Reasoning,
    Result,
    System,
    TextDelta,
    TokenUsage,
    ToolResult,
    ToolUse,
)
from agent_fleet.claude.mapping import TurnMapper, token_usage


def _result(**kw: Any) -> ResultMessage:
    base: dict[str, Any] = {
        "subtype": "success",
        "duration_ms": 1,
        "duration_api_ms": 1,
        "is_error": False,
        "num_turns": 1,
        "session_id": "s",
    }
    return ResultMessage(**{**base, **kw})


def _assistant(*blocks: Any, parent: str | None = None, error: Any = None) -> SDKAssistantMessage:
    return SDKAssistantMessage(
        content=list(blocks), model="m", parent_tool_use_id=parent, error=error, message_id="msg_1"
    )


def test_stream_text_deltas_carry_the_message_id() -> None:
    mapper = TurnMapper("s", structured=False)
    start = StreamEvent(uuid="u", session_id="s", event={"type": "message_start", "message": {"id": "msg_9"}})
    delta = StreamEvent(
        uuid="u",
        session_id="s",
        event={"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
    )
    sub = StreamEvent(uuid="u", session_id="s", event=delta.event, parent_tool_use_id="toolu_parent")
    assert mapper.feed(start) == []
    assert mapper.feed(delta) == [TextDelta(text="hi", item_id="msg_9")]
    assert mapper.feed(sub) == []


def test_assistant_blocks() -> None:
    mapper = TurnMapper("s", structured=False)
    events = mapper.feed(
        _assistant(
            ThinkingBlock(thinking="hmm", signature="x"),
            TextBlock(text="hello"),
            ToolUseBlock(id="t1", name="Bash", input={"command": "ls", "description": "list"}),
            ToolUseBlock(id="t2", name="mcp__srv__do", input={"a": 1}),
        )
    )
    assert events == [
        Reasoning(text="hmm", item_id="msg_1"),
        AssistantMessage(text="hello", item_id="msg_1"),
        ToolUse(id="t1", name="shell", input={"command": "ls"}),
        ToolUse(id="t2", name="mcp:srv/do", input={"a": 1}),
    ]


def test_subagent_messages_contribute_tool_calls_only() -> None:
    mapper = TurnMapper("s", structured=False)
    events = mapper.feed(
        _assistant(TextBlock(text="sub text"), ToolUseBlock(id="t9", name="Read", input={}), parent="toolu_a")
    )
    assert events == [ToolUse(id="t9", name="Read", input={})]


def test_tool_results_and_declined_status() -> None:
    mapper = TurnMapper("s", structured=False, declined={"t2"})
    events = mapper.feed(
        UserMessage(
            content=[
                ToolResultBlock(tool_use_id="t1", content="out", is_error=False),
                ToolResultBlock(tool_use_id="t2", content=[{"type": "text", "text": "no"}], is_error=True),
                ToolResultBlock(tool_use_id="t3", content=None, is_error=True),
            ]
        )
    )
    assert events == [
        ToolResult(id="t1", output="out", is_error=False, status="completed"),
        ToolResult(id="t2", output="no", is_error=True, status="declined"),
        ToolResult(id="t3", output="", is_error=True, status="failed"),
    ]
    assert mapper.feed(UserMessage(content="echoed prompt")) == []


def test_success_result_with_usage_and_structured_output() -> None:
    mapper = TurnMapper("s", structured=True, prior_total=100)
    mapper.feed(_assistant(TextBlock(text='{"a": 1}')))
    usage = {"input_tokens": 10, "cache_read_input_tokens": 4, "output_tokens": 3}
    events = mapper.feed(_result(usage=usage, result='{"a": 1}'))
    expected_usage = TokenUsage(input_tokens=14, cached_input_tokens=4, output_tokens=3, total_tokens=117)
    assert events == [
        expected_usage,
        Result(session_id="s", text='{"a": 1}', usage=expected_usage, structured={"a": 1}),
    ]
    assert mapper.total == 117
    structured = TurnMapper("s", structured=True).feed(_result(result="x", structured_output={"b": 2}))
    assert isinstance(structured[-1], Result) and structured[-1].structured == {"b": 2}


def test_error_results_are_classified() -> None:
    mapper = TurnMapper("s", structured=False)
    assert mapper.feed(_assistant(TextBlock(text="Invalid API key"), error="authentication_failed")) == []
    [auth] = mapper.feed(_result(is_error=True, result="Invalid API key", api_error_status=401))
    assert isinstance(auth, Error) and auth.code == "auth_failed" and not auth.retryable
    assert auth.message == "Invalid API key"

    [overloaded] = TurnMapper("s", structured=False).feed(
        _result(is_error=True, result="API Error: overloaded", api_error_status=529)
    )
    assert isinstance(overloaded, Error) and overloaded.code == "server_error" and overloaded.retryable

    [limited] = TurnMapper("s", structured=False).feed(
        _result(is_error=True, result="API Error: 429", api_error_status=429)
    )
    assert isinstance(limited, Error) and limited.code == "rate_limited" and limited.retryable

    bad = TurnMapper("s", structured=False)
    bad.feed(_assistant(TextBlock(text="prompt is too long"), error="invalid_request"))
    [refused] = bad.feed(_result(is_error=True, result="prompt is too long", api_error_status=400))
    assert isinstance(refused, Error) and refused.code == "bad_request" and not refused.retryable

    billing = TurnMapper("s", structured=False)
    billing.feed(_assistant(TextBlock(text="credit balance too low"), error="billing_error"))
    [spent] = billing.feed(_result(is_error=True, result="credit balance too low", api_error_status=400))
    assert isinstance(spent, Error) and spent.code == "usage_limit_exceeded" and not spent.retryable

    [aborted] = TurnMapper("s", structured=False).feed(
        _result(subtype="error_during_execution", is_error=True, terminal_reason="aborted_tools")
    )
    assert isinstance(aborted, Error) and aborted.code == "cancelled"

    [max_turns] = TurnMapper("s", structured=False).feed(
        _result(subtype="error_max_turns", is_error=True, errors=["reached max turns"])
    )
    assert isinstance(max_turns, Error) and max_turns.code == "turn_failed" and not max_turns.retryable
    assert max_turns.message == "reached max turns"


def test_system_messages() -> None:
    mapper = TurnMapper("s", structured=False)
    init = SystemMessage(subtype="init", data={"session_id": "s", "model": "m", "cwd": "/w", "extra": 1})
    assert mapper.feed(init) == [System(subtype="init", data={"session_id": "s", "model": "m", "cwd": "/w"})]
    assert mapper.feed(SystemMessage(subtype="status", data={"status": "requesting"})) == []
    assert mapper.feed(SystemMessage(subtype="compact_boundary", data={"x": 1})) == [
        System(subtype="claude_system", data={"subtype": "compact_boundary", "data": {"x": 1}})
    ]
    limit = RateLimitEvent(
        rate_limit_info=RateLimitInfo(status="allowed", raw={"status": "allowed"}), uuid="u", session_id="s"
    )
    assert mapper.feed(limit) == [System(subtype="rate_limit", data={"status": "allowed"})]


def test_token_usage_tolerates_missing_fields() -> None:
    assert token_usage(None) == TokenUsage()
    assert token_usage({"output_tokens_details": {"thinking_tokens": 2}, "output_tokens": 5}) == TokenUsage(
        output_tokens=5, reasoning_output_tokens=2, total_tokens=5
    )
