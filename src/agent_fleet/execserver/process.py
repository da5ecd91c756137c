"""``RemoteProcess``: the asyncio shell around one process's ``Assembler``.

Theory of operation
-------------------
The client subscribes each process to its own routing key (``processId``) on the connection, *before*
sending ``process/start``, so no early event is missed. Every ``process/output`` / ``process/exited`` /
``process/closed`` notification is fed to the pure ``Assembler`` and then ``_pump()`` runs:

1. released chunks are appended to the process's output (``output()`` iterators and ``wait()`` see
   them in seq order);
2. if the assembler is done, ``wait()`` resolves and the process unsubscribes -- on the happy path that
   is the whole story: no ``process/read`` at all;
3. otherwise ``read_reason()`` decides: ``LOST``/``LEGACY``/``FINAL`` read at once, ``GAP`` reads only if
   the hole is still there after ``gap_grace`` seconds (a reordering path may still fill it). At most
   one read is in flight per process; its answer is fed back and ``_pump()`` runs again.

Two timers cover notifications that vanish without a trace: after ``process/exited``, ``stall_timeout``
seconds of silence without ``process/closed`` count as a loss (one read). A dropped connection is a loss
for every live process; the client reconnects (websocket) and calls ``_on_reconnected``.

Everything runs on the event loop thread; handlers are synchronous, so there are no locks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_fleet.errors import RemoteProtocolError, TransportError
from agent_fleet.execserver._assembly import Assembler, Chunk, ReadReason, Stream
from agent_fleet.execserver._wire import b64encode, decode_chunk, decode_closed, decode_exited, decode_read
from agent_fleet.execserver.errors import ExecServerError, WriteRejected
from agent_fleet.jsonrpc import Connection, Notification, Subscription

if TYPE_CHECKING:
    from agent_fleet.execserver.client import ExecServerClient

__all__ = ["ProcessResult", "RemoteProcess"]

logger = logging.getLogger("agent_fleet.execserver")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessResult:
    """How a remote process ended.

    ``stdout`` holds the ``"pty"`` stream for a ``tty`` process. ``sandbox_denied`` is the executor's
    verdict that a sandbox denial caused the failure. ``truncated`` means some output was lost for
    good: it was evicted from the server's retained window before it could be recovered.
    """

    exit_code: int
    stdout: bytes
    stderr: bytes
    sandbox_denied: bool
    truncated: bool


class RemoteProcess:
    """A process running on the exec-server. Obtain one from ``ExecServerClient.start``.

    ``output()`` yields ``(stream, bytes)`` chunks in order (each iterator starts from the first
    chunk); ``wait()`` returns the ``ProcessResult``. Both raise ``ConnectionClosed`` if the connection
    is lost for good, or the ``ExecServerError`` / ``RemoteProtocolError`` that made recovery
    impossible.
    """

    def __init__(
        self,
        client: ExecServerClient,
        process_id: str,
        argv: tuple[str, ...],
        *,
        tty: bool,
        final_read: bool,
        gap_grace: float,
        stall_timeout: float,
    ) -> None:
        self._client = client
        self.process_id = process_id
        self.argv = argv
        self.tty = tty
        self.sandbox_type: str | None = None
        """The server's ``sandboxType`` from ``process/start`` (``"none"`` without a sandbox)."""
        self._asm = Assembler(final_read=final_read)
        self._gap_grace = gap_grace
        self._stall_timeout = stall_timeout
        self._chunks: list[tuple[Stream, bytes]] = []
        self._changed = asyncio.Event()
        self._result: asyncio.Future[ProcessResult] = asyncio.get_running_loop().create_future()
        self._sub: Subscription | None = None
        self._gap_timer: asyncio.TimerHandle | None = None
        self._gap_due = False
        self._gap_cursor = -1
        self._stall_timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writes = 0

    def __repr__(self) -> str:
        state = "done" if self._result.done() else "running"
        return f"<RemoteProcess {self.process_id} {list(self.argv)!r} {state}>"

    # -- public -----------------------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        """The exit code once ``process/exited`` is known (output may still be draining), else None."""
        return self._asm.exit_code

    @property
    def done(self) -> bool:
        """``wait()`` would return (or raise) without waiting."""
        return self._result.done()

    @property
    def read_calls(self) -> int:
        """``process/read`` calls this process needed (0 on the happy path)."""
        return self._asm.reads

    async def output(self) -> AsyncIterator[tuple[Stream, bytes]]:
        """Yield ``(stream, data)`` in order from the first chunk until the stream is complete."""
        i = 0
        while True:
            while i < len(self._chunks):
                yield self._chunks[i]
                i += 1
            if self._result.done():
                if i == len(self._chunks):
                    self._result.result()  # raises the failure, if any
                    return
                continue
            await self._changed.wait()

    async def wait(self) -> ProcessResult:
        """Wait for the complete event stream and return the result. Cancelling the caller does not
        affect the process."""
        return await asyncio.shield(self._result)

    async def write(self, data: bytes) -> None:
        """Write ``data`` to the process's stdin (``tty`` or ``pipe_stdin`` processes only).

        Raises ``WriteRejected`` (with ``.status``) if the server does not accept it.
        """
        self._writes += 1
        result = await self._client._request(
            "process/write",
            {
                "processId": self.process_id,
                "chunk": b64encode(data),
                "writeId": f"{self.process_id}-w{self._writes}",
            },
        )
        status = result.get("status") if isinstance(result, dict) else None
        if status != "accepted":
            raise WriteRejected(self.process_id, str(status))

    async def terminate(self) -> bool:
        """Ask the server to kill the process. Returns False if it was no longer running."""
        result = await self._client._request("process/terminate", {"processId": self.process_id})
        return bool(result.get("running")) if isinstance(result, dict) else False

    async def interrupt(self) -> None:
        """Send an interrupt (SIGINT) to the process."""
        await self._client._request("process/signal", {"processId": self.process_id, "signal": "interrupt"})

    # -- client side ------------------------------------------------------------------------------

    def _subscribe(self, conn: Connection) -> None:
        if self._sub is not None:
            self._sub.close()
        self._sub = conn.subscribe(self.process_id, on_notification=self._on_notification)

    def _unsubscribe(self) -> None:
        if self._sub is not None:
            self._sub.close()
            self._sub = None

    def _on_reconnected(self) -> None:
        """A new connection replaced a dropped one: events may have been lost meanwhile."""
        self._asm.on_lost()
        self._pump()

    def _on_lost(self) -> None:
        self._asm.on_lost()
        self._pump()

    def _fail(self, exc: BaseException) -> None:
        """Fail the process for good (connection gone, client closed, recovery rejected)."""
        self._asm.fail(str(exc))
        self._cancel_timers()
        self._unsubscribe()
        if not self._result.done():
            self._result.set_exception(exc)
            self._result.exception()  # a process nobody waits for must not log "never retrieved"
        self._client._forget(self)
        self._wake()

    # -- events -----------------------------------------------------------------------------------

    def _on_notification(self, msg: Notification) -> None:
        params = msg.params
        asm = self._asm
        try:
            if not isinstance(params, dict):
                raise RemoteProtocolError(f"{msg.method}: params must be an object")
            if msg.method == "process/output":
                chunk = decode_chunk(params, msg.method)
                asm.on_output(chunk.seq, chunk.stream, chunk.data)
            elif msg.method == "process/exited":
                seq, code, denied = decode_exited(params)
                asm.on_exited(seq, code, denied)
            elif msg.method == "process/closed":
                asm.on_closed(decode_closed(params))
            else:
                logger.debug("%s: ignoring %s", self.process_id, msg.method)
                return
        except RemoteProtocolError as exc:
            # An unreadable event is a lost event: the retained output can still be read.
            logger.warning(
                "%s: unreadable %s (%s); will recover by process/read", self.process_id, msg.method, exc
            )
            asm.on_lost()
        self._pump()
        if asm.exited and not asm.closed and not self._result.done():
            self._arm_stall_timer()

    # -- the pump ---------------------------------------------------------------------------------

    def _pump(self) -> None:
        asm = self._asm
        released = asm.take()
        if released:
            self._append(released)
        if self._result.done():
            return
        if asm.failure is not None:
            self._fail(RemoteProtocolError(f"{self.process_id}: {asm.failure}"))
            return
        if asm.done:
            self._finish()
            return
        reason = asm.read_reason()
        if reason is None or asm.reading:
            if reason is not ReadReason.GAP:
                self._cancel_gap_timer()
            return
        if reason is ReadReason.GAP and not self._gap_due:
            if self._gap_timer is None or self._gap_cursor != asm.released:
                self._cancel_gap_timer()
                self._gap_cursor = asm.released
                self._gap_timer = asyncio.get_running_loop().call_later(self._gap_grace, self._gap_expired)
            return
        self._cancel_gap_timer()
        self._start_read()

    def _append(self, chunks: list[Chunk]) -> None:
        self._chunks.extend((chunk.stream, chunk.data) for chunk in chunks)
        self._wake()

    def _collected(self) -> tuple[bytes, bytes]:
        """(stdout incl. pty, stderr) received so far."""
        chunks = self._chunks
        return (
            b"".join(d for s, d in chunks if s != "stderr"),
            b"".join(d for s, d in chunks if s == "stderr"),
        )

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _finish(self) -> None:
        asm = self._asm
        assert asm.exit_code is not None and asm.sandbox_denied is not None
        self._cancel_timers()
        self._unsubscribe()
        stdout, stderr = self._collected()
        self._result.set_result(
            ProcessResult(
                exit_code=asm.exit_code,
                stdout=stdout,
                stderr=stderr,
                sandbox_denied=asm.sandbox_denied,
                truncated=asm.truncated,
            )
        )
        self._client._forget(self)
        self._wake()

    # -- reads ------------------------------------------------------------------------------------

    def _start_read(self) -> None:
        cursor = self._asm.begin_read()
        self._spawn(self._read(cursor), f"{self.process_id}:read")

    async def _read(self, cursor: int) -> None:
        asm = self._asm
        try:
            result = await self._client._request(
                "process/read", {"processId": self.process_id, "afterSeq": cursor, "waitMs": 0}
            )
            snap = decode_read(result)
        except (ExecServerError, RemoteProtocolError) as exc:
            asm.on_read_failed()
            self._fail(exc)
            return
        except asyncio.CancelledError:
            asm.on_read_failed()
            raise
        except TransportError:
            asm.on_read_failed()
            failure = self._client._failure
            if failure is not None:
                self._fail(failure)
            # Otherwise the client is reconnecting; _on_reconnected asks again.
            return
        asm.on_read(snap)
        self._pump()
        if asm.exited and not asm.closed and not self._result.done():
            self._arm_stall_timer()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- timers -----------------------------------------------------------------------------------

    def _gap_expired(self) -> None:
        self._gap_timer = None
        if self._gap_cursor != self._asm.released:
            self._pump()  # progress was made: the hole (if any) is a new one and gets its own grace
            return
        self._gap_due = True
        try:
            self._pump()
        finally:
            self._gap_due = False

    def _arm_stall_timer(self) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
        self._stall_timer = asyncio.get_running_loop().call_later(self._stall_timeout, self._stalled)

    def _stalled(self) -> None:
        self._stall_timer = None
        if not self._result.done():
            logger.info("%s: exited but not closed after %gs; reading", self.process_id, self._stall_timeout)
            self._asm.on_lost()
            self._pump()

    def _cancel_gap_timer(self) -> None:
        if self._gap_timer is not None:
            self._gap_timer.cancel()
            self._gap_timer = None

    def _cancel_timers(self) -> None:
        self._cancel_gap_timer()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
