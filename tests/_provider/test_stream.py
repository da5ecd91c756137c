"""EventStream: exactly one terminal event, whoever finishes first; bounded producers wait."""

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


async def test_bounded_producer_waits_for_the_consumer_and_finish_releases_it() -> None:
    stream = EventStream(bound=2)
    await stream.push_bounded(TextDelta(text="1"))
    await stream.push_bounded(TextDelta(text="2"))
    blocked = asyncio.create_task(stream.push_bounded(TextDelta(text="3")))
    await asyncio.sleep(0.01)
    assert not blocked.done()
    assert await stream.get() == TextDelta(text="1")
    assert await asyncio.wait_for(blocked, 1)
    waiting = asyncio.create_task(stream.push_bounded(TextDelta(text="4")))
    await asyncio.sleep(0.01)
    stream.finish(Error(code="cancelled", message="x"))
    assert await asyncio.wait_for(waiting, 1) is False  # released, and dropped: the stream is closed


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
