"""Streamed deltas, redacted as a whole: what a transcript or the ``--json`` stream writes of them.

A ``TextDelta`` is a few characters of a message; a secret or the context that marks it (``Bearer``,
``password:``) is usually split over several. ``DeltaCoalescer.events(task_event)`` therefore holds
delta text back (``agent_fleet._redact.FragmentRedactor``: a line at a time, a private key block
whole) and returns the events to write: a ``TextDelta`` with the released text, redacted, when there
is some; any other event of the same task and source first releases what its deltas held (as a
``TextDelta`` stamped like that event), so the order of text and events is kept. ``close()`` returns
what is still held. Other events pass unchanged (the writer redacts them whole).
"""

from __future__ import annotations

import time
from dataclasses import replace

from agent_fleet._redact import FragmentRedactor, Redactor
from agent_fleet.events import Error, Result, TextDelta
from agent_fleet.runner._types import Source, TaskEvent

__all__ = ["DeltaCoalescer"]


_Key = tuple[str, Source, str | None]  # task id, source, item id


class DeltaCoalescer:
    def __init__(self, redactor: Redactor) -> None:
        self._fragments: FragmentRedactor[_Key] = FragmentRedactor(redactor)

    def events(self, task_event: TaskEvent) -> list[TaskEvent]:
        event = task_event.event
        if isinstance(event, TextDelta):
            key = (task_event.task_id, task_event.source, event.item_id)
            text = self._fragments.feed(key, event.text)
            return [replace(task_event, event=TextDelta(text=text, item_id=event.item_id))] if text else []
        out = self._release(task_event, final=isinstance(event, Result | Error))
        out.append(task_event)
        return out

    def close(self) -> list[TaskEvent]:
        """Everything still held, as ``TextDelta`` events (the stream ended without another event)."""
        out: list[TaskEvent] = []
        for key in self._fragments.streams():
            task_id, source, item_id = key
            text = self._fragments.flush(key)
            if text:
                delta = TextDelta(text=text, item_id=item_id)
                out.append(TaskEvent(task_id=task_id, source=source, event=delta, time=time.time()))
            self._fragments.forget(key)
        return out

    def _release(self, task_event: TaskEvent, *, final: bool) -> list[TaskEvent]:
        out: list[TaskEvent] = []
        for key in self._fragments.streams():
            task_id, source, item_id = key
            if (task_id, source) != (task_event.task_id, task_event.source):
                continue
            text = self._fragments.flush(key)
            if text:
                out.append(replace(task_event, event=TextDelta(text=text, item_id=item_id)))
            if final:
                self._fragments.forget(key)
        return out
