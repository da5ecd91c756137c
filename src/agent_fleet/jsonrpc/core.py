"""Sans-I/O JSON-RPC 2.0 over JSON Lines: bytes in, typed messages out; typed calls in, bytes out.

Theory of operation
-------------------
``JsonRpcCore`` owns three pieces of state and nothing else:

* the partial-line buffer (bytes after the last newline seen by ``feed``);
* the pending table ``id -> method`` of requests *we* sent and still expect an answer to (and, bounded,
  the ids of requests sent whose caller stopped waiting: their answer comes *late*, ``expire``);
* the next request id.

``feed(data)`` splits the buffer on ``b"\\n"`` and classifies every complete line into one of the
message classes below. Anything malformed becomes a ``ProtocolError`` *value*: the decoder never raises
on input bytes, so the I/O shell can keep reading after garbage. Responses pop their id from the pending
table, which is how ``Response.method`` is filled in and how a response to an id we never sent (or
already ``forget``-ed) is detected.

The message classes are frozen ``msgspec.Struct``s: immutable, compared by value, built by one C call
(a notification is built once per streamed event). Lines are decoded by msgspec; whatever it rejects
is decoded by the json module, so the values and errors are the json module's.

This module never imports asyncio; timeouts, cancellation and backpressure belong to the shell
(``agent_fleet.jsonrpc.connection``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

import msgspec
from msgspec import UNSET

__all__ = [
    "ErrorResponse",
    "JsonRpcCore",
    "Message",
    "Notification",
    "ProtocolError",
    "ProtocolErrorKind",
    "Request",
    "Response",
]

_PREVIEW_BYTES: Final = 256
_INTERNAL_ERROR: Final = -32603
#: Requests whose caller stopped waiting (``expire``) still recognised when their answer comes late.
LATE_LIMIT: Final = 4096


class Request(msgspec.Struct, frozen=True):
    """A request from the peer. ``id`` is kept exactly as sent (int or str) so the reply can echo it."""

    id: int | str
    method: str
    params: Any = None


class Notification(msgspec.Struct, frozen=True):
    """A notification from the peer (no id, no reply expected)."""

    method: str
    params: Any = None


class Response(msgspec.Struct, frozen=True):
    """A successful response to one of our requests; ``method`` comes from the pending table."""

    id: int | str
    result: Any
    method: str | None = None


class ErrorResponse(msgspec.Struct, frozen=True):
    """An error response. ``id`` is None when the peer could not tell which request failed.

    A missing or non-integer ``code`` reads as -32603 (internal error); a missing ``message`` as "".
    """

    id: int | str | None
    code: int
    message: str
    data: Any = None
    method: str | None = None


ProtocolErrorKind: TypeAlias = Literal[
    "invalid_json", "not_object", "unknown_response_id", "line_too_long", "invalid_message"
]


class ProtocolError(msgspec.Struct, frozen=True):
    """Input that is not a valid message; the line is skipped, decoding goes on.

    ``line_preview`` holds at most the first 256 bytes of the offending line. ``id`` is set when a
    malformed *response* named an id that was pending: that id has been removed from the pending table so
    the shell can fail its waiter instead of letting it hang.
    """

    kind: ProtocolErrorKind
    detail: str
    line_preview: bytes = b""
    id: int | str | None = None


Message: TypeAlias = Request | Notification | Response | ErrorResponse | ProtocolError

# ensure_ascii=False keeps non-ASCII text at 1x..3x size instead of 6 bytes per char; strings holding lone
# surrogates cannot be UTF-8 encoded, so those fall back to the escaping encoder.
_encode_utf8 = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_encode_ascii = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode


class _Wire(msgspec.Struct, gc=False):
    """The members of a message that matter, ``UNSET`` when absent; others (``jsonrpc``...) are skipped."""

    method: Any = UNSET
    id: Any = UNSET
    params: Any = None
    result: Any = UNSET
    error: Any = UNSET


# msgspec decodes a line straight from bytes into _Wire about 4x faster than json.loads builds a dict
# (the single biggest cost per event); where it agrees to decode, it yields the same values as json.
_decode_wire: Callable[[bytes], _Wire] = msgspec.json.Decoder(_Wire).decode


def _dump_line(obj: dict[str, Any]) -> bytes:
    try:
        return (_encode_utf8(obj) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (_encode_ascii(obj) + "\n").encode("ascii")


def _is_id(value: object) -> bool:
    # bool is an int subclass but never a valid id; floats are not ids we ever allocate.
    return type(value) is int or type(value) is str


class JsonRpcCore:
    """JSON-RPC 2.0 protocol state for one connection (JSON Lines framing).

    ``max_line_bytes`` bounds the bytes of one line before its newline; a longer line is reported as one
    ``ProtocolError("line_too_long")`` and skipped without ever being buffered whole. ``emit_version``
    controls whether outgoing messages carry ``"jsonrpc": "2.0"`` (incoming messages never need it).
    """

    __slots__ = (
        "_buf",
        "_discarding",
        "_emit_version",
        "_late",
        "_max_line_bytes",
        "_next_id",
        "_pending",
        "_pending_view",
    )

    def __init__(self, *, max_line_bytes: int = 64 * 1024 * 1024, emit_version: bool = True) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self._max_line_bytes = max_line_bytes
        self._emit_version = emit_version
        self._buf = bytearray()
        self._discarding = False
        self._next_id = 1
        self._pending: dict[int, str] = {}
        self._pending_view = MappingProxyType(self._pending)
        self._late: dict[int, str] = {}  # id -> method, oldest first, at most LATE_LIMIT

    # -- incoming ---------------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Message]:
        """Consume bytes (split anywhere, even inside a UTF-8 character); return the complete messages.

        Never raises on any input. Blank lines are ignored and a ``\\r`` before the newline is tolerated.
        """
        out: list[Message] = []
        if self._discarding:
            nl = data.find(b"\n")
            if nl < 0:
                return out
            self._discarding = False
            data = data[nl + 1 :]
        lines = data.split(b"\n")
        tail = lines.pop()
        buf = self._buf
        if lines:
            if buf:
                buf += lines[0]
                lines[0] = bytes(buf)
                buf.clear()
            limit = self._max_line_bytes
            append = out.append
            decode_wire, unset = _decode_wire, UNSET
            for line in lines:
                if len(line) > limit:
                    append(self._too_long(line))
                    continue
                # _decode_line inlined, with the case of nearly every line (a notification) first: this
                # loop runs once per streamed event.
                try:
                    wire = decode_wire(line)
                except Exception:
                    msg = self._decode_line_slow(line)
                    if msg is not None:
                        append(msg)
                    continue
                method = wire.method
                if wire.id is unset and type(method) is str:
                    append(Notification(method, wire.params))
                else:
                    append(self._classify(wire, line))
        if tail:
            if len(buf) + len(tail) > self._max_line_bytes:
                # Keep only a preview and skip to the next newline, so memory stays bounded.
                out.append(self._too_long(bytes(buf[:_PREVIEW_BYTES]) + tail[:_PREVIEW_BYTES]))
                buf.clear()
                self._discarding = True
            else:
                buf += tail
        return out

    def feed_eof(self) -> list[Message]:
        """Signal end of input: decode a trailing line that has no newline. Never raises.

        The core is reset to an empty buffer afterwards, so it could be fed again.
        """
        if self._discarding:
            self._discarding = False
            return []
        if not self._buf:
            return []
        line = bytes(self._buf)
        self._buf.clear()
        msg = self._decode_line(line)
        return [] if msg is None else [msg]

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an incomplete line currently held (never more than ``max_line_bytes``)."""
        return len(self._buf)

    def _too_long(self, line: bytes | bytearray) -> ProtocolError:
        return ProtocolError(
            "line_too_long",
            f"line exceeds max_line_bytes={self._max_line_bytes}; skipped",
            bytes(line[:_PREVIEW_BYTES]),
        )

    def _decode_line(self, line: bytes) -> Message | None:
        try:
            wire = _decode_wire(line)
        except Exception:
            # Anything msgspec rejects (bad JSON, not an object, NaN, lone surrogates, huge floats...):
            # the json module decides, exactly as it always did, and explains.
            return self._decode_line_slow(line)
        return self._classify(wire, line)

    def _decode_line_slow(self, line: bytes) -> Message | None:
        try:
            obj = json.loads(line.decode())
        except (ValueError, RecursionError) as exc:
            # UnicodeDecodeError and JSONDecodeError are ValueErrors; deep nesting is a RecursionError.
            if not line.strip():
                return None
            return ProtocolError("invalid_json", str(exc), line[:_PREVIEW_BYTES])
        if type(obj) is not dict:
            return ProtocolError(
                "not_object", f"expected a JSON object, got {type(obj).__name__}", line[:_PREVIEW_BYTES]
            )
        return self._classify(_Wire(**{k: obj[k] for k in _Wire.__struct_fields__ if k in obj}), line)

    def _classify(self, wire: _Wire, line: bytes) -> Message:
        rid: Any
        method = wire.method
        if method is not UNSET and method is not None:
            if type(method) is not str:
                return self._invalid(wire, line, "method is not a string")
            rid = wire.id
            if rid is UNSET:
                return Notification(method, wire.params)
            if not _is_id(rid):
                return self._invalid(wire, line, "request id is not an integer or string")
            return Request(rid, method, wire.params)

        rid = None if wire.id is UNSET else wire.id
        if wire.error is not UNSET:
            if rid is None:
                return self._error_response(None, wire.error, None)
            if not _is_id(rid):
                return self._invalid(wire, line, "response id is not an integer or string")
            pending_method = self._pop_pending(rid)
            if pending_method is None:
                return ProtocolError(
                    "unknown_response_id", f"error response to unknown id {rid!r}", line[:_PREVIEW_BYTES]
                )
            return self._error_response(rid, wire.error, pending_method)
        if wire.result is not UNSET:
            if not _is_id(rid):
                return self._invalid(wire, line, "response id is not an integer or string")
            pending_method = self._pop_pending(rid)
            if pending_method is None:
                return ProtocolError(
                    "unknown_response_id", f"response to unknown id {rid!r}", line[:_PREVIEW_BYTES]
                )
            return Response(rid, wire.result, pending_method)
        return self._invalid(wire, line, "neither a request, a notification nor a response")

    def _pop_pending(self, rid: object) -> str | None:
        # We only allocate int ids, so a string id (even "1") can never name one of our requests.
        if type(rid) is not int:
            return None
        method = self._pending.pop(rid, None)
        return method if method is not None or not self._late else self._late.pop(rid, None)

    def _invalid(self, wire: _Wire, line: bytes, detail: str) -> ProtocolError:
        rid = wire.id
        # A malformed answer to a pending request must not leave that request hanging: hand its id out.
        if wire.method is UNSET and _is_id(rid) and self._pop_pending(rid) is not None:
            return ProtocolError("invalid_message", detail, line[:_PREVIEW_BYTES], rid)
        return ProtocolError("invalid_message", detail, line[:_PREVIEW_BYTES])

    @staticmethod
    def _error_response(rid: int | str | None, error: Any, method: str | None) -> ErrorResponse:
        if isinstance(error, dict):
            code = error.get("code")
            message = error.get("message")
            return ErrorResponse(
                rid,
                code if type(code) is int else _INTERNAL_ERROR,
                message if isinstance(message, str) else "" if message is None else str(message),
                error.get("data"),
                method,
            )
        if isinstance(error, str):
            return ErrorResponse(rid, _INTERNAL_ERROR, error, None, method)
        return ErrorResponse(rid, _INTERNAL_ERROR, "", error, method)

    # -- outgoing ---------------------------------------------------------------------------------

    def _envelope(self) -> dict[str, Any]:
        return {"jsonrpc": "2.0"} if self._emit_version else {}

    def encode_request(self, method: str, params: Any = None) -> tuple[int, bytes]:
        """Allocate the next id (1, 2, 3, ...), register ``id -> method`` as pending, return both.

        Raises ``TypeError``/``ValueError`` if ``params`` is not JSON-serialisable (nothing is registered).
        """
        rid = self._next_id
        obj = self._envelope()
        obj["id"] = rid
        obj["method"] = method
        if params is not None:
            obj["params"] = params
        data = _dump_line(obj)
        self._next_id = rid + 1
        self._pending[rid] = method
        return rid, data

    def encode_notification(self, method: str, params: Any = None) -> bytes:
        """Encode a notification; ``params`` is omitted when None."""
        obj = self._envelope()
        obj["method"] = method
        if params is not None:
            obj["params"] = params
        return _dump_line(obj)

    def encode_response(self, id: int | str, result: Any) -> bytes:
        """Encode a success reply to a peer request; ``id`` is echoed exactly as given."""
        obj = self._envelope()
        obj["id"] = id
        obj["result"] = result
        return _dump_line(obj)

    def encode_error(self, id: int | str | None, code: int, message: str, data: Any = None) -> bytes:
        """Encode an error reply; ``data`` is omitted when None, ``id`` may be None (e.g. parse error)."""
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        obj = self._envelope()
        obj["id"] = id
        obj["error"] = error
        return _dump_line(obj)

    # -- pending table ----------------------------------------------------------------------------

    @property
    def pending(self) -> Mapping[int, str]:
        """Read-only live view of ``id -> method`` for requests still awaiting a response."""
        return self._pending_view

    def forget(self, id: int) -> None:
        """Stop expecting a response to ``id`` (a request never sent); one that comes is then unknown."""
        self._pending.pop(id, None)

    def expire(self, id: int) -> None:
        """Stop waiting for the response to ``id`` (sent; its caller timed out or was cancelled) but
        still recognise it if it comes late: it is then decoded as a ``Response`` / ``ErrorResponse``
        with its method, not an ``unknown_response_id`` (the peer did the work: someone may have to
        undo it). The last ``LATE_LIMIT`` such ids are kept."""
        method = self._pending.pop(id, None)
        if method is None:
            return
        self._late[id] = method
        if len(self._late) > LATE_LIMIT:
            del self._late[next(iter(self._late))]

    def is_late(self, id: int | str) -> bool:
        """True while ``id`` was expired and its response has not come."""
        return id in self._late

    def fail_all(self) -> list[int]:
        """Clear the pending table and return the ids that were in it (in send order)."""
        ids = list(self._pending)
        self._pending.clear()
        self._late.clear()
        return ids
