"""Sans-I/O completion and reassembly of one remote process's event stream.

Theory of operation
-------------------
The exec-server numbers every event of a process with a per-process ``seq`` (1, 2, 3, ...): each output
chunk, the single ``process/exited`` and, last of all, ``process/closed``. ``exited`` is *not* the end:
output can keep draining after it (seen on 0.163.0 with 3 MB of output: exited at seq 301, output up to
371, closed at 372). The stream is complete when ``closed`` has arrived and every seq before it is
accounted for.

``Assembler`` keeps a cursor ``released``: every seq ``<= released`` has been accounted for, and its
output (if it was an output chunk) has been handed out, in seq order, through ``take()``. Events above
the cursor wait in ``pending`` until the hole below them fills. Duplicates (same seq) are ignored, so
output is never handed out twice.

The happy path (complete, in order, ``exited`` carrying ``sandboxDenied``) needs no ``process/read`` at
all. ``read_reason()`` says when one is needed:

* ``LOST``   -- notifications may have been lost (reconnection, an unreadable notification, a stall): read
  now;
* ``GAP``    -- a hole sits below a later event. A reordering transport may still fill it, so the I/O
  shell waits a short grace period first, then reads;
* ``LEGACY`` -- the stream is complete but ``exited`` had no ``sandboxDenied`` (an older server): one
  compatibility read fetches it;
* ``FINAL``  -- opt-in: confirm completion with one read, as clients did before pushed completion
  (kept for the benchmark and for servers one does not trust).

A read (``begin_read()`` returns the ``afterSeq`` cursor, ``on_read()`` takes the answer) returns the
chunks the server still retains after the cursor plus ``nextSeq`` (one past the newest event). Every seq
up to ``nextSeq - 1`` now exists on the server; whatever of it is neither pending nor in the answer was
evicted from the server's retained window (1 MiB per process) -- except one slot for ``exited`` when
the answer says the process exited and its event was never seen. Evicted output is skipped and the
result says ``truncated=True``; nothing is invented.

This module performs no I/O and never imports asyncio, so it can be driven exhaustively (see the
hypothesis tests).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

__all__ = ["Assembler", "Chunk", "ReadReason", "ReadSnapshot", "Stream"]

Stream: TypeAlias = Literal["stdout", "stderr", "pty"]

# Guard against an absurd nextSeq from a broken peer: the hole count is computed arithmetically, but a
# cursor that jumps by more than this is treated as a protocol failure rather than silently accepted.
_MAX_SEQ_JUMP: Final = 1 << 40


@dataclass(frozen=True, slots=True)
class Chunk:
    """One output chunk: its event ``seq``, the ``stream`` it came from and the raw bytes."""

    seq: int
    stream: Stream
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadSnapshot:
    """A decoded ``process/read`` result.

    ``sandbox_denied`` is None when the field was absent. ``next_seq`` is one past the newest event
    the server had assigned when it answered (unless it cut the answer short with ``maxBytes``).
    """

    chunks: tuple[Chunk, ...]
    next_seq: int
    exited: bool
    exit_code: int | None
    closed: bool
    failure: str | None = None
    sandbox_denied: bool | None = None


class ReadReason(enum.Enum):
    """Why the assembler wants a ``process/read`` (see the module docstring)."""

    LOST = "lost"
    GAP = "gap"
    LEGACY = "legacy"
    FINAL = "final"


class _Exited:
    __slots__ = ()


class _Closed:
    __slots__ = ()


_EXITED: Final = _Exited()
_CLOSED: Final = _Closed()

_Event: TypeAlias = Chunk | _Exited | _Closed


class Assembler:
    """Orders one process's events, decides which ``process/read`` calls are needed, reports the result.

    Calling order: feed ``on_output`` / ``on_exited`` / ``on_closed`` / ``on_lost`` in any order and
    any number of times; after each, ``take()`` the released chunks and consult ``read_reason()``. To
    read: ``cursor = begin_read()``, send ``process/read`` with ``afterSeq=cursor``, then
    ``on_read(snapshot)`` or ``on_read_failed()``. ``done`` turns True once the stream is complete; then
    ``exit_code``, ``sandbox_denied`` and ``truncated`` are final. ``failure`` is set (and ``done``
    stays False) when the process cannot complete, e.g. the server reported a failure.

    Nothing here raises on peer input; misuse of the calling order raises ``RuntimeError``.
    """

    __slots__ = (
        "_closed_seq",
        "_exit_code",
        "_exit_seq",
        "_failure",
        "_final_read",
        "_final_read_done",
        "_lost",
        "_out",
        "_pending",
        "_reading",
        "_released",
        "_sandbox_denied",
        "_truncated",
        "reads",
    )

    def __init__(self, *, final_read: bool = False) -> None:
        self._final_read = final_read
        self._final_read_done = False
        self._released = 0
        self._pending: dict[int, _Event] = {}
        self._out: list[Chunk] = []
        self._exit_code: int | None = None
        self._exit_seq: int | None = None
        self._sandbox_denied: bool | None = None
        self._closed_seq: int | None = None
        self._truncated = False
        self._lost = False
        self._reading = False
        self._failure: str | None = None
        self.reads = 0
        """Reads begun (``begin_read`` calls)."""

    # -- pushed events ----------------------------------------------------------------------------

    def on_output(self, seq: int, stream: Stream, data: bytes) -> None:
        """A ``process/output`` notification (or any copy of it)."""
        if self._accepts(seq):
            self._pending[seq] = Chunk(seq, stream, data)
            self._advance()

    def on_exited(self, seq: int, exit_code: int, sandbox_denied: bool | None) -> None:
        """A ``process/exited`` notification; ``sandbox_denied`` is None when the field was absent."""
        if self._exit_code is None:
            self._exit_code = exit_code
        if sandbox_denied is not None:
            self._sandbox_denied = bool(self._sandbox_denied) or sandbox_denied
        if self._exit_seq is None:
            self._exit_seq = seq
        if self._accepts(seq):
            self._pending[seq] = _EXITED
            self._advance()

    def on_closed(self, seq: int) -> None:
        """A ``process/closed`` notification: ``seq`` is the last seq of the process."""
        if self._closed_seq is None:
            self._closed_seq = seq
        if self._accepts(seq):
            self._pending[seq] = _CLOSED
            self._advance()

    def on_lost(self) -> None:
        """Notifications may have been lost (reconnected, unreadable message, stall): ask for a read."""
        if not self.done and self._failure is None:
            self._lost = True

    # -- reads ------------------------------------------------------------------------------------

    def read_reason(self) -> ReadReason | None:
        """The read needed now, or None. ``GAP`` is the only one worth delaying (it may heal)."""
        if self._failure is not None or self.done:
            return None
        if self._lost:
            return ReadReason.LOST
        if self._pending:
            # _advance() drains everything contiguous, so anything left waits above a hole.
            return ReadReason.GAP
        if self._stream_complete():
            if self._sandbox_denied is None or self._exit_code is None:
                return ReadReason.LEGACY
            if self._final_read and not self._final_read_done:
                return ReadReason.FINAL
        return None

    @property
    def reading(self) -> bool:
        """A read is in flight (begun, not yet answered)."""
        return self._reading

    def begin_read(self) -> int:
        """Mark a read as in flight and return its ``afterSeq`` cursor. One read at a time."""
        if self._reading:
            raise RuntimeError("a process/read is already in flight")
        self._reading = True
        self._lost = False  # this read covers whatever was lost so far; a later loss sets it again
        self.reads += 1
        return self._released

    def on_read_failed(self) -> None:
        """The read got no answer (e.g. the connection dropped): it will be needed again."""
        self._reading = False
        self.on_lost()

    def on_read(self, snap: ReadSnapshot) -> None:
        """Apply a ``process/read`` answer to the read begun last."""
        self._reading = False
        if self._failure is not None:
            return
        if snap.failure is not None:
            self._failure = f"process failed: {snap.failure}"
            return
        target = snap.next_seq - 1
        if target - self._released > _MAX_SEQ_JUMP:
            self._failure = f"process/read nextSeq {snap.next_seq} is implausible"
            return
        for chunk in snap.chunks:
            if chunk.seq <= target and self._accepts(chunk.seq):
                self._pending[chunk.seq] = chunk
        if snap.exited:
            if snap.exit_code is None:
                self._failure = "process/read reports an exit without an exit code"
                return
            if self._exit_code is None:
                self._exit_code = snap.exit_code
            # The read is authoritative for the denial state; a very old server without the field
            # cannot report a denial at all, so its absence reads as False (not as "ask again").
            self._sandbox_denied = bool(self._sandbox_denied) or bool(snap.sandbox_denied)
        # A server that cut the answer short (maxBytes) reports nextSeq just past its last chunk, even
        # when closed: the close seq then collides with output. Take the chunks, infer nothing, go on.
        cut_short = snap.closed and bool(snap.chunks) and max(c.seq for c in snap.chunks) >= target
        if cut_short:
            self._lost = True
            self._advance()
            return
        if snap.closed and self._closed_seq is None:
            self._closed_seq = target
            if self._accepts(target):
                self._pending[target] = _CLOSED
        self._settle_through(target, exit_slot=snap.exited and self._exit_seq is None)
        if snap.closed:
            self._final_read_done = True
        self._advance()

    def fail(self, message: str) -> None:
        """Give up on this process (e.g. the recovery read was rejected)."""
        if self._failure is None and not self.done:
            self._failure = message

    # -- output -----------------------------------------------------------------------------------

    def take(self) -> list[Chunk]:
        """Return and forget the chunks released since the last call, in seq order."""
        out, self._out = self._out, []
        return out

    @property
    def done(self) -> bool:
        """The stream is complete: closed, nothing missing, exit code and denial state known."""
        return (
            self._stream_complete()
            and self._exit_code is not None
            and self._sandbox_denied is not None
            and (not self._final_read or self._final_read_done)
        )

    @property
    def failure(self) -> str | None:
        return self._failure

    @property
    def exit_code(self) -> int | None:
        return self._exit_code

    @property
    def exited(self) -> bool:
        return self._exit_code is not None

    @property
    def closed(self) -> bool:
        """``process/closed`` is known (pushed or read), even if output below it is still missing."""
        return self._closed_seq is not None

    @property
    def sandbox_denied(self) -> bool | None:
        return self._sandbox_denied

    @property
    def truncated(self) -> bool:
        """Output was lost for good (evicted from the server's retained window before it was read)."""
        return self._truncated

    @property
    def released(self) -> int:
        """Every seq up to this one is accounted for."""
        return self._released

    # -- internals --------------------------------------------------------------------------------

    def _accepts(self, seq: int) -> bool:
        return seq > self._released and seq not in self._pending

    def _stream_complete(self) -> bool:
        return self._closed_seq is not None and self._released >= self._closed_seq

    def _advance(self) -> None:
        pending = self._pending
        nxt = self._released + 1
        while nxt in pending:
            event = pending.pop(nxt)
            if type(event) is Chunk:
                self._out.append(event)
            nxt += 1
        self._released = nxt - 1

    def _settle_through(self, target: int, *, exit_slot: bool) -> None:
        """Every seq up to ``target`` exists on the server; account for the ones still missing."""
        if target <= self._released:
            return
        known = sorted(seq for seq in self._pending if seq <= target)
        holes = (target - self._released) - len(known)
        if holes <= 0:
            return
        if exit_slot:
            # One hole is the exit event we never saw. Which one is unknowable once output was also
            # evicted; it carries no bytes, so the first hole is as good as any.
            first = self._released + 1
            for seq in known:
                if seq != first:
                    break
                first += 1
            self._exit_seq = first
            self._pending[first] = _EXITED
            holes -= 1
        if holes > 0:
            self._truncated = True
        # Release everything up to target in order, skipping the holes (lost output).
        for seq in sorted(s for s in self._pending if s <= target):
            event = self._pending.pop(seq)
            if type(event) is Chunk:
                self._out.append(event)
        self._released = target
