"""Server-sent events, decoded from bytes as they arrive (sans-I/O): the daemon's event stream, read by
``RemoteProvider``.

``SSEDecoder.feed(chunk)`` returns the events completed by ``chunk`` as ``(event, data, id)``: the
event type (``"message"`` when none was given), the data lines joined with ``\\n`` (bytes, left for the
caller to decode: records are JSON, decoded straight from bytes), and the last event id seen so far
(``None`` before any). It follows the HTML standard's parsing rules (lines end in CRLF, LF or CR; a
leading space after the colon is dropped; comment lines, unknown fields and ``retry`` are ignored; an
``id`` containing NUL is ignored; a block without data dispatches nothing), with a fast path for what
the daemon writes: LF-only, a whole burst of records in one chunk. httpx-sse does the same one line at
a time through several generator layers; per record that was most of the client's cost
(``bench/serve_overhead.py``)."""

from __future__ import annotations

__all__ = ["SSEDecoder", "ServerSentEvent"]

ServerSentEvent = tuple[str, bytes, str | None]
"""``(event, data, last_event_id)``."""


class SSEDecoder:
    """The events in a stream of bytes (see the module docstring). Not thread-safe; one per stream."""

    __slots__ = ("_buffer", "_cr", "_data", "_event", "_has_data", "_id")

    def __init__(self) -> None:
        self._buffer = b""
        self._event = ""
        self._data: list[bytes] = []
        self._has_data = False
        self._id: str | None = None
        self._cr = False  # the last chunk ended in CR: an LF first in the next one ends no line

    @property
    def last_event_id(self) -> str | None:
        return self._id

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events that ``chunk`` completes, in order."""
        if self._cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._cr = chunk[-1:] == b"\r"
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        data = self._buffer + chunk if self._buffer else chunk
        end = data.rfind(b"\n")
        if end < 0:
            self._buffer = data
            return []
        self._buffer = data[end + 1 :]
        out: list[ServerSentEvent] = []
        # One loop, no call per line: a record is four lines, and this runs for every one.
        event, lines, has_data, ident = self._event, self._data, self._has_data, self._id
        for line in data[:end].split(b"\n"):
            if not line:  # a blank line: dispatch
                if has_data:
                    out.append((event or "message", b"\n".join(lines), ident))
                event, lines, has_data = "", [], False
                continue
            name, colon, value = line.partition(b":")
            if not colon:
                value = b""
            elif value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                lines.append(value)
                has_data = True
            elif name == b"event":
                event = value.decode("utf-8", "replace")
            elif name == b"id" and b"\0" not in value:
                ident = value.decode("utf-8", "replace")
            # "" (a comment), "retry" and unknown fields: ignored
        self._event, self._data, self._has_data, self._id = event, lines, has_data, ident
        return out
