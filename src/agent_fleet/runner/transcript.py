"""Transcripts: every event of a task as one JSON line, with secrets redacted.

A record is ``{"ts": <ISO 8601 UTC>, "task_id": ..., "source": "agent"|"review"|"runner",
"type": <event class name>, **dataclasses.asdict(event)}``. Lines are flushed as they are written, so
a transcript is readable while the task runs and complete up to the last event if the process dies.

Redaction: ``agent_fleet._redact.Redactor`` (re-exported here) replaces secrets in every string of a
record (keys kept, values walked recursively); see that module for what it finds. Streamed
``TextDelta`` text is held back and written a line at a time, redacted as a whole
(``runner._delta_redact``): a secret split over several deltas is found too.
"""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from agent_fleet._redact import REDACTED, Redactor
from agent_fleet.runner._delta_redact import DeltaCoalescer
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
    if redactor is not None:  # the event's fields only: ts, task_id, source and type are the runner's
        fields = redactor.value(fields)
    for key, value in fields.items():
        record[key if key not in record else f"event_{key}"] = value
    return record


class TranscriptWriter:
    """Appends redacted records to a JSONL file. Use as a context manager or call ``close()``."""

    def __init__(self, path: str | os.PathLike[str], *, redactor: Redactor | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.redactor = redactor if redactor is not None else Redactor()
        self._deltas = DeltaCoalescer(self.redactor)  # a secret split over deltas is redacted whole
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")

    def write(self, task_event: TaskEvent) -> None:
        if self._file is None:
            return
        self._write(self._deltas.events(task_event))

    def _write(self, task_events: list[TaskEvent]) -> None:
        assert self._file is not None
        for task_event in task_events:
            line = json.dumps(event_record(task_event, self.redactor), ensure_ascii=False, default=str)
            self._file.write(line + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._write(self._deltas.close())
            self._file.close()
            self._file = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
