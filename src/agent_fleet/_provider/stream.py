"""A per-turn event stream: a deque with one reader, closed by exactly one terminal event.

Theory of operation: producers (the notification handler, the turn timer, ``stop()``, crash handling)
may race in any order. ``finish(event)`` is the only way to close the stream; the first call wins and
returns True, later calls return False and are no-ops, and nothing is appended after it. ``push``
never blocks (used for synthetic and terminal events); ``push_bounded`` waits for room when a bound is
set, so only the producer of this one stream is slowed by a slow consumer.

Once the reader has taken the terminal event the stream remembers it: ``result()`` answers from it
again (a ``wait()`` after ``events()``), and a second ``iterate()`` is a ``UsageError`` rather than a
reader waiting forever on a stream that has ended.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable

from agent_fleet.errors import TurnFailed, UsageError
from agent_fleet.events import Error, Event, Result

# Per event, `type(e) in TERMINAL_TYPES` costs half an isinstance check; only our mappers create
# terminal events, and never subclasses of them.
TERMINAL_TYPES: frozenset[type[Event]] = frozenset({Result, Error})


class EventStream:
    __slots__ = ("_bound", "_delivered", "_done", "_items", "_space", "_waiter")

    def __init__(self, bound: int | None = None) -> None:
        self._items: deque[Event] = deque()
        self._bound = bound
        self._done = False
        self._waiter: asyncio.Future[None] | None = None
        self._space: asyncio.Future[None] | None = None
        self._delivered: Result | Error | None = None  # the terminal event, once the reader took it

    @property
    def done(self) -> bool:
        """True once the terminal event has been pushed."""
        return self._done

    def push(self, event: Event) -> bool:
        """Append a non-terminal event; False (dropped) once the stream is finished."""
        if self._done:
            return False
        self._items.append(event)
        waiter = self._waiter  # _wake() inlined: once per event
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        return True

    async def push_bounded(self, event: Event) -> bool:
        while self._bound is not None and len(self._items) >= self._bound and not self._done:
            if self._space is None or self._space.done():
                self._space = asyncio.get_running_loop().create_future()
            await self._space
        return self.push(event)

    def finish(self, event: Result | Error) -> bool:
        """Append the terminal event. Only the first call has an effect."""
        if self._done:
            return False
        self._items.append(event)
        self._done = True
        self._wake()
        if self._space is not None and not self._space.done():
            self._space.set_result(None)
        return True

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Event:
        """The next event, waiting for one. Single reader."""
        while not self._items:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._pop()

    def get_nowait(self) -> Event | None:
        """The next event if one is queued, else None (never waits). Single reader.

        Lets a reader take a burst of queued events without a coroutine call per event.
        """
        return self._pop() if self._items else None

    def _pop(self) -> Event:
        event = self._items.popleft()
        space = self._space
        if space is not None and not space.done():
            space.set_result(None)
        return event

    def drain_nowait(self) -> list[Event]:
        """Everything queued right now."""
        items = list(self._items)
        self._items.clear()
        return items

    async def iterate(self, on_cancel: Callable[[], object]) -> AsyncIterator[Event]:
        """Yield events up to and including the terminal one (a handle's ``events()``).

        If the iterating task is cancelled before the terminal event, ``on_cancel()`` runs (a handle
        stops its turn there) and the cancellation propagates. Raises ``UsageError`` once the terminal
        event was read: the turn's events have all been delivered.
        """
        if self._delivered is not None:
            raise UsageError("events(): this turn already ended and its events were read; send() first")
        items = self._items
        try:
            while True:
                if items:  # get_nowait() inlined: once per event
                    event = items.popleft()
                    space = self._space
                    if space is not None and not space.done():
                        space.set_result(None)
                else:
                    event = await self.get()
                if type(event) in TERMINAL_TYPES:
                    self._delivered = event  # type: ignore[assignment]  # Result | Error, by the test
                    yield event
                    return
                yield event
        except asyncio.CancelledError:
            if not self._done:
                on_cancel()
            raise

    async def result(self, on_cancel: Callable[[], object] | None = None) -> Result:
        """Drain to the terminal event (a handle's ``wait()``): its ``Result``, or ``TurnFailed``.

        Answers from the remembered terminal when it was already read. If the waiting task is
        cancelled before the terminal event, ``on_cancel()`` runs when given.
        """
        terminal = self._delivered
        try:
            while terminal is None:
                event = await self.get()
                if isinstance(event, Result | Error):
                    terminal = self._delivered = event
        except asyncio.CancelledError:
            if on_cancel is not None and not self._done:
                on_cancel()
            raise
        if isinstance(terminal, Error):
            raise TurnFailed(terminal)
        return terminal
