"""A Ray attempt's outbox: the events a running task queues on its node, handed to the driver in batches.

``NodeRunner.run`` is a streaming generator: while it is suspended at a ``yield`` (Ray is sending the
last batch to the driver) the task goes on and queues more events, and may finish. ``Outbox.batches``
ends only when the work is done *and* every queued event was handed out, so a task's stream always
ends with everything it queued (its ``runner.finished`` last). Pure asyncio: imported by Ray workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

from agent_fleet.runner._delta_redact import DeltaCoalescer
from agent_fleet.runner._types import TaskEvent
from agent_fleet.runner.transcript import Redactor

__all__ = ["Outbox"]


class Outbox:
    """Events queued by ``put`` (coalesced and redacted with the node's ``redactor``), handed out in
    batches by ``batches``. ``redact`` turns an event into its redacted form (``redact_event``)."""

    def __init__(self, redactor: Redactor, redact: Callable[[Any, Redactor], Any]) -> None:
        self._redactor = redactor
        self._redact = redact
        self._deltas = DeltaCoalescer(redactor)  # a node secret split over deltas is redacted whole
        self._pending: list[TaskEvent] = []
        self._ready = asyncio.Event()

    def put(self, task_event: TaskEvent) -> None:
        """Queue one event (the task's ``on_event``)."""
        for streamed in self._deltas.events(task_event):
            self._pending.append(self._redacted(streamed))
        self._ready.set()

    def _redacted(self, task_event: TaskEvent) -> TaskEvent:
        return replace(task_event, event=self._redact(task_event.event, self._redactor))

    async def batches(
        self, work: asyncio.Future[Any], flush_interval: float
    ) -> AsyncIterator[tuple[TaskEvent, ...]]:
        """Batches of queued events while ``work`` runs (bursts gathered for ``flush_interval``), then
        whatever was queued up to its end, text fragments still held included. Returns once ``work``
        is done and nothing is left; the caller then takes ``work``'s result."""
        while True:
            if not work.done():
                waiter = asyncio.get_running_loop().create_task(self._ready.wait())
                try:
                    await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()
            self._ready.clear()
            done = work.done()  # read before handing out: events queued after it were queued before it
            if done:
                self._pending.extend(self._redacted(e) for e in self._deltas.close())
            if self._pending:
                batch = tuple(self._pending)
                self._pending.clear()
                yield batch  # suspended here while Ray sends it: the work may queue more, and end
            if done and not self._pending:
                return
            if not work.done():
                await asyncio.sleep(flush_interval)
