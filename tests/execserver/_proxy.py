"""A fault-injecting websocket proxy between an ``ExecServerClient`` and the real ``codex exec-server``.

Every server->client message passes through ``rule(msg)``, which returns what to forward instead: the
message itself, nothing (drop), a modified copy, several messages (release a held one), ``Later(delay,
msg)`` (deliver after a delay), raw text (garbage), or ``DROP_CONNECTION`` (abort the client's socket
after forwarding what precedes it). ``refuse(seconds)`` answers new connections with HTTP 503 for a while,
so a reconnecting client has to retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response


@dataclass(frozen=True)
class Later:
    delay: float
    msg: Any


DROP_CONNECTION = object()

Rule = Callable[[dict[str, Any]], list[Any]]


def passthrough(msg: dict[str, Any]) -> list[Any]:
    return [msg]


class FaultProxy:
    def __init__(self, upstream: str, rule: Rule = passthrough) -> None:
        self.upstream = upstream
        self.rule = rule
        self.client_rule: Callable[[dict[str, Any]], dict[str, Any]] = lambda m: m
        self.requests: Counter[str] = Counter()
        self.connections = 0
        self._refuse_until = 0.0
        self._server: Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._live: set[ServerConnection] = set()
        self.url = ""

    async def __aenter__(self) -> FaultProxy:
        self._server = await serve(
            self._handle,
            "127.0.0.1",
            0,
            compression=None,
            max_size=None,
            process_request=self._process_request,
        )
        port = next(iter(self._server.sockets)).getsockname()[1]
        self.url = f"ws://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in list(self._tasks):
            task.cancel()
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await self._server.wait_closed()

    def refuse(self, seconds: float) -> None:
        self._refuse_until = time.monotonic() + seconds

    def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        if time.monotonic() < self._refuse_until:
            return Response(503, "Service Unavailable", Headers(), b"down for the test\n")
        return None

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, client: ServerConnection) -> None:
        self.connections += 1
        self._live.add(client)
        try:
            async with connect(self.upstream, compression=None, max_size=None, proxy=None) as up:
                c2s = asyncio.ensure_future(self._client_to_server(client, up))
                s2c = asyncio.ensure_future(self._server_to_client(up, client))
                _, pending = await asyncio.wait({c2s, s2c}, return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
        finally:
            self._live.discard(client)

    async def _client_to_server(self, client: ServerConnection, up: Any) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for raw in client:
                msg = json.loads(raw)
                if "method" in msg and "id" in msg:
                    self.requests[msg["method"]] += 1
                await up.send(json.dumps(self.client_rule(msg)))

    async def _server_to_client(self, up: Any, client: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for raw in up:
                for item in self.rule(json.loads(raw)):
                    if item is DROP_CONNECTION:
                        client.transport.abort()  # an abrupt drop: no close frame
                        return
                    if isinstance(item, Later):
                        self._spawn(self._send_later(client, item))
                        continue
                    await client.send(item if isinstance(item, str) else json.dumps(item))

    async def _send_later(self, client: ServerConnection, item: Later) -> None:
        await asyncio.sleep(item.delay)
        with contextlib.suppress(ConnectionClosed):
            await client.send(json.dumps(item.msg))


def nth(method: str, n: int, process_id: str | None = None) -> Callable[[dict[str, Any]], bool]:
    """A predicate true for the n-th (1-based) notification ``method`` (optionally of one process)."""
    count = 0

    def pred(msg: dict[str, Any]) -> bool:
        nonlocal count
        if msg.get("method") != method:
            return False
        if process_id is not None and msg.get("params", {}).get("processId") != process_id:
            return False
        count += 1
        return count == n

    return pred
