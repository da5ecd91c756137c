"""The daemon's event records, encoded once: what the store keeps and the event stream sends.

A record is the transcript's (``runner.event_record``): ``{"ts", "task_id", "source", "type", <the
event's fields>}``, redacted, one line of JSON. It is made here with msgspec, not with
``dataclasses.asdict`` + ``json.dumps`` (issue 28: ~30 µs an event went to that): the event's fields
come out of ``msgspec.to_builtins``, only its strings and containers are redacted (numbers and flags
hold no secret), the timestamp's date and time are formatted once a second, and a ``TextDelta`` (most
of a turn's events) is written from a prefix encoded once per session.

``DeltaBuffer`` coalesces text deltas as lean transcripts do: consecutive ``TextDelta`` events of one
message that arrive before the session's records are next published (the same turn of the event loop,
as the provider reads them in bursts) become one record with their joined text and ``"deltas": <n>``
(the number of fragments), so the store, the stream and the client handle one record instead of many;
the joined text is also redacted as a whole, so a secret split over those fragments is found.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from agent_fleet._redact import Redactor
from agent_fleet.events import Error, Event, Result, TextDelta

__all__ = ["DeltaBuffer", "RecordEncoder", "record_type"]

_ENVELOPE: Final = frozenset({"ts", "task_id", "source", "type"})
_TYPE: Final = re.compile(rb'"type":\s*"([A-Za-z]+)"')  # the envelope's comes first in every record


def record_type(record: bytes) -> str | None:
    """The event type of a stored record (the first ``"type"`` key: the envelope's)."""
    match = _TYPE.search(record)
    return match.group(1).decode() if match else None


class RecordEncoder:
    """Encodes the records of one daemon (see the module docstring)."""

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._json = msgspec.json.Encoder()
        self._second = -1
        self._date = ""

    def _ts(self, at: float) -> str:
        """``datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")``, cheaper."""
        second = int(at)
        if second != self._second:
            self._second = second
            self._date = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{self._date}.{int((at - second) * 1000):03d}+00:00"

    def encode(self, task_id: str, event: Event, at: float, *, deltas: int = 0) -> bytes:
        if type(event) is TextDelta:
            text = self._redactor.text(event.text)
            head = f'{{"ts":"{self._ts(at)}","task_id":'.encode()
            tail = b',"deltas":%d}' % deltas if deltas > 1 else b"}"
            return b"".join(
                (
                    head,
                    self._json.encode(task_id),
                    b',"source":"agent","type":"TextDelta","text":',
                    self._json.encode(text),
                    b',"item_id":',
                    self._json.encode(event.item_id),
                    tail,
                )
            )
        fields: dict[str, Any] = msgspec.to_builtins(event)
        redacted: dict[str, Any] = self._redactor.value(fields)
        record: dict[str, Any] = {
            "ts": self._ts(at),
            "task_id": task_id,
            "source": "agent",
            "type": type(event).__name__,
        }
        for key, value in redacted.items():
            record[key if key not in _ENVELOPE else f"event_{key}"] = value
        return self._json.encode(record)


@dataclass(slots=True)
class _Held:
    first: TextDelta
    parts: list[str]
    at: float


@dataclass(slots=True)
class DeltaBuffer:
    """Events of one session waiting to be published, text deltas of one message coalesced."""

    items: list[tuple[Event, float] | _Held] = field(default_factory=list)

    def add(self, event: Event) -> None:
        if type(event) is TextDelta:
            last = self.items[-1] if self.items else None
            if type(last) is _Held and last.first.item_id == event.item_id:
                last.parts.append(event.text)
            else:
                self.items.append(_Held(event, [event.text], time.time()))
            return
        self.items.append((event, time.time()))

    def take(self) -> list[tuple[Event, float, int]]:
        """``(event, time, deltas)`` for each record to publish, in order; empties the buffer."""
        out: list[tuple[Event, float, int]] = []
        for item in self.items:
            if type(item) is not _Held:
                out.append((item[0], item[1], 0))  # type: ignore[index]
            elif len(item.parts) == 1:
                out.append((item.first, item.at, 1))
            else:
                joined = TextDelta(text="".join(item.parts), item_id=item.first.item_id)
                out.append((joined, item.at, len(item.parts)))
        self.items = []
        return out


def is_terminal(event: Event) -> bool:
    kind = type(event)
    return kind is Result or kind is Error
