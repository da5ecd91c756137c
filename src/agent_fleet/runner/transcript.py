"""Transcripts: every event of a task as one JSON line, with secrets redacted.

A record is ``{"ts": <ISO 8601 UTC>, "task_id": ..., "source": "agent"|"review"|"runner",
"type": <event class name>, **dataclasses.asdict(event)}``. Lines are flushed as they are written, so
a transcript is readable while the task runs and complete up to the last event if the process dies.

Transcripts are lean by default (see ``agent_fleet.runner._lean``): streamed ``TextDelta`` fragments
are written as the message they build and a turn's diff snapshots once, before its terminal event, so
a message still streaming when the process dies is not in the file. ``raw_deltas=True`` writes a
record per event instead, except that streamed text is held back and written a line at a time
(``runner._delta_redact``) so that a secret split over several deltas is still redacted whole.

Redaction: ``agent_fleet._redact.Redactor`` (re-exported here) replaces secrets in every string of a
record (keys kept, values walked recursively); see that module for what it finds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from agent_fleet._redact import REDACTED, Redactor
from agent_fleet.errors import StorageError
from agent_fleet.runner._delta_redact import DeltaCoalescer
from agent_fleet.runner._lean import LeanStream
from agent_fleet.runner._types import TaskEvent

__all__ = ["REDACTED", "Redactor", "TranscriptWriter", "event_record"]


def event_record(task_event: TaskEvent, redactor: Redactor | None = None) -> dict[str, Any]:
    """The JSON-ready transcript record of ``task_event`` (redacted when ``redactor`` is given)."""
    event = task_event.event
    record: dict[str, Any] = {
        "ts": datetime.fromtimestamp(task_event.time, UTC).isoformat(timespec="milliseconds"),
        "task_id": task_event.task_id,
        "source": task_event.source,
        "type": type(event).__name__,
    }
    fields = dataclasses.asdict(event)
    if "agent" in fields and fields["agent"] is None:  # the session's own event: no sub-agent to name
        del fields["agent"]
    if redactor is not None:  # the event's fields only: ts, task_id, source and type are the runner's
        fields = redactor.value(fields)
    for key, value in fields.items():
        record[key if key not in record else f"event_{key}"] = value
    return record


class TranscriptWriter:
    """Appends redacted records to a JSONL file. Use as a context manager or call ``close()``.

    Lean unless ``raw_deltas`` (see the module docstring); ``close()`` writes what a lean stream still
    holds (the fragments of a turn that never ended). A write that fails (a full disk) raises
    ``StorageError`` once, naming the file; the writer then writes nothing more (``failed`` keeps the
    error), so what is on disk stays whole lines."""

    def __init__(
        self, path: str | os.PathLike[str], *, redactor: Redactor | None = None, raw_deltas: bool = False
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.redactor = redactor if redactor is not None else Redactor()
        self._lean = None if raw_deltas else LeanStream(event_record)
        self._deltas = DeltaCoalescer(self.redactor)  # raw: a secret split over deltas is redacted whole
        self.failed: StorageError | None = None
        try:
            self._file: IO[str] | None = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise StorageError(str(self.path), "the transcript", exc) from exc

    def write(self, task_event: TaskEvent) -> None:
        if self._file is None:
            return
        if self._lean is None:
            for streamed in self._deltas.events(task_event):
                self._line(event_record(streamed, self.redactor))
        else:
            for record in self._lean.feed(task_event):
                self._line(self.redactor.value(record))

    def _line(self, record: dict[str, Any]) -> None:
        file = self._file
        if file is None:
            return
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        end = file.tell()
        try:
            file.write(line)
            file.flush()
        except OSError as exc:
            self._fail(exc, end)

    def _fail(self, exc: OSError, end: int) -> None:
        """Give up writing: cut a partial line off (when the disk lets us) and raise ``StorageError``."""
        file, self._file = self._file, None
        self.failed = StorageError(str(self.path), "the transcript", exc)
        with contextlib.suppress(OSError):
            os.truncate(self.path, end)
        with contextlib.suppress(OSError):
            if file is not None:
                file.close()  # (its buffer cannot be flushed: what is left of the line is dropped)
        raise self.failed from exc

    def close(self) -> None:
        """Write what is pending and close the file. Raises ``StorageError`` when that write fails."""
        if self._file is not None:
            try:
                if self._lean is not None:
                    for record in self._lean.close():
                        self._line(self.redactor.value(record))
                else:
                    for streamed in self._deltas.close():
                        self._line(event_record(streamed, self.redactor))
            finally:
                file, self._file = self._file, None
                if file is not None:
                    with contextlib.suppress(OSError):
                        file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
