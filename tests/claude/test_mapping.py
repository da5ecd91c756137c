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
from claude_agent_sdk._internal.message_parser import parse_message

from agent_fleet import (
    AssistantMessage,
    Compaction,
    Error,
    RateLimits,
    Reasoning,
    ReasoningDelta,
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
    denial = {"tool_name": "Bash", "tool_use_id": "toolu_1", "tool_input": {"command": "rm -rf /"}}
    events = mapper.feed(
        _result(
            usage=usage,
            result='{"a": 1}',
            total_cost_usd=0.0123,
            duration_ms=4500,
            permission_denials=[denial],
            model_usage={"claude-x": {"contextWindow": 200000, "inputTokens": 10}},
        )
    )
    turn = TokenUsage(input_tokens=14, cached_input_tokens=4, output_tokens=3, total_tokens=17)
    expected_usage = TokenUsage(
        input_tokens=14,
        cached_input_tokens=4,
        output_tokens=3,
        total_tokens=117,
        turn=turn,
        context_window=200000,
    )
    assert events == [
        expected_usage,
        Result(
            session_id="s",
            text='{"a": 1}',
            usage=expected_usage,
            structured={"a": 1},
            cost_usd=0.0123,
            duration_ms=4500,
            permission_denials=(denial,),
        ),
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
    assert mapper.feed(SystemMessage(subtype="compact_boundary", data={"x": 1})) == [Compaction()]
    assert mapper.feed(SystemMessage(subtype="api_retry", data={"x": 1})) == [
        System(subtype="claude_system", data={"subtype": "api_retry", "data": {"x": 1}})
    ]
    limit = RateLimitEvent(
        rate_limit_info=RateLimitInfo(status="allowed", raw={"status": "allowed"}), uuid="u", session_id="s"
    )
    assert mapper.feed(limit) == [RateLimits(raw={"status": "allowed"})]
    raw = {"status": "rejected", "resetsAt": 1700000000, "utilization": 1.0}
    rejected = RateLimitEvent(
        rate_limit_info=RateLimitInfo(status="rejected", resets_at=1700000000, utilization=1.0, raw=raw),
        uuid="u",
        session_id="s",
    )
    assert mapper.feed(rejected) == [
        RateLimits(used_percent=100.0, resets_at=1700000000.0, reached=True, raw=raw)
    ]


def test_token_usage_tolerates_missing_fields() -> None:
    assert token_usage(None) == TokenUsage(turn=TokenUsage())
    turn = TokenUsage(output_tokens=5, reasoning_output_tokens=2, total_tokens=5)
    assert token_usage({"output_tokens_details": {"thinking_tokens": 2}, "output_tokens": 5}) == TokenUsage(
        output_tokens=5, reasoning_output_tokens=2, total_tokens=5, turn=turn
    )
    written = token_usage({"input_tokens": 1, "cache_creation_input_tokens": 6}, prior_total=10)
    assert written.cache_write_input_tokens == 6 and written.input_tokens == 7 and written.total_tokens == 17


def test_thinking_deltas_stream_as_reasoning_deltas() -> None:
    mapper = TurnMapper("s", structured=False)
    mapper.feed(
        StreamEvent(uuid="u", session_id="s", event={"type": "message_start", "message": {"id": "m"}})
    )
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "hmm"},
    }
    assert mapper.feed(StreamEvent(uuid="u", session_id="s", event=delta)) == [
        ReasoningDelta(text="hmm", item_id="m")
    ]
    sub = StreamEvent(uuid="u", session_id="s", event=delta, parent_tool_use_id="toolu_parent")
    assert mapper.feed(sub) == []


def _cli(message: dict[str, Any]) -> Any:
    """A message as the Claude Code CLI writes it on stdout, parsed by the SDK as the provider reads it."""
    parsed = parse_message(message)
    assert parsed is not None
    return parsed


def test_a_rate_limit_the_turn_was_refused_by_gives_the_retry_its_reset() -> None:
    # Claude Code emits rate_limit_event (subscription limits) in this shape; a 429 then ends the turn.
    # (With an API key it emits none, and passes no Retry-After: see runner/_retry.py.)
    def refused(status: str, resets_at: int | None) -> dict[str, Any]:
        info: dict[str, Any] = {"status": status, "rateLimitType": "five_hour", "utilization": 1.0}
        if resets_at is not None:
            info["resetsAt"] = resets_at
        return {"type": "rate_limit_event", "rate_limit_info": info, "uuid": "u1", "session_id": "s"}

    limited = _result(is_error=True, result="API Error: Request rejected (429)", api_error_status=429)
    mapper = TurnMapper("s", structured=False)
    [limits] = mapper.feed(_cli(refused("rejected", 1_700_000_600)))
    assert isinstance(limits, RateLimits) and limits.reached and limits.resets_at == 1_700_000_600.0
    [error] = mapper.feed(limited)
    assert isinstance(error, Error) and error.code == "rate_limited" and error.retryable
    assert error.data["retry_at"] == 1_700_000_600.0

    # no reset known, or the limit allowed again before the error: no hint
    for events in (
        [refused("rejected", None)],
        [refused("rejected", 1_700_000_600), refused("allowed", None)],
    ):
        mapper = TurnMapper("s", structured=False)
        for event in events:
            mapper.feed(_cli(event))
        [error] = mapper.feed(limited)
        assert isinstance(error, Error) and "retry_at" not in error.data
    # a failure that is not about a limit carries none
    mapper = TurnMapper("s", structured=False)
    mapper.feed(_cli(refused("rejected", 1_700_000_600)))
    [error] = mapper.feed(_result(is_error=True, result="API Error: overloaded", api_error_status=529))
    assert isinstance(error, Error) and error.code == "server_error" and "retry_at" not in error.data
