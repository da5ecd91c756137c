"""Lean transcripts: the records a transcript keeps from a task's event stream.

A turn streams its message as thousands of ``TextDelta`` fragments and codex re-sends the whole turn
diff (a ``Diff`` event) after every step. Written one line each, a 100,000-character message
becomes megabytes and the writer becomes the runner's bottleneck. ``LeanStream`` keeps what a reader
needs instead:

- ``TextDelta`` fragments are held (a list append: the hot path) and written as the message they
  build: the ``AssistantMessage`` that completes them gets ``"deltas": <count>``; fragments no message
  completes (a stopped turn, a provider without final messages) become one ``TextDelta`` record with
  the joined text and ``"deltas": <count>``, written before the next other event.
- ``Result.text`` repeating the turn's last ``AssistantMessage`` is written as ``""`` with
  ``"text_is_last_message": true``.
- diff snapshots (``Diff`` events) are held and the last one is written once,
  before the turn's terminal event, as ``{"type": "TurnDiff", "diff": ..., "snapshots": <count>}``.

Every record is ``event_record``'s shape (``ts``, ``task_id``, ``source``, ``type``, the event's fields)
plus the keys above. Records come out unredacted: the writer redacts them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from agent_fleet.events import AssistantMessage, Diff, Error, Result, TextDelta
from agent_fleet.runner._types import TaskEvent

__all__ = ["LeanStream", "diff_of"]

_NONE: Final[tuple[dict[str, Any], ...]] = ()


def diff_of(task_event: TaskEvent) -> str | None:
    """The diff text of a ``Diff`` snapshot event, else None."""
    event = task_event.event
    return event.diff if type(event) is Diff else None


RecordOf = Callable[[TaskEvent], dict[str, Any]]


@dataclass(slots=True)
class _Deltas:
    first: TaskEvent
    parts: list[str]


@dataclass(slots=True)
class _Diff:
    last: TaskEvent
    diff: str
    count: int


class LeanStream:
    """Feed every ``TaskEvent`` in order to ``feed``; write what it returns; ``close`` at the end.

    ``record_of`` makes a plain record of an event (``transcript.event_record`` without a redactor)."""

    __slots__ = ("_deltas", "_diffs", "_last_message", "_record_of")

    def __init__(self, record_of: RecordOf) -> None:
        self._record_of = record_of
        self._deltas: dict[tuple[str, str, str | None], _Deltas] = {}
        self._diffs: dict[tuple[str, str], _Diff] = {}
        self._last_message: dict[tuple[str, str], str] = {}

    def feed(self, task_event: TaskEvent) -> tuple[dict[str, Any], ...] | list[dict[str, Any]]:
        """The records to write for ``task_event`` (often none)."""
        event = task_event.event
        if type(event) is TextDelta:  # the hot path: no record, no allocation beyond the append
            key = (task_event.task_id, task_event.source, event.item_id)
            held = self._deltas.get(key)
            if held is None:
                self._deltas[key] = _Deltas(task_event, [event.text])
            else:
                held.parts.append(event.text)
            return _NONE
        diff = diff_of(task_event)
        if diff is not None:
            where = (task_event.task_id, task_event.source)
            snapshot = self._diffs.get(where)
            count = 1 if snapshot is None else snapshot.count + 1
            self._diffs[where] = _Diff(task_event, diff, count)
            return _NONE
        out: list[dict[str, Any]] = []
        where = (task_event.task_id, task_event.source)
        if type(event) is AssistantMessage:
            held = self._deltas.pop((task_event.task_id, task_event.source, event.item_id), None)
            self._flush_deltas(out)
            record = self._record_of(task_event)
            if held is not None:
                joined = "".join(held.parts)
                if joined != event.text:  # the message is authoritative; keep what streamed too
                    out.append(self._delta_record(held, joined))
                record["deltas"] = len(held.parts)
            self._last_message[where] = event.text
            out.append(record)
            return out
        self._flush_deltas(out)
        if isinstance(event, Result | Error):
            snapshot = self._diffs.pop(where, None)
            if snapshot is not None:
                out.append(self._diff_record(snapshot))
        record = self._record_of(task_event)
        if type(event) is Result:
            last = self._last_message.pop(where, None)
            if event.text and event.text == last:
                record["text"] = ""
                record["text_is_last_message"] = True
        out.append(record)
        return out

    def close(self) -> list[dict[str, Any]]:
        """Records still held (fragments and diffs of a turn that never ended)."""
        out: list[dict[str, Any]] = []
        self._flush_deltas(out)
        out.extend(self._diff_record(d) for d in self._diffs.values())
        self._diffs.clear()
        return out

    def _flush_deltas(self, out: list[dict[str, Any]]) -> None:
        if self._deltas:
            out.extend(self._delta_record(held, "".join(held.parts)) for held in self._deltas.values())
            self._deltas.clear()

    def _delta_record(self, held: _Deltas, text: str) -> dict[str, Any]:
        record = self._record_of(held.first)
        record["text"] = text
        record["deltas"] = len(held.parts)
        return record

    def _diff_record(self, snapshot: _Diff) -> dict[str, Any]:
        record = self._record_of(snapshot.last)
        record.pop("raw", None)
        record["type"] = "TurnDiff"
        record["diff"] = snapshot.diff
        record["snapshots"] = snapshot.count
        return record
