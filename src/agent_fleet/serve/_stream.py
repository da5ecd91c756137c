"""Reading a session's records as its event stream: from the store (earlier turns, sessions not loaded)
and from memory (the loaded session's current turn), each record once, in order, after a cursor.

A reader is counted on the loaded session it reads (``LiveSession.readers``), so the daemon knows which
running sessions have no client (``Sessions.watch_alone``); a watcher (``client=False``, the dashboard)
is not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from agent_fleet.serve._records import record_type

if TYPE_CHECKING:
    from agent_fleet.serve._sessions import LiveSession, Sessions

Batch = list[tuple[int, bytes]]  # (seq, the record as JSON)


async def read_stream(
    sessions: Sessions, session_id: str, after: int, *, follow: bool, client: bool = True
) -> AsyncIterator[Batch]:
    """Batches of ``(seq, JSON)`` after ``after`` (each batch what was there when it was read), until
    a terminal record (or for ever with ``follow``). The session exists (``Sessions.stream`` checked)."""
    counted: list[LiveSession] = []  # the session object this reader is counted on

    def count(live: LiveSession | None) -> None:
        if not client:
            return
        if counted and (live is None or counted[0] is not live):
            counted[0].readers -= 1
            sessions.watch_alone(counted[0])
            counted.clear()
        if live is not None and not counted:
            live.readers += 1
            sessions.watch_alone(live)
            counted.append(live)

    try:
        async for batch in _stream(sessions, session_id, after, follow=follow, count=count):
            yield batch
    finally:
        count(None)


async def _stream(
    sessions: Sessions,
    session_id: str,
    after: int,
    *,
    follow: bool,
    count: Callable[[LiveSession | None], None],
) -> AsyncIterator[Batch]:
    cursor = after
    while True:
        # Looked up again each time: the session may have been evicted (then it is all in the
        # store) or resumed (a new record list) while this reader waited.
        live = sessions.live.get(session_id)
        count(live)
        # Events before the session's turn in memory are in the store (earlier turns, or turns
        # recorded before this daemon loaded the session).
        upto = live.base if live is not None else None
        batch: Batch = []
        if upto is None or cursor < upto:
            for seq, record in sessions.store.events(session_id, cursor):
                if upto is not None and seq > upto:
                    break
                batch.append((seq, record))
                if record_type(record) in ("Result", "Error") and not follow:
                    yield batch
                    return
            cursor = upto if upto is not None else cursor
        if live is None:
            if batch:
                yield batch
            return
        changed = live.changed
        if cursor < live.base:  # a turn was sent meanwhile: read the store again
            if batch:
                yield batch
            continue
        while cursor < live.last_seq:
            record, terminal = live.records[cursor - live.base]
            cursor += 1
            batch.append((cursor, record))
            if terminal and not follow:
                yield batch
                return
        if batch:
            yield batch
            continue
        if sessions.draining and live.state != "running":
            return
        await changed.wait()
