"""The dashboard's live updates: ``GET /v1/updates``, server-sent events of what changed on the daemon.

Each update is one SSE event whose name says what it is and whose ``data`` is a JSON object:

- ``session``: a session's row as ``GET /v1/sessions`` lists it, whenever it may have changed (it
  started, its state, step, usage, model or clients changed); coalesced: a session changing many times
  within ``interval`` seconds is sent once, as it is at the end;
- ``batch``: a batch as ``GET /v1/batches`` lists it (with its first tasks), coalesced the same way;
- ``approval``: a request parked for a person, with its context (as ``GET /v1/approvals``);
- ``approval_decided``: ``{"approval_id", "session_id", "decision", "rule", "reason"}``;
- ``note``: a batch runner's note on a session (a gate, a follow-up): ``{"session_id", "after", "at",
  "subtype", "data"}``;
- ``reset``: the reader missed updates this daemon no longer keeps (or it was restarted): read the
  state again (the dashboard reloads).

Every update has an id, counted by this daemon process. A reader that reconnects with ``Last-Event-ID``
(or ``?after=N``) gets what it missed from the last ``keep`` updates, or a ``reset``. ``?session=ID``
keeps one session's own updates (its row, notes and approvals): a session page's feed.

Nobody reading costs nothing: while no reader is connected (nor expected: a page was just served, or a
reader just left, within ``grace`` seconds) updates are not built, and a reader that comes back later
gets a ``reset``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

__all__ = ["Feed", "Update"]

RowOf = Callable[[str], dict[str, Any] | None]
_RESET: Final = b"{}"


@dataclass(frozen=True, slots=True)
class Update:
    seq: int
    kind: str
    session: str | None
    data: bytes

    def sse(self) -> bytes:
        return b"id: %d\nevent: %s\ndata: %s\n\n" % (self.seq, self.kind.encode(), self.data)


class Feed:
    """The daemon's updates (see the module docstring). ``session_row``/``batch_row`` give a row by id
    (None: it is gone); ``interval``: seconds rows are coalesced over."""

    def __init__(
        self,
        *,
        session_row: RowOf,
        batch_row: RowOf,
        interval: float = 0.25,
        keep: int = 2000,
        grace: float = 30.0,
    ) -> None:
        self._rows: dict[str, RowOf] = {"session": session_row, "batch": batch_row}
        self.interval = interval
        self.grace = grace
        self.seq = 0
        self._kept: deque[Update] = deque(maxlen=keep)
        self._gap = 0  # updates up to this id were not built (nobody was reading)
        self._dirty: dict[str, set[str]] = {"session": set(), "batch": set()}
        self._timer: asyncio.TimerHandle | None = None
        self._changed = asyncio.Event()
        self._encode = msgspec.json.Encoder().encode
        self.readers = 0
        self._wanted_until = 0.0
        self.closed = False

    # -- writing -----------------------------------------------------------------------------------

    def expect_reader(self) -> None:
        """A page that will read the feed was served: keep building updates for a while."""
        self._wanted_until = time.monotonic() + self.grace

    def _wanted(self) -> bool:
        if self.readers or time.monotonic() < self._wanted_until:
            return True
        self._gap = self.seq = self.seq + 1  # whoever reads later missed something: a reset
        return False

    def session(self, session_id: str) -> None:
        """Session ``session_id`` may have changed: its row goes out within ``interval``."""
        self._mark("session", session_id)

    def batch(self, batch_id: str) -> None:
        self._mark("batch", batch_id)

    def _mark(self, kind: str, key: str) -> None:
        if self.closed:
            return
        self._dirty[kind].add(key)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.interval, self.flush)

    def flush(self) -> None:
        """Send the rows of what changed (the timer does; a test may call it)."""
        self._timer = None
        if not self._wanted():
            for keys in self._dirty.values():
                keys.clear()
            return
        for kind, keys in self._dirty.items():
            taken, self._dirty[kind] = keys, set()
            for key in sorted(taken):
                row = self._rows[kind](key)
                if row is not None:
                    self._add(kind, row, key if kind == "session" else None)
        self._wake()

    def publish(self, kind: str, data: dict[str, Any], *, session: str | None = None) -> None:
        """An update that goes out at once (``approval``, ``approval_decided``, ``note``)."""
        if self.closed or not self._wanted():
            return
        self._add(kind, data, session)
        self._wake()

    def _add(self, kind: str, data: dict[str, Any], session: str | None) -> None:
        self.seq += 1
        self._kept.append(Update(self.seq, kind, session, self._encode(data)))

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def close(self) -> None:
        """End every reader (the daemon is draining)."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake()

    # -- reading -----------------------------------------------------------------------------------

    async def read(self, after: int, *, session: str | None = None) -> AsyncIterator[list[Update]]:
        """Batches of updates after ``after`` (of ``session`` only, when given), until ``close``. The
        first batch is a ``reset`` when the updates after ``after`` are no longer all here."""
        self.readers += 1
        try:
            cursor = after
            oldest = self._kept[0].seq if self._kept else self.seq + 1
            if after > self.seq or after < self._gap or after < oldest - 1:
                cursor = self.seq  # (before the yield: what comes while the reader handles it is sent)
                yield [Update(cursor, "reset", session, _RESET)]
            while not self.closed:
                changed = self._changed
                batch: list[Update] = []
                if self._kept and cursor < self.seq:
                    if cursor + 1 < self._kept[0].seq or cursor < self._gap:  # it fell too far behind
                        cursor = self.seq
                        yield [Update(cursor, "reset", session, _RESET)]
                        continue
                    start = cursor + 1 - self._kept[0].seq
                    for index in range(start, len(self._kept)):
                        update = self._kept[index]
                        if session is None or update.session == session:
                            batch.append(update)
                    cursor = self.seq
                if batch:
                    yield batch
                    continue
                await changed.wait()
        finally:
            self.readers -= 1
            self.expect_reader()  # it may be a page reconnecting
