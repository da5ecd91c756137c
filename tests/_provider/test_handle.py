from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from agent_fleet._provider.handle import StreamedHandle
from agent_fleet._provider.stream import EventStream
from agent_fleet.contract import Handle
from agent_fleet.errors import TurnFailed, UsageError
from agent_fleet.events import Error, Result, TextDelta


class _Turn:
    def __init__(self) -> None:
        self.stream = EventStream()


class _Host:
    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[Any]] = []

    def spawn_task(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self.tasks.append(task)
        return task

    def forget(self, handle: Handle) -> None:
        raise AssertionError("not used by StreamedHandle")

    def rekey(self, handle: Handle, new_id: str) -> None:
        raise AssertionError("not used by StreamedHandle")


class _Handle(StreamedHandle[_Turn]):
    def __init__(self) -> None:
        self._host: _Host = _Host()
        self._turn: _Turn | None = None
        self.prompts: list[str] = []
        self.stopped = 0

    @property
    def session_id(self) -> str:
        return "s1"

    async def _follow_up(self, prompt: str) -> None:
        self.prompts.append(prompt)
        self._turn = _Turn()

    async def inject(self, text: str) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        self.stopped += 1
        if self._turn is not None:
            self._turn.stream.finish(Error(code="cancelled", message="stopped"))


async def test_no_turn_yet_is_a_usage_error() -> None:
    handle = _Handle()
    assert not handle.running
    with pytest.raises(UsageError):
        handle.events()
    with pytest.raises(UsageError):
        await handle.wait()


async def test_send_refused_while_running_then_allowed() -> None:
    handle = _Handle()
    await handle.send("one")
    assert handle.running
    with pytest.raises(UsageError, match="still running"):
        await handle.send("two")
    assert handle._turn is not None
    handle._turn.stream.push(TextDelta(text="hi"))
    handle._turn.stream.finish(Result(session_id="s1", text="done"))
    assert not handle.running  # ended, even though its events were not read yet
    events = [e async for e in handle.events()]
    assert events == [TextDelta(text="hi"), Result(session_id="s1", text="done")]
    await handle.send("two")
    assert handle.prompts == ["one", "two"]


async def test_wait_raises_turn_failed_on_error() -> None:
    handle = _Handle()
    await handle.send("one")
    assert handle._turn is not None
    handle._turn.stream.finish(Error(code="turn_failed", message="boom"))
    with pytest.raises(TurnFailed):
        await handle.wait()


async def test_cancelling_the_reader_stops_the_session() -> None:
    handle = _Handle()
    await handle.send("one")

    async def read() -> None:
        async for _ in handle.events():
            pass

    reader = asyncio.create_task(read())
    await asyncio.sleep(0)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    [stop] = handle._host.tasks
    assert stop.get_name() == "stop:s1"
    await stop
    assert handle.stopped == 1


async def test_send_refuses_a_prompt_that_is_not_text() -> None:
    handle = _Handle()
    with pytest.raises(UsageError, match="not valid text"):
        await handle.send("bad \udcff")
    assert handle.prompts == []
