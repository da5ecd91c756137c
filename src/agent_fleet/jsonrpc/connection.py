"""The asyncio shell around ``JsonRpcCore``: one reader task, serialised writes, routed dispatch.

Theory of operation
-------------------
A single reader task pulls bytes from the ``Transport``, feeds the core and dispatches every decoded
message *synchronously* before reading again:

* ``Response`` / ``ErrorResponse`` resolve the future of the matching ``request()`` call; one to a
  request that was sent but whose caller stopped waiting (a timeout under overload, a cancellation) is
  *late*: the peer did the work, so it goes to ``on_late_response`` (with the request's method and
  params) for whoever must undo it, instead of being reported as a protocol error;
* ``Notification`` / ``Request`` are routed: ``route_key(method, params)`` picks a subscription, else the
  fallback. Each subscription (and the fallback) owns a FIFO queue drained by one worker task, so a slow
  handler delays only its own key, never the reader or another key. Routing decisions are taken when a
  message is read; a server ``Request`` with no handler at all is answered -32601 at once;
* ``ProtocolError`` is logged and passed to ``on_protocol_error``; the reader keeps going.

Because a chunk is fully dispatched (and at EOF ``feed_eof`` is flushed) before the connection closes, a
response that arrives together with EOF still reaches its waiter.

Timeouts, cancellation and backpressure live here only. Outgoing backpressure comes from
``Transport.send`` (``drain``); incoming queues are unbounded by design, because blocking the reader on
one slow handler would stall every other key and every pending response.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import TracebackType
from typing import Any, Final, TypeAlias

from agent_fleet.errors import (
    ConnectionClosed,
    RemoteProtocolError,
    RequestTimeout,
    RPCError,
    TransportError,
    UsageError,
)
from agent_fleet.jsonrpc._late import LateAnswers, LateResponseHandler
from agent_fleet.jsonrpc._routing import DispatchWorker, Subscription
from agent_fleet.jsonrpc._transport import StreamTransport, Transport
from agent_fleet.jsonrpc.core import (
    ErrorResponse,
    JsonRpcCore,
    Message,
    Notification,
    ProtocolError,
    Request,
    Response,
)

__all__ = [
    "Connection",
    "LateResponseHandler",
    "NotificationHandler",
    "RequestHandler",
    "RouteKey",
    "StreamTransport",
    "Subscription",
    "Transport",
    "param_key",
]

logger = logging.getLogger("agent_fleet.jsonrpc")

# Handlers may be plain functions or coroutine functions; an awaitable result is awaited, else ignored.
# A request handler replies itself, with Connection.respond / respond_error.
NotificationHandler: TypeAlias = Callable[[Notification], object]
RequestHandler: TypeAlias = Callable[[Request], object]
RouteKey: TypeAlias = Callable[[str, Any], str | None]

_Handler: TypeAlias = Callable[[Any], object]
_PERMANENT_CODES: Final = frozenset(
    {RPCError.PARSE_ERROR, RPCError.INVALID_REQUEST, RPCError.METHOD_NOT_FOUND}
)


def param_key(name: str) -> RouteKey:
    """Return a ``route_key`` that reads ``params[name]`` when params is a dict and the value a str."""

    def key(method: str, params: Any) -> str | None:
        if isinstance(params, dict):
            value = params.get(name)
            if isinstance(value, str):
                return value
        return None

    key.__name__ = f"param_key_{name}"
    return key


async def _await(aw: Awaitable[object]) -> None:
    await aw


class Connection:
    """A JSON-RPC 2.0 connection over a ``Transport``; both peers may send requests.

    Calling order: construct, then ``start()`` (sync, needs a running loop) or ``async with conn:``;
    then ``request``/``notify``/``respond``; finally ``close()``. ``subscribe``/``set_fallback`` may be
    called any time before close, ideally before ``start()`` so no early message falls through.

    Handlers (sync or async) run on per-subscription worker tasks, in arrival order per key. An exception
    in a handler is logged and dispatch goes on; if it came from a request handler that had not replied
    yet, the peer gets -32603 so it does not hang. Request handlers reply with ``respond``/``respond_error``.

    Close (EOF, read error or ``close()``): every pending ``request()`` fails with ``ConnectionClosed``
    (``.cause`` and ``__cause__`` are the close cause), ``on_close`` callbacks fire once, the transport is
    closed. Messages already queued for handlers are still delivered after close (workers drain, then
    exit; ``close()`` does not wait for them), so handlers may see ``ConnectionClosed`` when replying.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        core: JsonRpcCore | None = None,
        route_key: RouteKey | None = None,
        retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_protocol_error: Callable[[ProtocolError], object] | None = None,
        on_late_response: LateResponseHandler | None = None,
        name: str = "jsonrpc",
    ) -> None:
        self._transport = transport
        self._core = core if core is not None else JsonRpcCore()
        self._route_key = route_key
        self._retry_delays = tuple(retry_delays)
        self._sleep = sleep
        self._on_protocol_error = on_protocol_error
        self.name = name
        self._late = LateAnswers(self._core, name, on_late_response)

        self._waiters: dict[int | str, asyncio.Future[Any]] = {}
        self._inbound: set[int | str] = set()  # ids of peer requests not yet answered
        self._write_lock = asyncio.Lock()
        self._reader_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._subs: dict[str, Subscription] = {}
        self._fallback: tuple[NotificationHandler | None, RequestHandler | None] = (None, None)
        self._fallback_worker = DispatchWorker(self, "fallback")
        self._close_callbacks: list[Callable[[BaseException | None], object]] = []
        self._closed = False
        self._close_cause: BaseException | None = None

        self.requests_sent: Counter[str] = Counter()
        """Requests written, by method (retries count once per attempt)."""
        self.notifications_received = 0
        self.bytes_received = 0
        self.bytes_sent = 0

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the reader task. Sync; must run inside the event loop. Raises ``UsageError`` if called
        twice or after close."""
        if self._reader_task is not None or self._closed:
            raise UsageError(f"{self.name}: start() called twice or after close()")
        self._reader_task = self._spawn(self._read_loop(), f"{self.name}:reader")

    async def __aenter__(self) -> Connection:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def close_cause(self) -> BaseException | None:
        """Why the connection closed: ``ConnectionClosed`` at EOF, the read error, or ``close(cause)``."""
        return self._close_cause

    @property
    def core(self) -> JsonRpcCore:
        """The protocol core (e.g. to inspect ``core.pending``); do not feed it or encode through it."""
        return self._core

    def on_close(self, cb: Callable[[BaseException | None], object]) -> None:
        """Call ``cb(cause)`` exactly once when the connection closes (at once if already closed).

        Callbacks run synchronously inside the closing code; exceptions are logged.
        """
        if self._closed:
            self._run_close_callback(cb)
        else:
            self._close_callbacks.append(cb)

    async def close(self, cause: BaseException | None = None) -> None:
        """Close the connection (idempotent; later calls and their ``cause`` are ignored).

        Fails pending requests with ``ConnectionClosed(cause=cause)``, fires ``on_close``, stops the
        reader, lets handler workers drain what is queued (not awaited) and closes the transport.
        """
        if not self._mark_closed(cause):
            return
        reader = self._reader_task
        if reader is not None and reader is not asyncio.current_task() and not reader.done():
            reader.cancel()
            await asyncio.wait([reader])
        await self._close_transport()

    # -- outgoing ---------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-request timeout is the contract
    ) -> Any:
        """Send a request and return its ``result``.

        ``timeout`` (seconds, None = wait forever) covers writing and waiting. Raises ``RPCError`` for an
        error response, ``RequestTimeout`` on timeout, ``ConnectionClosed`` if the connection is or gets
        closed first, ``TransportError`` if the write fails, ``RemoteProtocolError`` for a malformed reply,
        ``UsageError`` before ``start()``. On timeout, cancellation or any failure nothing leaks: the id of
        a request never written is forgotten; one written may still be answered (the peer was only
        slow), and that late answer goes to ``on_late_response`` (see the module docstring).
        """
        if self._reader_task is None:
            raise UsageError(f"{self.name}: call start() before request()")
        self._raise_if_closed()
        rid, data = self._core.encode_request(method, params)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[rid] = fut
        self._late.sent(rid, params)
        written: list[bool] = []
        answered = False
        try:
            if timeout is None:
                await self._send(data, written)
                self.requests_sent[method] += 1
                result = await fut
            else:
                try:
                    async with asyncio.timeout(timeout):
                        await self._send(data, written)
                        self.requests_sent[method] += 1
                        result = await fut
                except TimeoutError:
                    if not fut.done() or fut.cancelled():
                        raise RequestTimeout(method, timeout) from None
                    # The answer came as the time ran out (the timer fired before we resumed): it is
                    # the answer, not a timeout. Under overload this made done work look failed.
                    result = fut.result()
            answered = True
            return result
        finally:
            if self._waiters.pop(rid, None) is not None:
                if written and not self._closed:
                    self._late.expire(rid, params)
                else:
                    self._core.forget(rid)
            elif not answered and fut.done() and not fut.cancelled() and fut.exception() is None:
                # Answered, but our caller is gone (cancelled): the peer did the work all the same.
                self._late_answer(Response(rid, fut.result(), method))
            self._late.done(rid)
            if fut.done() and not fut.cancelled():
                fut.exception()  # close() may have failed it while we were still sending: mark it seen

    async def request_with_retry(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - per-attempt timeout is the contract
        attempts: int = 3,
    ) -> Any:
        """``request()`` up to ``attempts`` times; ``timeout`` applies to each attempt.

        Retried: ``RequestTimeout``, write failures (``TransportError`` other than ``ConnectionClosed``)
        and ``RPCError`` except codes -32700, -32600, -32601. Before attempt *n* (n >= 2) it awaits
        ``sleep(retry_delays[n - 2])`` (the last delay repeats; no delays means none). Raised at once:
        ``ConnectionClosed``, the permanent ``RPCError`` codes, ``RemoteProtocolError``, ``UsageError``.
        After the last attempt the last error is raised.
        """
        if attempts < 1:
            raise UsageError("attempts must be >= 1")
        for attempt in range(1, attempts + 1):
            try:
                return await self.request(method, params, timeout=timeout)
            except ConnectionClosed:
                raise
            except RPCError as exc:
                if exc.code in _PERMANENT_CODES or attempt == attempts:
                    raise
                error: Exception = exc
            except (RequestTimeout, TransportError) as exc:
                if attempt == attempts:
                    raise
                error = exc
            delays = self._retry_delays
            delay = delays[min(attempt - 1, len(delays) - 1)] if delays else 0.0
            logger.info(
                "%s: %s attempt %d/%d failed (%s); retrying in %gs",
                self.name,
                method,
                attempt,
                attempts,
                error,
                delay,
            )
            await self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification. Raises ``ConnectionClosed`` or ``TransportError``."""
        await self._send(self._core.encode_notification(method, params))

    async def respond(self, id: int | str, result: Any) -> None:
        """Answer a peer ``Request``; pass ``request.id`` unchanged (int or str)."""
        self._inbound.discard(id)
        await self._send(self._core.encode_response(id, result))

    async def respond_error(self, id: int | str | None, code: int, message: str, data: Any = None) -> None:
        """Answer a peer ``Request`` with a JSON-RPC error."""
        if id is not None:
            self._inbound.discard(id)
        await self._send(self._core.encode_error(id, code, message, data))

    async def _send(self, data: bytes, written: list[bool] | None = None) -> None:
        self._raise_if_closed()
        async with self._write_lock:
            self._raise_if_closed()
            if written is not None:
                written.append(True)  # from here on the peer may get it, even if we are cancelled
            try:
                await self._transport.send(data)
            except TransportError:
                raise
            except (OSError, RuntimeError) as exc:
                # RuntimeError: some transports raise it when writing to a closed stream.
                if self._closed:
                    raise self._closed_error("connection closed while sending") from exc
                raise TransportError(f"{self.name}: write failed: {exc!r}") from exc
        if self._closed:
            # Closing aborted the transport under us: delivery is unknown, so do not report success.
            raise self._closed_error("connection closed while sending")
        self.bytes_sent += len(data)

    def _raise_if_closed(self) -> None:
        if self._closed:
            raise self._closed_error("connection is closed")

    def _closed_error(self, what: str) -> ConnectionClosed:
        cause = self._close_cause
        exc = ConnectionClosed(
            f"{self.name}: {what}" + (f" ({cause})" if cause is not None else ""),
            cause=cause,
            exit_code=cause.exit_code if isinstance(cause, TransportError) else None,
            stderr_tail=cause.stderr_tail if isinstance(cause, TransportError) else "",
        )
        exc.__cause__ = cause
        return exc

    # -- routing ----------------------------------------------------------------------------------

    def subscribe(
        self,
        key: str,
        *,
        on_notification: NotificationHandler | None = None,
        on_request: RequestHandler | None = None,
    ) -> Subscription:
        """Route messages whose ``route_key`` is ``key`` to these handlers, on a worker of their own.

        A kind without a handler here falls through to the fallback. Raises ``UsageError`` if ``key``
        already has a live subscription, ``ConnectionClosed`` if the connection is closed.
        """
        self._raise_if_closed()
        if key in self._subs:
            raise UsageError(f"{self.name}: routing key {key!r} is already subscribed")
        sub = Subscription(self, key, DispatchWorker(self, f"sub:{key}"), on_notification, on_request)
        self._subs[key] = sub
        return sub

    def set_fallback(
        self,
        *,
        on_notification: NotificationHandler | None = None,
        on_request: RequestHandler | None = None,
    ) -> None:
        """Handle messages with no routing key or no subscriber (replaces the previous fallback)."""
        self._fallback = (on_notification, on_request)

    def set_late_handler(self, handler: LateResponseHandler | None) -> None:
        """Handle the late answers of requests whose caller stopped waiting (replaces the previous)."""
        self._late.handler = handler

    def _unsubscribe(self, sub: Subscription) -> None:
        if self._subs.get(sub.key) is sub:
            del self._subs[sub.key]

    # -- reading and dispatch ---------------------------------------------------------------------

    async def _read_loop(self) -> None:
        core = self._core
        dispatch = self._dispatch
        receive = self._transport.receive
        cause: BaseException
        try:
            while True:
                data = await receive()
                if not data:
                    dispatch(core.feed_eof())
                    cause = ConnectionClosed(f"{self.name}: peer closed the connection")
                    break
                self.bytes_received += len(data)
                dispatch(core.feed(data))
        except asyncio.CancelledError:
            # close() cancels us after marking closed; any other canceller must not leave waiters hanging.
            self._mark_closed(ConnectionClosed(f"{self.name}: reader task cancelled"))
            raise
        except Exception as exc:
            cause = exc
        if self._mark_closed(cause):
            await self._close_transport()

    def _dispatch(self, messages: list[Message]) -> None:
        route_key, subs = self._route_key, self._subs
        notes = 0
        for msg in messages:
            if type(msg) is Notification:
                notes += 1
                # Routed inline (as _route_request does for requests): this runs once per streamed
                # event.
                key = None
                if route_key is not None:
                    try:
                        key = route_key(msg.method, msg.params)
                    except Exception:
                        logger.exception("%s: route_key failed for %s", self.name, msg.method)
                if key is not None:
                    sub = subs.get(key)
                    if sub is not None and sub._on_notification is not None:
                        queue = sub._worker._queue
                        if queue:  # the worker is awake (see DispatchWorker.put): just queue it
                            queue.append((sub._on_notification, msg))
                        else:
                            sub._worker.put(sub._on_notification, msg)
                        continue
                self._unrouted(msg, 0)
            elif type(msg) is Response:
                fut = self._waiters.pop(msg.id, None)
                if fut is not None and not fut.done():
                    fut.set_result(msg.result)
                else:  # (a waiter already cancelled: its caller is gone, the answer is late all the same)
                    self._late_answer(msg)
            elif type(msg) is Request:
                self._inbound.add(msg.id)
                self._route_request(msg)
            elif type(msg) is ErrorResponse:
                self._on_error_response(msg)
            elif type(msg) is ProtocolError:
                self._on_bad_input(msg)
        self.notifications_received += notes

    def _route_request(self, msg: Request) -> None:
        # The same routing as for notifications in _dispatch (inlined there: once per event).
        key: str | None = None
        if self._route_key is not None:
            try:
                key = self._route_key(msg.method, msg.params)
            except Exception:
                logger.exception("%s: route_key failed for %s", self.name, msg.method)
        sub = self._subs.get(key) if key is not None else None
        if sub is not None and sub._on_request is not None:
            sub._worker.put(sub._on_request, msg)
            return
        self._unrouted(msg, 1)

    def _unrouted(self, msg: Notification | Request, kind: int) -> None:
        """``msg`` has no subscriber (or none for its kind): the fallback, else -32601 or drop.

        ``kind`` indexes the (on_notification, on_request) pair: 0 = notification, 1 = request.
        """
        fallback = self._fallback[kind]
        if fallback is not None:
            self._fallback_worker.put(fallback, msg)
        elif isinstance(msg, Request):
            logger.warning("%s: no handler for server request %s; replying -32601", self.name, msg.method)
            self._spawn(self._reply_unhandled(msg), f"{self.name}:unhandled")
        else:
            logger.debug("%s: dropped notification %s (no handler)", self.name, msg.method)

    async def _reply_unhandled(self, msg: Request) -> None:
        with contextlib.suppress(TransportError):
            await self.respond_error(
                msg.id, RPCError.METHOD_NOT_FOUND, "Method not found", {"method": msg.method}
            )

    def _on_error_response(self, msg: ErrorResponse) -> None:
        if msg.id is None:
            logger.warning(
                "%s: peer reported error %s without a request id: %s", self.name, msg.code, msg.message
            )
            return
        fut = self._waiters.pop(msg.id, None)
        if fut is not None and not fut.done():
            fut.set_exception(RPCError(msg.code, msg.message, msg.data, method=msg.method))
        else:
            self._late_answer(msg)

    def _late_answer(self, msg: Response | ErrorResponse) -> None:
        result = self._late.answer(msg)
        if inspect.isawaitable(result):
            self._spawn(_await(result), f"{self.name}:on_late_response")

    def _on_bad_input(self, msg: ProtocolError) -> None:
        logger.warning(
            "%s: protocol error (%s): %s; line: %r", self.name, msg.kind, msg.detail, msg.line_preview
        )
        if msg.id is not None:
            fut = self._waiters.pop(msg.id, None)
            if fut is not None and not fut.done():
                fut.set_exception(RemoteProtocolError(f"{self.name}: malformed response: {msg.detail}"))
        if self._on_protocol_error is not None:
            try:
                result = self._on_protocol_error(msg)
                if inspect.isawaitable(result):
                    self._spawn(_await(result), f"{self.name}:on_protocol_error")
            except Exception:
                logger.exception("%s: on_protocol_error callback failed", self.name)

    def _handler_failed(self, msg: Notification | Request) -> None:
        logger.exception("%s: handler for %s failed", self.name, msg.method)

    async def _reply_internal_error(self, msg: Notification | Request) -> None:
        # A request whose handler failed before replying must not leave the peer waiting.
        if isinstance(msg, Request) and msg.id in self._inbound and not self._closed:
            with contextlib.suppress(TransportError):
                await self.respond_error(msg.id, RPCError.INTERNAL_ERROR, "Internal error")

    # -- closing ----------------------------------------------------------------------------------

    def _mark_closed(self, cause: BaseException | None) -> bool:
        """Synchronous part of closing; returns False if already closed."""
        if self._closed:
            return False
        self._closed = True
        self._close_cause = cause
        pending = self._core.pending
        for rid, fut in self._waiters.items():
            if not fut.done():
                method = pending.get(rid, "?") if type(rid) is int else "?"
                fut.set_exception(self._closed_error(f"connection closed before the response to {method}"))
        self._waiters.clear()
        self._core.fail_all()
        self._late.clear()
        self._inbound.clear()
        for sub in self._subs.values():
            sub._closed = True
            sub._worker.finish()
        self._subs.clear()
        self._fallback_worker.finish()
        callbacks, self._close_callbacks = self._close_callbacks, []
        for cb in callbacks:
            self._run_close_callback(cb)
        return True

    def _run_close_callback(self, cb: Callable[[BaseException | None], object]) -> None:
        try:
            cb(self._close_cause)
        except Exception:
            logger.exception("%s: on_close callback failed", self.name)

    async def _close_transport(self) -> None:
        try:
            await self._transport.close()
        except Exception:
            logger.debug("%s: error closing transport", self.name, exc_info=True)

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        # The loop holds tasks weakly; keep them alive until done.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
