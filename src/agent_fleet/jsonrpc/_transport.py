"""The byte pipe under a ``Connection``: the ``Transport`` protocol and ``StreamTransport`` (an asyncio
stream pair, e.g. a child's stdout and stdin)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

__all__ = ["StreamTransport", "Transport"]


class Transport(Protocol):
    """A byte pipe under a ``Connection``.

    ``receive`` returns some bytes, ``b""`` at EOF; it may raise (``TransportError`` with an exit code or
    stderr tail is the richest cause) and that exception becomes the connection's close cause. ``send``
    must write the whole message or nothing even if cancelled while waiting for backpressure. ``close``
    must be idempotent. Message-oriented transports (websocket) return one message plus ``b"\\n"``.
    """

    async def receive(self) -> bytes: ...

    async def send(self, data: bytes) -> None: ...

    async def close(self) -> None: ...


class StreamTransport:
    """``Transport`` over an asyncio stream pair, e.g. a child's stdout (reader) and stdin (writer).

    ``close()`` flushes buffered output for at most ``close_timeout`` seconds, then aborts the writer:
    a peer that stopped reading must not make closing hang.
    """

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, close_timeout: float = 2.0
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._close_timeout = close_timeout

    async def receive(self) -> bytes:
        return await self._reader.read(65536)

    async def send(self, data: bytes) -> None:
        # write() buffers the whole message at once, so a cancelled drain() cannot split a message.
        self._writer.write(data)
        await self._writer.drain()

    async def close(self) -> None:
        if self._writer.is_closing():
            return
        self._writer.close()
        # wait_closed() awaits a future shared with the stream protocol; cancelling it (as a timeout
        # would) breaks that protocol later (InvalidStateError), so bound it with asyncio.wait instead.
        waiter = asyncio.ensure_future(self._writer.wait_closed())
        waiter.add_done_callback(_consume_result)  # an OSError here only means the peer is gone
        done, _ = await asyncio.wait([waiter], timeout=self._close_timeout)
        if not done:
            self._writer.transport.abort()


def _consume_result(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
