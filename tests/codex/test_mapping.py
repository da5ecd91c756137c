"""TurnMapper: app-server notifications -> provider-neutral events (pure, table-driven)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_fleet.codex.mapping import TurnMapper, error_code_for
from agent_fleet.events import (
    AssistantMessage,
    Compaction,
    Error,
    Goal,
    ImageView,
    McpServerStatus,
    Plan,
    PlanStep,
    RateLimits,
    Reasoning,
    Result,
    ReviewMode,
    SubAgent,
    System,
    TextDelta,
    TokenUsage,
    ToolProgress,
    ToolResult,
    ToolUse,
    UnknownEvent,
    WebSearch,
)

CMD = {"type": "commandExecution", "id": "c1", "command": "ls", "cwd": "/w"}


@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        ("item/agentMessage/delta", {"itemId": "m", "delta": "hi"}, [TextDelta(text="hi", item_id="m")]),
        (
            "item/started",
            {"item": CMD},
            [ToolUse(id="c1", name="shell", input={"command": "ls", "cwd": "/w"})],
        ),
        (
            "item/completed",
            {"item": {"type": "agentMessage", "id": "m", "text": "done", "phase": None}},
            [AssistantMessage(text="done", item_id="m")],
        ),
        (
            "item/completed",
            {"item": {"type": "reasoning", "id": "r", "summary": ["think"], "content": []}},
            [Reasoning(text="think", item_id="r")],
        ),
        (
            "turn/plan/updated",
            {"plan": [{"step": "a", "status": "completed"}], "explanation": "why"},
            [Plan(steps=(PlanStep(step="a", status="completed"),), explanation="why")],
        ),
        (
            "thread/tokenUsage/updated",
            {"tokenUsage": {"total": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}, "last": {}}},
            [TokenUsage(input_tokens=3, output_tokens=4, total_tokens=7)],
        ),
        (
            "error",
            {"error": {"message": "Reconnecting... 1/5"}, "willRetry": True},
            [
                System(
                    subtype="stream_retry",
                    data={"message": "Reconnecting... 1/5", "attempt": 1, "max_attempts": 5},
                )
            ],
        ),
        (  # what codex 0.163 sends (seen with the real binary): the cause, its kind, the attempt
            "error",
            {
                "error": {
                    "message": "Reconnecting... 3/5",
                    "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": None}},
                    "additionalDetails": "stream disconnected before completion: stream closed early",
                    "misalignment": None,
                },
                "willRetry": True,
            },
            [
                System(
                    subtype="stream_retry",
                    data={
                        "message": "Reconnecting... 3/5",
                        "cause": "stream disconnected before completion: stream closed early",
                        "kind": "responseStreamDisconnected",
                        "attempt": 3,
                        "max_attempts": 5,
                    },
                )
            ],
        ),
        (
            "error",
            {"error": {"message": "Reconnecting", "codexErrorInfo": "other"}, "willRetry": True},
            [System(subtype="stream_retry", data={"message": "Reconnecting", "kind": "other"})],
        ),
        ("thread/status/changed", {"status": {"type": "idle"}}, []),
        (
            "brand/new/method",
            {"x": 1},
            [UnknownEvent(raw={"method": "brand/new/method", "params": {"x": 1}})],
        ),
        (
            "item/started",
            "not-a-dict",
            [UnknownEvent(raw={"method": "item/started", "params": "not-a-dict"})],
        ),
    ],
)
def test_table(method: str, params: Any, expected: list[object]) -> None:
    assert TurnMapper("s").feed(method, params) == expected


def test_command_result_and_item_only_seen_at_completion() -> None:
    mapper = TurnMapper("s")
    done = {**CMD, "status": "completed", "aggregatedOutput": "a\n", "exitCode": 0}
    assert mapper.feed("item/completed", {"item": done}) == [
        ToolUse(id="c1", name="shell", input={"command": "ls", "cwd": "/w"}),
        ToolResult(id="c1", output="a\n", exit_code=0, is_error=False, status="completed"),
    ]
    failed = {**done, "id": "c2", "exitCode": 2, "status": "failed"}
    assert mapper.feed("item/completed", {"item": failed})[-1].is_error  # type: ignore[union-attr]


def test_file_change_records_paths_for_approvals() -> None:
    mapper = TurnMapper("s")
    item = {
        "type": "fileChange",
        "id": "f",
        "changes": [{"path": "a.py", "kind": {"type": "add"}, "diff": "+x"}],
    }
    [use] = mapper.feed("item/started", {"item": item})
    assert isinstance(use, ToolUse) and use.name == "apply_patch"
    assert mapper.file_changes["f"] == [{"path": "a.py", "kind": "add", "diff": "+x"}]


def test_completed_turn_gives_result_with_text_usage_and_structured_output() -> None:
    mapper = TurnMapper("s", structured=True)
    mapper.feed("item/completed", {"item": {"type": "agentMessage", "id": "m", "text": '{"n": 1}'}})
    mapper.feed("thread/tokenUsage/updated", {"tokenUsage": {"total": {"totalTokens": 9}, "last": {}}})
    [result] = mapper.feed("turn/completed", {"turn": {"id": "t", "status": "completed", "items": []}})
    assert result == Result(
        session_id="s", turn_id="t", text='{"n": 1}', usage=TokenUsage(total_tokens=9), structured={"n": 1}
    )


def test_failed_turn_uses_the_structured_error_info() -> None:
    mapper = TurnMapper("s")
    mapper.feed("error", {"error": {"message": "401", "codexErrorInfo": "unauthorized"}, "willRetry": False})
    [error] = mapper.feed("turn/completed", {"turn": {"id": "t", "status": "failed", "items": []}})
    assert isinstance(error, Error) and error.code == "auth_failed" and not error.retryable
    [cancelled] = TurnMapper("s").feed("turn/completed", {"turn": {"id": "t", "status": "interrupted"}})
    assert isinstance(cancelled, Error) and cancelled.code == "cancelled"


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ("unauthorized", ("auth_failed", False)),
        ("serverOverloaded", ("server_error", True)),
        ("internalServerError", ("server_error", True)),
        ("rateLimitExceeded", ("rate_limited", True)),
        ("contextWindowExceeded", ("context_window_exceeded", False)),
        ("usageLimitExceeded", ("usage_limit_exceeded", False)),
        ("badRequest", ("bad_request", False)),
        ("cyberPolicy", ("turn_failed", False)),
        ("other", ("connection_failed", True)),
        ({"responseStreamConnectionFailed": {"httpStatusCode": 401}}, ("auth_failed", False)),
        ({"responseTooManyFailedAttempts": {"httpStatusCode": 500}}, ("server_error", True)),
        ({"responseTooManyFailedAttempts": {"httpStatusCode": 429}}, ("rate_limited", True)),
        ({"httpConnectionFailed": {"httpStatusCode": 400}}, ("bad_request", False)),
        ({"httpConnectionFailed": {"httpStatusCode": 404}}, ("model_not_found", False)),
        ({"httpConnectionFailed": {"httpStatusCode": 503}}, ("server_error", True)),
        ({"httpConnectionFailed": {"httpStatusCode": None}}, ("connection_failed", True)),
        ({"responseStreamDisconnected": {}}, ("connection_failed", True)),
        # object variants that are not connection failures, without a status: never retried
        ({"activeTurnNotSteerable": {"turnKind": "review"}}, ("turn_failed", False)),
        ({"someKindCodexAddsLater": {}}, ("turn_failed", False)),
        ({"someKindCodexAddsLater": {"httpStatusCode": None}}, ("turn_failed", False)),
        ({"someKindCodexAddsLater": "detail"}, ("turn_failed", False)),
        ({"someKindCodexAddsLater": {"httpStatusCode": 503}}, ("server_error", True)),  # the status decides
        ({"someKindCodexAddsLater": {"httpStatusCode": 400}}, ("bad_request", False)),
        (None, ("turn_failed", False)),
    ],
)
def test_error_classification(info: Any, expected: tuple[str, bool]) -> None:
    assert error_code_for({"message": "m", "codexErrorInfo": info}) == expected


def _api_body(code: str | None) -> str:
    return json.dumps({"error": {"message": "refused", "type": "invalid_request_error", "code": code}})


@pytest.mark.parametrize(
    ("api_code", "expected"),
    [
        (None, ("bad_request", False)),
        ("invalid_value", ("bad_request", False)),
        ("context_length_exceeded", ("context_window_exceeded", False)),
        ("insufficient_quota", ("usage_limit_exceeded", False)),
        ("model_not_found", ("model_not_found", False)),
    ],
)
def test_other_with_an_api_error_body_is_classified_by_the_body(
    api_code: str | None, expected: tuple[str, bool]
) -> None:
    # codex 0.163.0 reports HTTP 400 as "other" with the API's JSON body as the message.
    assert error_code_for({"message": _api_body(api_code), "codexErrorInfo": "other"}) == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)
methods = st.sampled_from(
    [
        "item/started",
        "item/completed",
        "turn/completed",
        "error",
        "turn/plan/updated",
        "thread/tokenUsage/updated",
    ]
)


@given(methods, json_values)
def test_malformed_params_never_raise(method: str, params: Any) -> None:
    TurnMapper("s").feed(method, params)


# -- typed events for what users read (issue 20) ---------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        (
            "item/completed",
            {"turnId": "t", "item": {"type": "contextCompaction", "id": "cc"}},
            [Compaction(item_id="cc", turn_id="t")],
        ),
        ("thread/compacted", {"threadId": "s", "turnId": "t"}, []),  # deprecated twin of the item
        (
            "item/completed",
            {
                "item": {
                    "type": "webSearch",
                    "id": "w",
                    "query": "asyncio",
                    "action": {"type": "search", "query": "asyncio"},
                    "results": [{"title": "docs", "url": "https://docs.python.org"}],
                }
            },
            [
                ToolUse(id="w", name="web_search", input={"query": "asyncio"}),
                ToolResult(id="w", status="completed"),
                WebSearch(
                    item_id="w",
                    query="asyncio",
                    action={"type": "search", "query": "asyncio"},
                    results=({"title": "docs", "url": "https://docs.python.org"},),
                ),
            ],
        ),
        (
            "item/completed",
            {"item": {"type": "imageView", "id": "i", "path": "/w/shot.png"}},
            [ImageView(item_id="i", path="/w/shot.png")],
        ),
        (
            "item/started",
            {
                "item": {
                    "type": "collabAgentToolCall",
                    "id": "c",
                    "tool": "spawnAgent",
                    "status": "inProgress",
                    "senderThreadId": "s",
                    "receiverThreadIds": ["s2"],
                    "prompt": "look",
                    "model": "gpt-5.5",
                    "agentsStates": {},
                }
            },
            [
                SubAgent(
                    item_id="c",
                    tool="spawnAgent",
                    status="inProgress",
                    prompt="look",
                    model="gpt-5.5",
                    agents={"s2": {}},
                )
            ],
        ),
        (
            "item/completed",
            {
                "item": {
                    "type": "collabAgentToolCall",
                    "id": "c",
                    "tool": "wait",
                    "status": "completed",
                    "senderThreadId": "s",
                    "receiverThreadIds": ["s2"],
                    "agentsStates": {"s2": {"status": "completed", "message": "found it"}},
                }
            },
            [
                SubAgent(
                    item_id="c",
                    tool="wait",
                    status="completed",
                    agents={"s2": {"status": "completed", "message": "found it"}},
                )
            ],
        ),
        (
            "item/completed",
            {
                "item": {
                    "type": "subAgentActivity",
                    "id": "a",
                    "kind": "started",
                    "agentThreadId": "s3",
                    "agentPath": "/w",
                    "model": None,
                }
            },
            [SubAgent(item_id="a", tool="started", agents={"s3": {"path": "/w"}})],
        ),
        (
            "item/completed",
            {"item": {"type": "enteredReviewMode", "id": "r", "review": "commit 1a2b3c"}},
            [ReviewMode(entered=True, review="commit 1a2b3c", item_id="r")],
        ),
        (
            "item/completed",
            {"item": {"type": "exitedReviewMode", "id": "r2", "review": "LGTM"}},
            [ReviewMode(entered=False, review="LGTM", item_id="r2")],
        ),
        (
            "item/mcpToolCall/progress",
            {"threadId": "s", "turnId": "t", "itemId": "m", "message": "50%"},
            [ToolProgress(id="m", message="50%")],
        ),
        (
            "mcpServer/startupStatus/updated",
            {"threadId": "s", "name": "docs", "status": "failed", "error": "no such file"},
            [McpServerStatus(name="docs", status="failed", error="no such file", session_id="s")],
        ),
        (
            "account/rateLimits/updated",
            {
                "rateLimits": {
                    "primary": {"usedPercent": 40, "resetsAt": 100},
                    "secondary": {"usedPercent": 91, "resetsAt": 200},
                    "rateLimitReachedType": None,
                }
            },
            [
                RateLimits(
                    used_percent=91.0,
                    resets_at=200.0,
                    reached=False,
                    raw={
                        "primary": {"usedPercent": 40, "resetsAt": 100},
                        "secondary": {"usedPercent": 91, "resetsAt": 200},
                        "rateLimitReachedType": None,
                    },
                )
            ],
        ),
        (
            "configWarning",
            {"summary": "bad key", "details": None},
            [
                System(
                    subtype="warning", data={"method": "configWarning", "summary": "bad key", "details": None}
                )
            ],
        ),
        (
            "skills/changed",
            {},
            [System(subtype="notice", data={"method": "skills/changed"})],
        ),
        (
            "thread/goal/updated",
            {
                "threadId": "s",
                "turnId": "t",
                "goal": {"objective": "o", "status": "active", "tokenBudget": 9},
            },
            [Goal(objective="o", status="active", token_budget=9)],
        ),
        ("thread/goal/cleared", {"threadId": "s"}, [Goal(cleared=True)]),
        (
            "thread/prediction/updated",
            {"threadId": "s", "turnId": "t"},
            [
                UnknownEvent(
                    raw={"method": "thread/prediction/updated", "params": {"threadId": "s", "turnId": "t"}}
                )
            ],
        ),
    ],
)
def test_typed_events(method: str, params: Any, expected: list[object]) -> None:
    mapper = TurnMapper("s")
    mapper.turn_id = "t"
    assert mapper.feed(method, params) == expected


def test_rate_limit_reached() -> None:
    [limits] = TurnMapper("s").feed(
        "account/rateLimits/updated", {"rateLimits": {"rateLimitReachedType": "rateLimitReached"}}
    )
    assert isinstance(limits, RateLimits) and limits.reached and limits.used_percent is None


def test_token_usage_per_turn_and_context_window() -> None:
    before = TokenUsage(input_tokens=100, output_tokens=10, total_tokens=110)
    mapper = TurnMapper("s", baseline=before)
    usage = {
        "total": {"inputTokens": 150, "outputTokens": 30, "totalTokens": 180, "cacheWriteInputTokens": 7},
        "last": {"inputTokens": 50, "outputTokens": 20, "totalTokens": 70},
        "modelContextWindow": 272000,
    }
    [event] = mapper.feed("thread/tokenUsage/updated", {"tokenUsage": usage})
    assert event == TokenUsage(
        input_tokens=150,
        output_tokens=30,
        total_tokens=180,
        cache_write_input_tokens=7,
        turn=TokenUsage(input_tokens=50, output_tokens=20, total_tokens=70, cache_write_input_tokens=7),
        context_window=272000,
    )
    completed = mapper.feed("turn/completed", {"turn": {"id": "t", "status": "completed"}})
    assert completed == [Result(session_id="s", turn_id="t", usage=event)]


def test_usage_without_a_baseline_has_no_turn_share() -> None:
    [event] = TurnMapper("s").feed(
        "thread/tokenUsage/updated", {"tokenUsage": {"total": {"totalTokens": 5}, "last": {}}}
    )
    assert isinstance(event, TokenUsage) and event.turn is None and event.context_window is None


def test_tools_running_while_a_tool_or_reasoning_item_is_open() -> None:
    mapper = TurnMapper("s")
    assert not mapper.tools_running
    mapper.feed("item/started", {"item": {"type": "reasoning", "id": "r"}})
    assert mapper.tools_running
    mapper.feed("item/completed", {"item": {"type": "reasoning", "id": "r", "summary": ["x"]}})
    assert not mapper.tools_running
    mapper.feed("item/started", {"item": {"type": "commandExecution", "id": "c", "command": "make"}})
    assert mapper.tools_running
    mapper.feed("item/completed", {"item": {"type": "commandExecution", "id": "c", "command": "make"}})
    assert not mapper.tools_running


_REFUSED = st.sampled_from([(401, "auth_failed"), (403, "auth_failed"), (404, "model_not_found")])
_KINDS = st.sampled_from(
    ["httpConnectionFailed", "responseStreamConnectionFailed", "responseStreamDisconnected",
     "responseTooManyFailedAttempts"]
) | st.text(min_size=1, max_size=12)  # fmt: skip


@given(_REFUSED, _KINDS, st.text(max_size=30))
def test_an_authentication_or_not_found_status_is_never_retried_whatever_the_kind(
    refused: tuple[int, str], kind: str, text: str
) -> None:
    """Issue 32: whatever variant a codex version wraps the status in, or when it names it only in the
    message of its catch-all ``"other"`` (before 0.163), a refused key or a missing model is not retried."""
    status, code = refused
    as_object = {"message": text, "codexErrorInfo": {kind: {"httpStatusCode": status}}}
    as_other = {"message": f"unexpected status {status} {text}", "codexErrorInfo": "other"}
    assert error_code_for(as_object) == (code, False)
    assert error_code_for(as_other) == (code, False)


_RETRIED_KINDS = {
    "rateLimitExceeded",
    "serverOverloaded",
    "internalServerError",
    "other",
    "httpConnectionFailed",
    "responseStreamConnectionFailed",
    "responseStreamDisconnected",
    "responseTooManyFailedAttempts",
}


@given(st.text(min_size=1, max_size=20).filter(lambda k: k not in _RETRIED_KINDS), st.text(max_size=30))
def test_a_kind_codex_adds_later_is_never_retried_without_a_status(kind: str, text: str) -> None:
    for info in (kind, {kind: {}}, {kind: {"httpStatusCode": None}}, {kind: "detail"}):
        assert error_code_for({"message": text, "codexErrorInfo": info})[1] is False, info
