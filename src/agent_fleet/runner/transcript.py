"""Transcripts: every event of a task as one JSON line, with secrets redacted.

A record is ``{"ts": <ISO 8601 UTC>, "task_id": ..., "source": "agent"|"review"|"runner",
"type": <event class name>, **dataclasses.asdict(event)}``. Lines are flushed as they are written, so
a transcript is readable while the task runs and complete up to the last event if the process dies.

Transcripts are lean by default (see ``agent_fleet.runner._lean``): streamed ``TextDelta`` fragments
are written as the message they build and a turn's diff snapshots once, before its terminal event, so
a message still streaming when the process dies is not in the file; ``raw_deltas=True`` writes one
record per event instead.

Redaction (``Redactor``) replaces, in every string of a record (keys kept, values walked recursively):

- values of environment variables whose name contains ``KEY``, ``TOKEN``, ``SECRET`` or ``PASSWORD``
  (case-insensitive; values shorter than 6 characters are left alone: they are not secrets and would
  redact ordinary words);
- OpenAI/Anthropic-style API keys (``sk-...``), ``Bearer <token>`` and the value of an
  ``Authorization`` header or field;
- the whole value of a mapping key named like a secret (``api_key``, ``authorization``, ``*token*``...).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Self

from agent_fleet.runner._lean import LeanStream
from agent_fleet.runner._types import TaskEvent

__all__ = ["REDACTED", "Redactor", "TranscriptWriter", "event_record"]

REDACTED: Final = "[REDACTED]"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
_SECRET_FIELD = re.compile(
    r"^(authorization|api[_-]?key|.*(secret|token|password|passwd).*|.*_key)$", re.IGNORECASE
)
_MIN_ENV_SECRET = 6
_PATTERNS: Final = (
    re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-]{7,}"),
    re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=\-]{6,}"),
    # The value: an optional scheme word (Basic, Bearer, token...) and the credential after it.
    re.compile(r"(?i)\b(authorization)(\"?\s*[:=]\s*\"?)(?:[A-Za-z]+ +)?[^\s\"',;}]+"),
)


class Redactor:
    """Replaces secrets in strings and JSON-like values. Built once from an environment snapshot."""

    def __init__(self, environ: Mapping[str, str] | None = None, *, extra: tuple[str, ...] = ()) -> None:
        env = os.environ if environ is None else environ
        secrets = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_ENV_SECRET}
        secrets.update(s for s in extra if s)
        # Longest first, so a secret containing another is replaced whole.
        self._secrets = sorted(secrets, key=len, reverse=True)

    def text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        text = _PATTERNS[0].sub(REDACTED, text)
        text = _PATTERNS[1].sub(lambda m: f"{m.group(1)} {REDACTED}", text)
        return _PATTERNS[2].sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)

    def value(self, value: Any) -> Any:
        """``value`` with every string redacted; mapping values under secret-like keys replaced whole."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            for k, v in value.items():
                if isinstance(k, str) and _SECRET_FIELD.match(k) and isinstance(v, str) and v:
                    out[k] = REDACTED
                else:
                    out[k] = self.value(v)
            return out
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


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
    for key, value in fields.items():
        record[key if key not in record else f"event_{key}"] = value
    return redactor.value(record) if redactor is not None else record


class TranscriptWriter:
    """Appends redacted records to a JSONL file. Use as a context manager or call ``close()``.

    Lean unless ``raw_deltas`` (see the module docstring); ``close()`` writes what a lean stream still
    holds (the fragments of a turn that never ended)."""

    def __init__(
        self, path: str | os.PathLike[str], *, redactor: Redactor | None = None, raw_deltas: bool = False
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.redactor = redactor if redactor is not None else Redactor()
        self._lean = None if raw_deltas else LeanStream(event_record)
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")

    def write(self, task_event: TaskEvent) -> None:
        if self._file is None:
            return
        if self._lean is None:
            self._line(event_record(task_event, self.redactor))
        else:
            for record in self._lean.feed(task_event):
                self._line(self.redactor.value(record))

    def _line(self, record: dict[str, Any]) -> None:
        assert self._file is not None
        self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            if self._lean is not None:
                for record in self._lean.close():
                    self._line(self.redactor.value(record))
            self._file.close()
            self._file = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
