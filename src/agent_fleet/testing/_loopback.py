"""What the scripted servers share: the loopback lifecycle, the script, and the HTTP plumbing.

A ThreadingHTTPServer on loopback in a daemon thread -- a thread, not the caller's event loop, so a
server keeps answering while a test blocks and one server can feed several child processes and
event loops at once. ``ScriptedServer`` answers each model request from a responder, a FIFO queue
or a default; ``ScriptedHandler`` reads JSON bodies and writes JSON or server-sent events.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

RequestT = TypeVar("RequestT")
ReplyT = TypeVar("ReplyT")

_ids = itertools.count(1)


def next_id(prefix: str, *, width: int = 0) -> str:
    """A fresh id for a scripted reply (``resp_7``, ``msg_000012``): unique across all servers."""
    return f"{prefix}_{next(_ids):0{width}d}"


class LoopbackServer:
    """Base class: subclasses set ``handler_class`` (its ``owner`` becomes the server instance)."""

    handler_class: ClassVar[type[BaseHTTPRequestHandler]]
    thread_name: ClassVar[str] = "scripted-server"

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host, self._port = host, port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); raises ``RuntimeError`` before ``start()``."""
        if self._httpd is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    def start(self) -> Self:
        if self._httpd is not None:
            return self
        handler = type("Handler", (self.handler_class,), {"owner": self})
        self._httpd = ThreadingHTTPServer((self._host, self._port), handler)
        self._httpd.daemon_threads = True
        # serve_forever notices shutdown() only between polls: at its default 0.5 s, every stop() (and so
        # every test using a server) waited up to half a second.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class ScriptedServer(LoopbackServer, Generic[RequestT, ReplyT]):
    """A ``LoopbackServer`` answering model requests from a script; see the subclasses."""

    def __init__(
        self,
        replies: Iterable[ReplyT],
        *,
        responder: Callable[[RequestT], ReplyT | None] | None,
        default: ReplyT,
        host: str,
        port: int,
    ) -> None:
        self._queue: deque[ReplyT] = deque(replies)
        self.responder = responder
        self.default = default
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._stopped = False
        self._requests: list[RequestT] = []
        super().__init__(host=host, port=port)
        self.unscripted = 0

    def enqueue(self, *replies: ReplyT) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def requests(self) -> list[RequestT]:
        """Model requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    async def wait_for_request(
        self, match: Callable[[RequestT], bool] | None = None, *, count: int = 1
    ) -> RequestT:
        """Wait until the ``count``-th request (matching ``match``, when given) has arrived; return it.

        For a test that must act while the agent is mid-turn (the reply may still be on its way).
        Waits in a worker thread, so the event loop keeps running; bound it with ``asyncio.timeout``.
        Raises ``RuntimeError`` if the server stops first.
        """
        cancelled = False

        def matching() -> list[RequestT]:
            return [r for r in self._requests if match is None or match(r)]

        def wait() -> RequestT:
            with self._arrived:
                self._arrived.wait_for(lambda: cancelled or self._stopped or len(matching()) >= count)
                found = matching()
                if len(found) < count:
                    raise RuntimeError(f"gave up after {len(found)} of {count} requests")
                return found[count - 1]

        try:
            return await asyncio.to_thread(wait)
        except asyncio.CancelledError:
            with self._arrived:  # release the worker thread
                cancelled = True
                self._arrived.notify_all()
            raise

    def stop(self) -> None:
        with self._arrived:
            self._stopped = True
            self._arrived.notify_all()
        super().stop()

    @property
    def pending_replies(self) -> int:
        with self._lock:
            return len(self._queue)

    def _answer(self, request: RequestT) -> ReplyT:
        """Record a model request and choose its reply: the responder's, else ``_scripted``."""
        with self._arrived:
            self._requests.append(request)
            self._arrived.notify_all()
        if self.responder is not None:
            chosen = self.responder(request)
            if chosen is not None:
                return chosen
        return self._scripted(request)

    def _scripted(self, request: RequestT) -> ReplyT:
        """The next queued reply, else ``default`` (counted in ``unscripted``)."""
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            self.unscripted += 1
        return self.default


class ScriptedHandler(BaseHTTPRequestHandler):
    """HTTP plumbing for a scripted server's handler; ``owner`` is the server instance."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read .requests instead
        pass

    def _extra_headers(self) -> dict[str, str]:
        """Headers added to every response (e.g. the request id the real API sends)."""
        return {}

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        with contextlib.suppress(ValueError):
            return json.loads(raw)
        return raw.decode("utf-8", "replace")

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**self._extra_headers(), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _send_sse(
        self, frames: Iterable[bytes], event_delay: float, headers: Mapping[str, str] | None = None
    ) -> None:
        """Stream SSE ``frames`` (flushed one by one, ``event_delay`` apart), then close."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        for name, value in {**self._extra_headers(), **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for frame in frames:
                self.wfile.write(frame)
                self.wfile.flush()
                if event_delay:
                    time.sleep(event_delay)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up (e.g. the turn was interrupted): nothing to deliver to


def split_words(text: str) -> list[str]:
    """``text`` in streaming pieces: each word with its following space."""
    if not text:
        return []
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]
