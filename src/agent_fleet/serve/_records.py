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

import math
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


def _millisecond(at: float) -> int:
    """``at`` in whole milliseconds as ``datetime.fromtimestamp`` sees it (rounded to the microsecond
    from the fraction alone, then truncated)."""
    fraction, whole = math.modf(at)
    return int(whole) * 1000 + round(fraction * 1e6) // 1000


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
        self._head_key: tuple[int, str] = (-1, "")
        self._head = b""

    def _ts(self, at: float) -> str:
        """``datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")``, cheaper."""
        return self._ts_ms(_millisecond(at))

    def _ts_ms(self, ms: int) -> str:
        second, fraction = divmod(ms, 1000)
        if second != self._second:
            self._second = second
            self._date = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{self._date}.{fraction:03d}+00:00"

    def encode(self, task_id: str, event: Event, at: float, *, deltas: int = 0) -> bytes:
        if type(event) is TextDelta:
            # Everything before the text is the same for a session's deltas of one millisecond (a
            # burst): made once for them.
            millisecond = (_millisecond(at), task_id)
            if millisecond != self._head_key:
                self._head_key = millisecond
                self._head = b"".join(
                    (
                        f'{{"ts":"{self._ts_ms(millisecond[0])}","task_id":'.encode(),
                        self._json.encode(task_id),
                        b',"source":"agent","type":"TextDelta","text":',
                    )
                )
            return b"".join(
                (
                    self._head,
                    self._json.encode(self._redactor.text(event.text)),
                    b',"item_id":',
                    self._json.encode(event.item_id),
                    b',"deltas":%d}' % deltas if deltas > 1 else b"}",
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
        items = self.items
        if type(event) is TextDelta and items:
            last = items[-1]
            if isinstance(last, _Held):
                if last.first.item_id == event.item_id:
                    last.parts.append(event.text)
                    return
            else:
                first, at = last
                if type(first) is TextDelta and first.item_id == event.item_id:
                    items[-1] = _Held(first, [first.text, event.text], at)
                    return
        items.append((event, time.time()))  # (a delta is held only once a second one of its message comes)

    def take(self) -> list[tuple[Event, float, int]]:
        """``(event, time, deltas)`` for each record to publish, in order (``deltas``: the fragments
        joined, 0 for an event as it came); empties the buffer."""
        out: list[tuple[Event, float, int]] = []
        for item in self.items:
            if not isinstance(item, _Held):
                out.append((item[0], item[1], 0))
            else:
                joined = TextDelta(text="".join(item.parts), item_id=item.first.item_id)
                out.append((joined, item.at, len(item.parts)))
        self.items = []
        return out


def is_terminal(event: Event) -> bool:
    kind = type(event)
    return kind is Result or kind is Error
