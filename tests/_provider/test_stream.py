"""EventStream: exactly one terminal event, whoever finishes first; a bounded stream coalesces."""

from __future__ import annotations

import asyncio

import pytest

from agent_fleet._provider.stream import EventStream
from agent_fleet.errors import TurnFailed, UsageError
from agent_fleet.events import Error, Result, TextDelta


async def test_first_finish_wins_and_later_pushes_are_dropped() -> None:
    stream = EventStream()
    assert stream.push(TextDelta(text="a"))
    assert stream.finish(Error(code="cancelled", message="stop"))
    assert not stream.finish(Error(code="app_server_crashed", message="crash"))
    assert not stream.finish(Result(session_id="s"))
    assert not stream.push(TextDelta(text="late"))
    assert await stream.get() == TextDelta(text="a")
    terminal = await stream.get()
    assert isinstance(terminal, Error) and terminal.code == "cancelled"


async def test_terminal_is_remembered_once_read() -> None:
    stream = EventStream()
    stream.push(TextDelta(text="a"))
    error = Error(code="turn_failed", message="x")
    stream.finish(error)
    assert [e async for e in stream.iterate(lambda: None)] == [TextDelta(text="a"), error]
    with pytest.raises(TurnFailed) as info:
        await stream.result()  # a wait() after events(): the same terminal, not a hang
    assert info.value.event is error
    with pytest.raises(UsageError):
        await anext(stream.iterate(lambda: None))  # a second events() of the ended turn


async def test_result_after_result_returns_the_same_result() -> None:
    stream = EventStream()
    result = Result(session_id="s", text="done")
    stream.finish(result)
    assert await stream.result() is result
    assert await stream.result() is result


async def test_cancelled_result_calls_on_cancel_only_while_running() -> None:
    stream = EventStream()
    cancelled: list[str] = []
    waiter = asyncio.get_running_loop().create_task(stream.result(lambda: cancelled.append("stop")))
    await asyncio.sleep(0)  # one loop step: the task starts and blocks on the empty stream
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert cancelled == ["stop"]


def _drain_now(stream: EventStream) -> list[object]:
    return list(stream.drain_nowait())


async def test_below_the_bound_a_push_is_a_plain_append() -> None:
    stream = EventStream(bound=3)
    for t in "ab":
        assert stream.push(TextDelta(text=t, item_id="m"))
    assert _drain_now(stream) == [TextDelta(text="a", item_id="m"), TextDelta(text="b", item_id="m")]


async def test_past_the_bound_deltas_merge_after_one_marker_and_nothing_is_lost() -> None:
    from agent_fleet.events import System, TokenUsage, ToolUse

    stream = EventStream(bound=2)
    for t in "abcdef":
        stream.push(TextDelta(text=t, item_id="m"))
    stream.push(TokenUsage(total_tokens=1))
    stream.push(TokenUsage(total_tokens=2))  # cumulative: replaces the one before it
    stream.push(ToolUse(id="t", name="shell"))  # never merged, never dropped
    stream.push(TextDelta(text="g", item_id="m2"))  # another item: not merged into m
    assert _drain_now(stream) == [
        TextDelta(text="a", item_id="m"),
        TextDelta(text="b", item_id="m"),
        System(subtype="events_coalesced", data={"bound": 2}),
        TextDelta(text="cdef", item_id="m"),
        TokenUsage(total_tokens=2),
        ToolUse(id="t", name="shell"),
        TextDelta(text="g", item_id="m2"),
    ]
    # Drained below the bound: a new episode gets a new marker.
    for t in "hijk":
        stream.push(TextDelta(text=t, item_id="m2"))
    assert [getattr(e, "subtype", getattr(e, "text", None)) for e in _drain_now(stream)] == [
        "h",
        "i",
        "events_coalesced",
        "jk",
    ]


async def test_a_merged_delta_stops_growing_at_the_cap() -> None:
    from agent_fleet._provider.stream import COALESCE_CHARS

    stream = EventStream(bound=1)
    chunk = "x" * 1000
    for _ in range(10):
        stream.push(TextDelta(text=chunk))
    events = _drain_now(stream)
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(texts) == chunk * 10
    assert all(len(t) <= COALESCE_CHARS for t in texts) and len(texts) <= 5


async def test_a_push_past_the_bound_after_finish_is_dropped() -> None:
    stream = EventStream(bound=1)
    stream.finish(Error(code="cancelled", message="x"))
    assert stream.push(TextDelta(text="late")) is False


async def test_reasoning_deltas_merge_like_text_deltas_but_never_into_each_other() -> None:
    from agent_fleet.events import ReasoningDelta, System

    stream = EventStream(bound=1)
    stream.push(ReasoningDelta(text="a", item_id="m"))
    for t in "bc":
        stream.push(ReasoningDelta(text=t, item_id="m"))
    stream.push(TextDelta(text="x", item_id="m"))  # same item, other kind: not merged
    stream.push(TextDelta(text="y", item_id="m"))
    assert _drain_now(stream) == [
        ReasoningDelta(text="a", item_id="m"),
        System(subtype="events_coalesced", data={"bound": 1}),
        ReasoningDelta(text="bc", item_id="m"),
        TextDelta(text="xy", item_id="m"),
    ]


async def test_an_unbounded_stream_never_merges() -> None:
    stream = EventStream(bound=None)
    for t in "abcdef" * 1000:
        stream.push(TextDelta(text=t, item_id="m"))
    assert len(_drain_now(stream)) == 6000


def test_every_provider_bounds_an_unread_handle_by_default() -> None:
    from agent_fleet._provider.stream import DEFAULT_EVENT_BUFFER
    from agent_fleet.claude import ClaudeOptions
    from agent_fleet.codex import CodexOptions

    # the app-server and exec providers take CodexOptions; the Claude provider ClaudeOptions
    assert CodexOptions().event_buffer == ClaudeOptions().event_buffer == DEFAULT_EVENT_BUFFER
    assert 1000 <= DEFAULT_EVENT_BUFFER <= 100_000
