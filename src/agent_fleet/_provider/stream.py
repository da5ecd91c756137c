"""A per-turn event stream: a deque with one reader, closed by exactly one terminal event.

Theory of operation: producers (the notification handler, the turn timer, ``stop()``, crash handling)
may race in any order. ``finish(event)`` is the only way to close the stream; the first call wins and
returns True, later calls return False and are no-ops, and nothing is appended after it.

Producers never wait for the reader, so no backlog builds up upstream (e.g. in a connection's
per-thread queue). ``bound`` keeps a stream nobody reads small (every provider's handle has one,
``DEFAULT_EVENT_BUFFER`` unless its options say otherwise; ``None``: unbounded): past ``bound``
queued events, a ``TextDelta`` or ``ReasoningDelta`` is merged into the queued delta of the same kind
and item right before it (up to ``COALESCE_CHARS`` characters per merged delta, so merging stays
linear), and a ``TokenUsage`` replaces a queued ``TokenUsage`` right before it (they are cumulative).
Nothing is dropped: every other event is still appended, so the queue holds at most ``bound`` + one
per ``COALESCE_CHARS`` of text + the turn's structural events (tool calls, messages: each one a model
round trip). The first merge after the queue was below its bound appends
``System(subtype="events_coalesced")`` first, so a reader sees where deltas start arriving merged.

Once the reader has taken the terminal event the stream remembers it: ``result()`` answers from it
again (a ``wait()`` after ``events()``), and a second ``iterate()`` is a ``UsageError`` rather than a
reader waiting forever on a stream that has ended.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable

from agent_fleet.errors import TurnFailed, UsageError
from agent_fleet.events import Error, Event, ReasoningDelta, Result, System, TextDelta, TokenUsage

# Per event, `type(e) in TERMINAL_TYPES` costs half an isinstance check; only our mappers create
# terminal events, and never subclasses of them.
TERMINAL_TYPES: frozenset[type[Event]] = frozenset({Result, Error})
#: A merged TextDelta grows to at most this many characters; then a new one starts.
COALESCE_CHARS = 4096
#: Queued events past which an unread turn's deltas are merged (a provider option's default). A reader
#: that keeps up never gets near it: a burst the size of one read from a child's pipe is a few hundred
#: events; the queue of a handle nobody reads stays around a megabyte.
DEFAULT_EVENT_BUFFER = 4096


class EventStream:
    __slots__ = ("_bound", "_coalescing", "_delivered", "_done", "_items", "_waiter")

    def __init__(self, bound: int | None = None) -> None:
        self._items: deque[Event] = deque()
        self._bound = bound
        self._done = False
        self._waiter: asyncio.Future[None] | None = None
        self._delivered: Result | Error | None = None  # the terminal event, once the reader took it
        self._coalescing = False  # merging since the queue last was below its bound

    @property
    def done(self) -> bool:
        """True once the terminal event has been pushed."""
        return self._done

    def push(self, event: Event) -> bool:
        """Append a non-terminal event (past the bound: merge it, see above); False (dropped) once the
        stream is finished."""
        if self._done:
            return False
        items = self._items
        bound = self._bound
        if bound is not None and len(items) >= bound:
            self._coalesce(event, bound)
        else:
            if self._coalescing:
                self._coalescing = False
            items.append(event)
        waiter = self._waiter  # _wake() inlined: once per event
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        return True

    def _coalesce(self, event: Event, bound: int) -> None:
        items = self._items
        if not isinstance(event, TokenUsage | TextDelta | ReasoningDelta):
            items.append(event)  # never dropped
            return
        if not self._coalescing:
            self._coalescing = True
            items.append(System(subtype="events_coalesced", data={"bound": bound}))
            items.append(event)
            return
        last = items[-1]
        if isinstance(event, TokenUsage):
            if type(last) is TokenUsage:
                items[-1] = event
                return
        elif (
            isinstance(last, TextDelta | ReasoningDelta)
            and type(last) is type(event)
            and last.item_id == event.item_id
            and len(last.text) + len(event.text) <= COALESCE_CHARS
        ):
            items[-1] = type(event)(text=last.text + event.text, item_id=event.item_id)
            return
        items.append(event)

    def finish(self, event: Result | Error) -> bool:
        """Append the terminal event. Only the first call has an effect."""
        if self._done:
            return False
        self._items.append(event)
        self._done = True
        self._wake()
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
        return self._items.popleft()

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
