"""A bounded broadcast log of provider-wide notices, and a bounded backlog of one session's notices.

``NoticeBoard`` keeps the last ``limit`` events posted; every ``follow()`` iterator reads them from the
oldest kept on, then waits for new ones. Nothing a peer sends can grow it: a reader that falls more
than ``limit`` behind skips what was evicted and is told so with one ``System(subtype="notices_dropped",
data={"count": n})``. ``close()`` ends every iterator after what it has not read yet.

``Backlog`` keeps a session's notices that arrived while no turn was running, to be delivered with the
next turn's events (the oldest are dropped past ``limit``, and counted).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator

from agent_fleet.events import Event, System

__all__ = ["Backlog", "NoticeBoard"]


class NoticeBoard:
    def __init__(self, limit: int = 256) -> None:
        self._log: deque[tuple[int, Event]] = deque(maxlen=limit)
        self._seq = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._closed = False

    def post(self, event: Event) -> None:
        """Append ``event`` and wake every reader. A no-op after ``close()``."""
        if self._closed:
            return
        self._seq += 1
        self._log.append((self._seq, event))
        self._wake()

    def close(self) -> None:
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def follow(self) -> AsyncIterator[Event]:
        """Every kept event, then each new one as it is posted, until ``close()``."""
        next_seq = self._log[0][0] if self._log else self._seq + 1
        while True:
            if self._log and self._log[0][0] > next_seq:
                yield System(subtype="notices_dropped", data={"count": self._log[0][0] - next_seq})
                next_seq = self._log[0][0]
            for seq, event in list(self._log):
                if seq >= next_seq:
                    next_seq = seq + 1
                    yield event
            if self._closed and (not self._log or self._log[-1][0] < next_seq):
                return
            if self._log and self._log[-1][0] >= next_seq:
                continue  # posted while we yielded
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter


class Backlog:
    def __init__(self, limit: int = 128) -> None:
        self._events: deque[Event] = deque(maxlen=limit)
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._events)

    def add(self, event: Event) -> None:
        if len(self._events) == self._events.maxlen:
            self.dropped += 1
        self._events.append(event)

    def drain(self) -> list[Event]:
        """The kept events (oldest first), preceded by a ``notices_dropped`` notice when some were lost."""
        events: list[Event] = []
        if self.dropped:
            events.append(System(subtype="notices_dropped", data={"count": self.dropped}))
            self.dropped = 0
        events += self._events
        self._events.clear()
        return events
