"""``EventStream``: a session's ``text/event-stream`` answer.

sse-starlette's ``EventSourceResponse`` runs four anyio tasks per stream and a timeout scope around
every chunk; for a short turn read through the daemon that was 0.4 ms of CPU of about 6
(``bench/serve_overhead.py``). This one writes the stream from one task, ends it when the client goes
(a second task waits for ``http.disconnect``), and sends a comment line every ``ping`` seconds (a
proxy closes a connection it sees idle). The content is an async iterator of ready-made event bytes;
it is closed (its ``finally`` runs: the reader is counted off its session) whichever way the answer
ends. The session streams end on their own when the daemon drains (``_stream.read_stream``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

__all__ = ["EventStream"]

_PING = b": ping\n\n"


class EventStream(Response):
    """``text/event-stream`` from ``content`` (see the module docstring)."""

    media_type = "text/event-stream"

    def __init__(
        self,
        content: AsyncIterator[bytes],
        *,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        ping: float = 15.0,
    ) -> None:
        self.content = content
        self.status_code = status_code
        self.ping = ping
        self.background = None
        # As sse-starlette's: never cached, never buffered by a proxy (nginx).
        self.init_headers({"Cache-Control": "no-store", "X-Accel-Buffering": "no", **(headers or {})})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        if scope.get("method") == "HEAD":  # headers only: the stream would never end for nobody
            await self._close_content()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        lock = asyncio.Lock()
        tasks = [
            asyncio.ensure_future(self._write(send, lock)),
            asyncio.ensure_future(self._disconnected(receive)),
            asyncio.ensure_future(self._pings(send, lock)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        writer = tasks[0]
        if not writer.cancelled() and writer.exception() is not None:
            raise writer.exception()  # type: ignore[misc]  # (a broken reader: uvicorn logs it)

    async def _write(self, send: Send, lock: asyncio.Lock) -> None:
        try:
            async for chunk in self.content:
                async with lock:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            async with lock:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await self._close_content()

    async def _close_content(self) -> None:
        aclose = getattr(self.content, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(aclose())

    @staticmethod
    async def _disconnected(receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _pings(self, send: Send, lock: asyncio.Lock) -> None:
        while True:
            await asyncio.sleep(self.ping)
            async with lock:
                await send({"type": "http.response.body", "body": _PING, "more_body": True})
