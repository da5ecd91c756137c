"""The sans-I/O ``codex exec --json`` parser: recorded real lines in, events out; never raises."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.depth import examples

from agent_fleet.codex._exec_events import ExecEventParser, StderrRefusals, classify_failure, sandbox_refusal
from agent_fleet.events import (
    AssistantMessage,
    Error,
    Event,
    Plan,
    PlanStep,
    Reasoning,
    Result,
    SubAgent,
    System,
    TokenUsage,
    ToolResult,
    ToolUse,
    UnknownEvent,
)

# Recorded from codex-cli 0.163.0 (`codex exec --json` against the scripted model server).
THREAD = '{"type":"thread.started","thread_id":"01a201b6-ecac-7f53-8e04-e83213b26058"}'
TURN = '{"type":"turn.started"}'
CMD_STARTED = (
    '{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":'
    '"/bin/bash -lc \'echo hi\'","aggregated_output":"","exit_code":null,"status":"in_progress"}}'
)
CMD_DONE = (
    '{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":'
    '"/bin/bash -lc \'echo hi\'","aggregated_output":"hi\\n","exit_code":0,"status":"completed"}}'
)
CMD_FAILED = (
    '{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":'
    '"/bin/bash -lc \'touch f.txt && echo ok\'","aggregated_output":"touch: cannot touch \'f.txt\': '
    'Read-only file system\\n","exit_code":1,"status":"failed"}}'
)
MESSAGE = '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"done"}}'
REASONING = '{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"thinking hard"}}'
PATCH_STARTED = (
    '{"type":"item.started","item":{"id":"item_1","type":"file_change","changes":'
    '[{"path":"/tmp/w/hello.txt","kind":"add"}],"status":"in_progress"}}'
)
PATCH_DONE = (
    '{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":'
    '[{"path":"/tmp/w/hello.txt","kind":"add"}],"status":"completed"}}'
)
ERROR_ITEM = (
    '{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Codex is ignoring 1 '
    'unrecognized configuration setting."}}'
)
COMPLETED = (
    '{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":4,'
    '"cache_write_input_tokens":0,"output_tokens":3,"reasoning_output_tokens":1}}'
)
HIGH_DEMAND = "We\u2019re currently experiencing high demand, which may cause temporary errors."
STREAM_ERROR_500 = json.dumps({"type": "error", "message": HIGH_DEMAND})
FAILED_500 = json.dumps({"type": "turn.failed", "error": {"message": HIGH_DEMAND}})
RECONNECTING = (
    '{"type":"error","message":"Reconnecting... 2/5 (stream disconnected before completion: '
    'failed to lookup address information: Name does not resolve)"}'
)
MISSING_KEY = '{"type":"error","message":"Missing environment variable: `AGENT_FLEET_SCRIPTED_API_KEY`."}'
FAILED_MISSING_KEY = (
    '{"type":"turn.failed","error":{"message":"Missing environment variable: '
    '`AGENT_FLEET_SCRIPTED_API_KEY`."}}'
)
FAILED_401 = (
    '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: bad key, '
    'url: http://127.0.0.1:46155/v1/responses"}}'
)
FAILED_429 = (
    '{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}'
)
# From the schema in codex-rs/exec/src/exec_events.rs (not produced offline by 0.163.0).
TODO = (
    '{"type":"item.updated","item":{"id":"item_5","type":"todo_list","items":'
    '[{"text":"write code","completed":true},{"text":"test it","completed":false}]}}'
)
MCP_STARTED = (
    '{"type":"item.started","item":{"id":"item_7","type":"mcp_tool_call","server":"docs","tool":"search",'
    '"arguments":{"q":"x"},"result":null,"error":null,"status":"in_progress"}}'
)
MCP_DONE = (
    '{"type":"item.completed","item":{"id":"item_7","type":"mcp_tool_call","server":"docs","tool":"search",'
    '"arguments":{"q":"x"},"result":{"content":[{"type":"text","text":"hit"}],"structured_content":null},'
    '"error":null,"status":"completed"}}'
)
MCP_FAILED = (
    '{"type":"item.completed","item":{"id":"item_8","type":"mcp_tool_call","server":"docs","tool":"search",'
    '"arguments":{},"result":null,"error":{"message":"tool crashed"},"status":"failed"}}'
)
WEB_SEARCH = (
    '{"type":"item.completed","item":{"id":"item_9","type":"web_search","id":"item_9","query":"asyncio",'
    '"action":{"type":"search","query":"asyncio"}}}'
)

SID = "01a201b6-ecac-7f53-8e04-e83213b26058"


def parse(*lines: str, **kw: Any) -> tuple[ExecEventParser, list[Event]]:
    parser = ExecEventParser(**kw)
    events: list[Event] = []
    for line in lines:
        events += parser.feed((line + "\n").encode())
    events += parser.close()
    return parser, events


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param([THREAD, TURN], [], id="lifecycle-silent"),
        pytest.param(
            [CMD_STARTED, CMD_DONE],
            [
                ToolUse(id="item_0", name="shell", input={"command": "/bin/bash -lc 'echo hi'", "cwd": None}),
                ToolResult(id="item_0", output="hi\n", exit_code=0, is_error=False, status="completed"),
            ],
            id="command",
        ),
        pytest.param(
            [CMD_FAILED],
            [
                ToolUse(
                    id="item_0",
                    name="shell",
                    input={"command": "/bin/bash -lc 'touch f.txt && echo ok'", "cwd": None},
                ),
                ToolResult(
                    id="item_0",
                    output="touch: cannot touch 'f.txt': Read-only file system\n",
                    exit_code=1,
                    is_error=True,
                    status="failed",
                ),
                # codex's sandbox stopped it: a notice says so (issue 16)
                System(
                    subtype="codex_refused",
                    data={
                        "kind": "sandbox",
                        "item_id": "item_0",
                        "command": "/bin/bash -lc 'touch f.txt && echo ok'",
                        "message": "touch: cannot touch 'f.txt': Read-only file system",
                    },
                ),
            ],
            id="command-completed-only",
        ),
        pytest.param([MESSAGE], [AssistantMessage(text="done", item_id="item_1")], id="agent-message"),
        pytest.param([REASONING], [Reasoning(text="thinking hard", item_id="item_0")], id="reasoning"),
        pytest.param(
            [PATCH_STARTED, PATCH_DONE],
            [
                ToolUse(
                    id="item_1",
                    name="apply_patch",
                    input={"changes": [{"path": "/tmp/w/hello.txt", "kind": "add"}]},
                ),
                ToolResult(id="item_1", status="completed", is_error=False),
            ],
            id="file-change",
        ),
        pytest.param(
            [ERROR_ITEM],
            [
                System(
                    subtype="error_item",
                    data={"message": "Codex is ignoring 1 unrecognized configuration setting."},
                )
            ],
            id="error-item",
        ),
        pytest.param(
            [TODO, TODO],
            [
                Plan(
                    steps=(
                        PlanStep(step="write code", status="completed"),
                        PlanStep(step="test it", status="pending"),
                    )
                )
            ],
            id="todo-list-deduplicated",
        ),
        pytest.param(
            [MCP_STARTED, MCP_DONE],
            [
                ToolUse(id="item_7", name="mcp:docs/search", input={"arguments": {"q": "x"}}),
                ToolResult(
                    id="item_7",
                    output=json.dumps(
                        {"content": [{"type": "text", "text": "hit"}], "structured_content": None}
                    ),
                    is_error=False,
                    status="completed",
                ),
            ],
            id="mcp",
        ),
        pytest.param(
            [MCP_FAILED],
            [
                ToolUse(id="item_8", name="mcp:docs/search", input={"arguments": {}}),
                ToolResult(id="item_8", output="tool crashed", is_error=True, status="failed"),
            ],
            id="mcp-failed",
        ),
        pytest.param(
            [WEB_SEARCH],
            [
                ToolUse(id="item_9", name="web_search", input={"query": "asyncio"}),
                ToolResult(id="item_9", status="completed"),
            ],
            id="web-search",
        ),
        pytest.param(
            [RECONNECTING],
            [System(subtype="stream_error", data={"message": json.loads(RECONNECTING)["message"]})],
            id="reconnecting",
        ),
    ],
)
def test_recorded_lines(lines: list[str], expected: list[Event]) -> None:
    _, events = parse(*lines)
    assert events == expected


def test_full_turn_ends_with_usage_then_result() -> None:
    parser, events = parse(THREAD, TURN, CMD_STARTED, CMD_DONE, MESSAGE, COMPLETED)
    usage = TokenUsage(
        input_tokens=10, cached_input_tokens=4, output_tokens=3, reasoning_output_tokens=1, total_tokens=13
    )
    assert events[-2:] == [usage, Result(session_id=SID, text="done", usage=usage)]
    assert parser.terminal == events[-1]
    assert parser.finish(0, "") == events[-1]


def test_non_fatal_error_then_completed_is_a_result() -> None:
    _, events = parse(THREAD, TURN, RECONNECTING, MESSAGE, COMPLETED)
    assert isinstance(events[0], System) and events[0].subtype == "stream_error"
    assert isinstance(events[-1], Result) and events[-1].text == "done"
    assert [e for e in events if isinstance(e, Error)] == []


def test_structured_output_is_parsed_only_with_a_schema() -> None:
    answer = '{"type":"item.completed","item":{"id":"m","type":"agent_message","text":"{\\"answer\\": 42}"}}'
    _, events = parse(THREAD, answer, COMPLETED, structured=True)
    assert isinstance(events[-1], Result) and events[-1].structured == {"answer": 42}
    _, events = parse(THREAD, answer, COMPLETED)
    assert isinstance(events[-1], Result) and events[-1].structured is None


@pytest.mark.parametrize(
    ("lines", "code", "retryable"),
    [
        ([STREAM_ERROR_500, FAILED_500], "server_error", True),
        ([FAILED_429], "rate_limited", True),
        ([FAILED_401], "auth_failed", False),
        ([MISSING_KEY, FAILED_MISSING_KEY], "auth_failed", False),
        (['{"type":"turn.failed","error":{"message":"model refused"}}'], "turn_failed", False),
        (['{"type":"turn.failed"}'], "turn_failed", False),
    ],
)
def test_turn_failed_classification(lines: list[str], code: str, retryable: bool) -> None:
    _, events = parse(THREAD, TURN, *lines)
    terminal = events[-1]
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.retryable) == (code, retryable)


def test_an_auth_error_event_makes_a_generic_failure_auth_failed() -> None:
    _, events = parse(THREAD, MISSING_KEY, '{"type":"turn.failed","error":{"message":"turn aborted"}}')
    assert isinstance(events[-1], Error) and events[-1].code == "auth_failed"


def test_classify_failure() -> None:
    assert classify_failure("unexpected status 403 Forbidden") == ("auth_failed", False)
    assert classify_failure("stream disconnected before completion: kaput") == ("connection_failed", True)
    assert classify_failure("You've hit your usage limit (429)") == ("usage_limit_exceeded", False)
    assert classify_failure("exceeded retry limit, last status: 429 Too Many Requests") == (
        "rate_limited",
        True,
    )
    assert classify_failure("unexpected status 503 Service Unavailable: x") == ("server_error", True)
    assert classify_failure("Codex ran out of room in the model's context window.") == (
        "context_window_exceeded",
        False,
    )
    assert classify_failure("unexpected status 404 Not Found: no such model") == ("model_not_found", False)
    assert classify_failure('{"error": {"type": "invalid_request_error", "code": null}}') == (
        "bad_request",
        False,
    )


def test_only_the_first_terminal_counts() -> None:
    parser, events = parse(THREAD, MESSAGE, COMPLETED, FAILED_500, COMPLETED)
    assert sum(isinstance(e, Result | Error) for e in events) == 1
    assert isinstance(parser.terminal, Result)


def test_non_json_and_non_object_lines_are_skipped() -> None:
    _, events = parse("WARNING: proceeding", "", "   ", "[1, 2]", '"text"', "{not json", "{}", MESSAGE)
    # `{}` is an object without a known type: passed through, never dropped silently.
    assert events == [UnknownEvent(raw={}), AssistantMessage(text="done", item_id="item_1")]


def test_unknown_types_become_unknown_events() -> None:
    future = '{"type":"thread.archived","thread_id":"x"}'
    future_item = '{"type":"item.completed","item":{"id":"c","type":"image_generation","status":"x"}}'
    _, events = parse(future, future_item)
    assert events == [UnknownEvent(raw=json.loads(future)), UnknownEvent(raw=json.loads(future_item))]


def test_malformed_known_events_become_unknown_events() -> None:
    bad = '{"type":"item.completed","item":{"id":5,"type":"agent_message"}}'
    _, events = parse(bad, '{"type":"item.started","item":"nope"}')
    assert all(isinstance(e, UnknownEvent) for e in events) and len(events) == 2


def test_lines_split_across_chunks_and_final_line_without_newline() -> None:
    parser = ExecEventParser()
    data = (THREAD + "\n" + MESSAGE + "\n" + COMPLETED).encode()
    events: list[Event] = []
    for i in range(0, len(data), 7):
        events += parser.feed(data[i : i + 7])
    assert not any(isinstance(e, Result) for e in events)  # the last line has no newline yet
    events += parser.close()
    assert isinstance(events[-1], Result) and events[-1].text == "done" and events[-1].session_id == SID


def test_oversize_line_is_a_protocol_error_not_a_crash() -> None:
    parser = ExecEventParser(max_line_bytes=100)
    events = parser.feed(THREAD.encode()[:50])
    events += parser.feed(b"x" * 200)  # over the limit before any newline: nothing more is buffered
    assert len(parser._buffer) == 0
    events += parser.feed(b"y" * 200 + b"\n")
    assert events == [
        Error(
            code="protocol_error",
            message="codex exec emitted a line longer than 100 bytes",
            data={"max_line_bytes": 100},
        )
    ]
    assert parser.terminal == events[0]
    # Parsing goes on after the skipped line (non-terminal events still flow), but no second terminal.
    more = parser.feed((REASONING + "\n" + COMPLETED + "\n").encode())
    assert more[0] == Reasoning(text="thinking hard", item_id="item_0")
    assert not any(isinstance(e, Result) for e in more)


def test_oversize_complete_line_in_one_chunk() -> None:
    parser = ExecEventParser(max_line_bytes=100)
    events = parser.feed(b"z" * 150 + b"\n" + MESSAGE.encode() + b"\n")
    assert isinstance(events[0], Error) and events[0].code == "protocol_error"
    assert events[1] == AssistantMessage(text="done", item_id="item_1")


def test_finish_without_terminal() -> None:
    parser, _ = parse(THREAD, MESSAGE)
    eof = parser.finish(0, "")
    assert isinstance(eof, Error) and eof.code == "protocol_error"

    parser, _ = parse(THREAD)
    exited = parser.finish(1, "Error loading config.toml: unknown variant `bogus`\n")
    assert isinstance(exited, Error) and exited.code == "process_exited"
    assert exited.data["exit_code"] == 1 and "bogus" in exited.data["stderr_tail"]
    assert "unknown variant" in exited.message

    parser, _ = parse(THREAD)
    auth = parser.finish(1, "Error: unexpected status 401 Unauthorized\n")
    assert isinstance(auth, Error) and auth.code == "auth_failed" and not auth.retryable


def test_finish_upgrades_a_generic_failure_when_stderr_shows_auth() -> None:
    parser, _ = parse(THREAD, '{"type":"turn.failed","error":{"message":"turn aborted"}}')
    final = parser.finish(1, "ERROR codex_api: 401 Unauthorized")
    assert isinstance(final, Error) and final.code == "auth_failed"


# --- fuzzing -----------------------------------------------------------------------------------------

_KNOWN_TYPES = [
    "thread.started",
    "turn.started",
    "turn.completed",
    "turn.failed",
    "item.started",
    "item.updated",
    "item.completed",
    "item.plan.delta",
    "error",
    "request_user_input",
]
_ITEM_TYPES = [
    "agent_message",
    "reasoning",
    "plan",
    "command_execution",
    "file_change",
    "mcp_tool_call",
    "web_search",
    "todo_list",
    "error",
    "collab_tool_call",
]
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=6,
)
_keys = st.sampled_from(
    [
        "id",
        "text",
        "command",
        "aggregated_output",
        "exit_code",
        "status",
        "changes",
        "server",
        "tool",
        "arguments",
        "result",
        "error",
        "query",
        "items",
        "message",
        "thread_id",
        "usage",
    ]
)
_item = st.builds(
    lambda fields, kind: {**fields, "type": kind},
    st.dictionaries(_keys, _json | st.text(max_size=5), max_size=8),
    st.sampled_from(_ITEM_TYPES) | _json,
)
_event = st.builds(
    lambda fields, kind, item: {**fields, "type": kind, "item": item},
    st.dictionaries(_keys, _json, max_size=4),
    st.sampled_from(_KNOWN_TYPES) | _json,
    _item | _json,
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=12), st.integers(min_value=1, max_value=64))
def test_arbitrary_bytes_never_raise(chunks: list[bytes], limit: int) -> None:
    parser = ExecEventParser(max_line_bytes=limit)
    events: list[Event] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    events += parser.close()
    assert sum(isinstance(e, Result | Error) for e in events) <= 1
    assert isinstance(parser.finish(0, ""), Result | Error)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(_event, max_size=6))
def test_arbitrary_event_shapes_never_raise(objs: list[dict[str, Any]]) -> None:
    parser = ExecEventParser(structured=True)
    events: list[Event] = []
    for obj in objs:
        events += parser.feed((json.dumps(obj) + "\n").encode())
    assert sum(isinstance(e, Result | Error) for e in events) <= 1
    assert isinstance(parser.finish(1, "stderr"), Result | Error)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=80))
def test_arbitrary_lines_never_raise(line: str) -> None:
    ExecEventParser().feed_line(line)
    ExecEventParser().feed_line("{" + line)


COLLAB_STARTED = (
    '{"type":"item.started","item":{"id":"item_2","type":"collab_tool_call","tool":"spawn_agent",'
    '"sender_thread_id":"t0","receiver_thread_ids":[],"prompt":"find the bug","agents_states":{},'
    '"status":"in_progress"}}'
)
COLLAB_DONE = (
    '{"type":"item.completed","item":{"id":"item_2","type":"collab_tool_call","tool":"spawn_agent",'
    '"sender_thread_id":"t0","receiver_thread_ids":["t1"],"prompt":"find the bug",'
    '"agents_states":{"t1":{"status":"running","message":null}},"status":"completed"}}'
)


def test_collab_tool_calls_are_sub_agent_events() -> None:
    parser = ExecEventParser()
    events = [e for line in (COLLAB_STARTED, COLLAB_DONE) for e in parser.feed_line(line)]
    assert events == [
        SubAgent(item_id="item_2", tool="spawn_agent", status="in_progress", prompt="find the bug"),
        SubAgent(
            item_id="item_2",
            tool="spawn_agent",
            status="completed",
            prompt="find the bug",
            agents={"t1": {"status": "running", "message": None}},
        ),
    ]


def test_cache_write_tokens_are_counted() -> None:
    parser = ExecEventParser()
    line = (
        '{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":4,'
        '"cache_write_input_tokens":6,"output_tokens":3,"reasoning_output_tokens":1}}'
    )
    usage = next(e for e in parser.feed_line(line) if isinstance(e, TokenUsage))
    assert usage.cache_write_input_tokens == 6 and usage.input_tokens == 10


def test_stderr_rejections_become_refusal_events() -> None:
    # codex exec (approval policy "never") logs a rejected escalation on stderr only; lines may split.
    line = (
        b"2026-11-23T08:37:24Z ERROR codex_core::tools::router: error=approval policy is Never; "
        b"reject command \xe2\x80\x94 you cannot ask for escalated permissions\n"
    )
    refusals = StderrRefusals()
    assert refusals.feed(b"WARNING: unrelated\n" + line[:30]) == []
    use, result, notice = refusals.feed(line[30:])
    assert isinstance(use, ToolUse) and use.synthetic and use.name == "approval"
    assert isinstance(result, ToolResult) and result.id == use.id and result.is_error
    assert result.status == "decline" and "escalated permissions" in result.output
    assert notice == System(subtype="codex_refused", data={"kind": "escalation", "message": result.output})
    assert refusals.feed(b"ERROR codex_core::tools::router: error=unrelated failure\n") == []


def test_a_failure_that_is_not_the_sandbox_has_no_refusal_notice() -> None:
    assert sandbox_refusal("i", "false", "") == []
    assert sandbox_refusal("i", "cat x", "cat: x: No such file or directory\n") == []


def test_without_a_sandbox_a_permission_error_is_not_a_refusal() -> None:
    parser = ExecEventParser(sandboxed=False)
    events = parser.feed_line(CMD_FAILED)
    assert not any(isinstance(e, System) for e in events)
    assert any(isinstance(e, System) for e in ExecEventParser().feed_line(CMD_FAILED))
