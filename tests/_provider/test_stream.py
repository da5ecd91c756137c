"""EventStream: exactly one terminal event, whoever finishes first; bounded producers wait."""

from __future__ import annotations

import asyncio

from agent_fleet._provider.stream import EventStream
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
