"""Transports under the exec-server ``Connection``: a websocket, and a spawned ``codex exec-server``.

Both implement ``agent_fleet.jsonrpc.Transport``. The JSON-RPC core frames messages by newline, the
websocket by frame: ``WebSocketTransport.receive`` returns one frame plus ``b"\\n"`` and ``send`` strips
the newline again, so one JSON message is always exactly one frame (what the exec-server expects).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Final

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed as WsConnectionClosed
from websockets.exceptions import ConnectionClosedOK, InvalidHandshake, InvalidURI

from agent_fleet._process import ChildProcess
from agent_fleet.errors import ProviderUnavailable, TransportError
from agent_fleet.jsonrpc import StreamTransport

__all__ = ["ChildTransport", "WebSocketTransport", "spawn_child"]

_STDERR_TAIL_BYTES: Final = 16 * 1024
_KILL_GRACE: Final = 2.0
_TCP_QUICKACK: Final[int | None] = getattr(socket, "TCP_QUICKACK", None)  # Linux only


class WebSocketTransport:
    """``Transport`` over one websocket connection; each text/binary frame is one JSON message.

    ``receive`` returns ``b""`` after a clean close and raises ``TransportError`` after an abnormal one.
    ``send`` writes one text frame. ``close`` is idempotent.

    Latency note: codex 0.163.0's websocket listener does not set TCP_NODELAY, so after answering a
    request its next small frame (e.g. ``process/exited``) waits for our ACK, which Linux delays by
    ~40 ms. On Linux the transport keeps TCP_QUICKACK armed (it is not sticky: re-armed after every
    frame), which removes that stall; elsewhere it is a no-op.
    """

    def __init__(self, ws: ClientConnection) -> None:
        self._ws = ws
        self._sock: socket.socket | None = None
        if _TCP_QUICKACK is not None:
            sock = ws.transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                self._sock = sock
                self._quickack()

    def _quickack(self) -> None:
        sock = self._sock
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK, 1)  # type: ignore[arg-type]
            except OSError:
                self._sock = None

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        open_timeout: float | None = 10.0,
        additional_headers: Mapping[str, str] | None = None,
    ) -> WebSocketTransport:
        """Open a websocket to ``url``. Raises ``TransportError`` when it cannot be opened."""
        try:
            ws = await connect(
                url,
                open_timeout=open_timeout,
                additional_headers=dict(additional_headers) if additional_headers else None,
                compression=None,  # tiny JSON messages: deflate costs latency and buys nothing
                max_size=None,  # a process/read answer can carry 1 MiB of retained output in base64
                proxy=None,  # an exec-server is reached directly (and usually on loopback)
            )
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise TransportError(f"cannot open websocket {url}: {exc!r}") from exc
        return cls(ws)

    async def receive(self) -> bytes:
        try:
            data = await self._ws.recv(decode=False)
        except ConnectionClosedOK:
            return b""
        except WsConnectionClosed as exc:
            raise TransportError(f"websocket closed abnormally: {exc}") from exc
        self._quickack()
        if isinstance(data, str):  # pragma: no cover - decode=False always yields bytes
            data = data.encode()
        if b"\n" in data:
            # A raw newline can only be insignificant JSON whitespace; keep one frame one line.
            data = data.replace(b"\r\n", b" ").replace(b"\n", b" ")
        return data + b"\n"

    async def send(self, data: bytes) -> None:
        try:
            await self._ws.send(data.rstrip(b"\n"), text=True)
        except WsConnectionClosed as exc:
            raise TransportError(f"websocket closed: {exc}") from exc

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._ws.close()


class ChildTransport:
    """``Transport`` over a spawned ``codex exec-server --listen stdio`` child's stdin/stdout.

    At EOF on stdout the child's exit status and stderr tail become the close cause (a
    ``TransportError``). ``close`` closes stdin (a stdio server then stops its processes and exits;
    ``stops_on_eof=False`` skips that wait), then ends the child and every process it started
    (SIGTERM, then SIGKILL; ``agent_fleet._process``): nothing outlives the transport.
    """

    def __init__(self, proc: ChildProcess, *, stops_on_eof: bool = True) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._proc = proc
        self._stream = StreamTransport(proc.stdout, proc.stdin)
        self._closed = False
        self._stops_on_eof = stops_on_eof

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def stderr_tail(self) -> str:
        return self._proc.stderr_tail()

    async def receive(self) -> bytes:
        data = await self._stream.receive()
        if data:
            return data
        code: int | None = None
        with contextlib.suppress(TimeoutError):
            code = await asyncio.wait_for(self._proc.wait(), _KILL_GRACE)
        await self._proc.stderr_done(0.5)
        raise TransportError(
            f"codex exec-server closed its output (exit code {code})",
            exit_code=code,
            stderr_tail=self.stderr_tail(),
        )

    async def send(self, data: bytes) -> None:
        try:
            await self._stream.send(data)
        except (ConnectionError, RuntimeError) as exc:
            raise TransportError(
                f"cannot write to codex exec-server: {exc!r}",
                exit_code=self._proc.returncode,
                stderr_tail=self.stderr_tail(),
            ) from exc

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            await self._stream.close()  # closing stdin stops a stdio server
        await self._proc.stop(grace=_KILL_GRACE, stdin_grace=_KILL_GRACE if self._stops_on_eof else 0.0)


async def spawn_child(
    codex: str | os.PathLike[str],
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
) -> ChildProcess:
    """Start ``codex <args>`` with piped stdio. Raises ``ProviderUnavailable`` if it cannot start."""
    try:
        return await ChildProcess.start(
            [codex, *args],
            env=env,
            tail_bytes=_STDERR_TAIL_BYTES,
            grace=_KILL_GRACE,
            name="codex-exec-server",
        )
    except OSError as exc:
        raise ProviderUnavailable(f"cannot start {os.fspath(codex)} {' '.join(args)}: {exc}") from exc
