"""The lifecycle shared by the scripted servers: a ThreadingHTTPServer on loopback in a daemon thread.

A thread, not the caller's event loop, so a server keeps answering while a test blocks and one
server can feed several child processes and event loops at once.
"""

from __future__ import annotations

import itertools
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import ClassVar, Self

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
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=self.thread_name, daemon=True)
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
