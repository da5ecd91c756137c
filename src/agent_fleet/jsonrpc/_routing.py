"""Routed dispatch for ``Connection``: a subscription per routing key, each drained by one worker task
(see the ``connection`` module docstring)."""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from agent_fleet.jsonrpc.core import Notification, Request

if TYPE_CHECKING:
    from agent_fleet.jsonrpc.connection import Connection, NotificationHandler, RequestHandler

__all__ = ["DispatchWorker", "Subscription"]

_Handler: TypeAlias = Callable[[Any], object]


class DispatchWorker:
    """A FIFO of ``(handler, message)`` drained by one lazily created task."""

    __slots__ = ("_conn", "_finishing", "_label", "_queue", "_task", "_wakeup")

    def __init__(self, conn: Connection, label: str) -> None:
        self._conn = conn
        self._label = label
        self._queue: deque[tuple[_Handler, Notification | Request]] = deque()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._finishing = False

    def put(self, handler: _Handler, msg: Notification | Request) -> None:
        queue = self._queue
        if queue:
            # The worker only sleeps on an empty queue, so it is already awake: no wake-up per message.
            queue.append((handler, msg))
            return
        queue.append((handler, msg))
        if self._task is None:
            self._task = self._conn._spawn(self._run(), f"{self._conn.name}:{self._label}")
        self._wakeup.set()

    def finish(self) -> None:
        """Let the worker exit once its queue is empty."""
        self._finishing = True
        self._wakeup.set()

    async def _run(self) -> None:
        queue = self._queue
        conn = self._conn
        isawaitable = inspect.isawaitable
        while True:
            while queue:
                handler, msg = queue.popleft()
                # Called inline, not through a coroutine per message: most handlers are sync and this
                # loop runs once per notification. Exceptions are handled as documented on Connection.
                try:
                    result = handler(msg)
                    if result is not None and isawaitable(result):
                        await result
                    continue
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if task is not None and task.cancelling():
                        raise  # the worker itself is being cancelled
                    conn._handler_failed(msg)
                except Exception:
                    conn._handler_failed(msg)
                await conn._reply_internal_error(msg)
            if self._finishing:
                return
            self._wakeup.clear()
            await self._wakeup.wait()


class Subscription:
    """A routing-key registration made by ``Connection.subscribe``; ``close()`` ends it."""

    __slots__ = ("_closed", "_conn", "_key", "_on_notification", "_on_request", "_worker")

    def __init__(
        self,
        conn: Connection,
        key: str,
        worker: DispatchWorker,
        on_notification: NotificationHandler | None,
        on_request: RequestHandler | None,
    ) -> None:
        self._conn = conn
        self._key = key
        self._worker = worker
        self._on_notification = on_notification
        self._on_request = on_request
        self._closed = False

    @property
    def key(self) -> str:
        return self._key

    @property
    def closed(self) -> bool:
        """True after ``close()`` or once the connection has closed."""
        return self._closed

    def close(self) -> None:
        """Unsubscribe (idempotent). New messages for the key go to the fallback; already queued ones
        are still delivered to this subscription's handlers, then its worker exits."""
        if self._closed:
            return
        self._closed = True
        self._conn._unsubscribe(self)
        self._worker.finish()
