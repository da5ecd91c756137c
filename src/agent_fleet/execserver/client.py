"""``ExecServerClient``: a JSON-RPC client for ``codex exec-server`` over a websocket or stdio.

Theory of operation
-------------------
One ``agent_fleet.jsonrpc.Connection`` at a time carries the session. Opening it is the handshake:
``initialize {clientName}`` -> ``{sessionId, environmentInfo}``, then the ``initialized`` notification.
Notifications are routed by ``params.processId`` to the ``RemoteProcess`` that owns the id (see
``agent_fleet.execserver.process`` for how a process completes from pushed events alone).

Connection states::

    connecting --handshake ok--> ready --drop (websocket)--> reconnecting --resumed--> ready
                                   |                              |
                                   | drop (stdio) / close()       | unknown session, deadline passed
                                   v                              v
                                 failed  <------------------------+

Reconnecting (websocket only) opens the same URL again and sends ``initialize`` with
``resumeSessionId``: the server keeps a detached session (and its processes) for about 30 s and
redirects their notifications to the new connection. Whatever was pushed while detached is lost, so
every live process then recovers through one ``process/read`` from its cursor -- output, exit code and
sandbox-denial state. ``-32010`` (session still attached) and transport errors are retried until
``reconnect_timeout``; any other RPC error ends the session. A stdio child cannot be reconnected to: its
processes fail with ``ConnectionClosed`` carrying the child's exit code and stderr tail.

Requests issued while reconnecting wait for the new connection; a request in flight when the
connection drops fails with ``ConnectionClosed`` (it may or may not have been executed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import Any, Final

from agent_fleet._codex_binary import find_codex
from agent_fleet.errors import (
    AgentFleetError,
    ConnectionClosed,
    ProviderUnavailable,
    RequestTimeout,
    RPCError,
    TransportError,
    UsageError,
)
from agent_fleet.execserver._opening import Opening
from agent_fleet.execserver._transport import ChildTransport, WebSocketTransport, spawn_child
from agent_fleet.execserver._wire import to_uri
from agent_fleet.execserver.errors import ExecServerError, ProcessTimeout, translate_rpc_error
from agent_fleet.execserver.fs import FileSystem
from agent_fleet.execserver.process import ProcessResult, RemoteProcess
from agent_fleet.jsonrpc import Connection, JsonRpcCore, Notification, ProtocolError, Transport, param_key

__all__ = ["ExecServerClient", "ExecServerStats"]

logger = logging.getLogger("agent_fleet.execserver")

_RECONNECT_DELAYS: Final = (0.05, 0.1, 0.2, 0.5, 1.0)
_TERMINATE_ON_CLOSE_TIMEOUT: Final = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecServerStats:
    """Traffic counters of a client, summed over every connection it has used."""

    requests: Mapping[str, int] = field(default_factory=dict)
    """Requests sent, by method."""
    notifications_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    reconnects: int = 0

    @property
    def read_calls(self) -> int:
        """``process/read`` requests sent (0 when every process completed from pushed events)."""
        return self.requests.get("process/read", 0)

    @property
    def requests_sent(self) -> int:
        return sum(self.requests.values())


class ExecServerClient:
    """A session with a ``codex exec-server``.

    Create with ``ExecServerClient.connect(url)`` (websocket) or ``ExecServerClient.spawn()`` (a child
    over stdio); use as ``async with ... as client`` or ``client = await ...`` then ``await
    client.close()``. Methods: ``start`` / ``run`` for processes, ``fs`` for files, ``stats`` for
    counters. Not thread-safe; use from one event loop.
    """

    def __init__(
        self,
        open_transport: Callable[[], Awaitable[Transport]],
        *,
        can_reconnect: bool,
        client_name: str = "agent-fleet",
        final_read: bool = False,
        gap_grace: float = 0.05,
        stall_timeout: float = 2.0,
        reconnect_timeout: float = 25.0,
        request_timeout: float | None = 60.0,
        name: str = "exec-server",
    ) -> None:
        """Low-level constructor; prefer ``connect``/``spawn``.

        ``open_transport`` opens a fresh transport (called again to reconnect when ``can_reconnect``).
        ``final_read`` forces one confirming ``process/read`` per process (the behaviour before pushed
        completion; for benchmarks). ``gap_grace``: seconds a sequence hole may wait for a reordered
        event before a read. ``stall_timeout``: seconds after ``exited`` without ``closed`` before a
        read. ``reconnect_timeout``: how long to keep trying to resume (the server keeps a detached
        session about 30 s). ``request_timeout`` bounds the handshake and ``close()``'s cleanup; other
        requests wait as long as the connection lives.
        """
        self._open_transport = open_transport
        self._can_reconnect = can_reconnect
        self._client_name = client_name
        self._final_read = final_read
        self._gap_grace = gap_grace
        self._stall_timeout = stall_timeout
        self._reconnect_timeout = reconnect_timeout
        self._request_timeout = request_timeout
        self._name = name

        self._conn: Connection | None = None
        self._connections: list[Connection] = []
        self._ready = asyncio.Event()
        self._failure: ConnectionClosed | None = None
        self._closing = False
        self._opened = False
        self._reconnect_task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._reconnects = 0
        self._processes: dict[str, RemoteProcess] = {}
        self._id_prefix = f"af-{secrets.token_hex(4)}-"
        self._next_id = 0
        self.session_id: str | None = None
        """The server's session id (kept across reconnections)."""
        self.environment_info: Mapping[str, Any] = MappingProxyType({})
        """``environmentInfo`` from ``initialize``: ``shell``, ``cwd`` (URI), ``executorVersion``, ..."""
        self.fs = FileSystem(self._request)
        """Filesystem operations on the server's host (``read_file``, ``write_file``, ...)."""

    # -- construction -----------------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        reconnect: bool = True,
        open_timeout: float | None = 10.0,
        reconnect_timeout: float = 25.0,
        client_name: str = "agent-fleet",
        final_read: bool = False,
        gap_grace: float = 0.05,
        stall_timeout: float = 2.0,
        request_timeout: float | None = 60.0,
    ) -> Opening:
        """A client for the exec-server listening at ``url`` (``ws://host:port``).

        ``headers`` go on the websocket handshake (e.g. ``Authorization`` for ``--ws-auth``). With
        ``reconnect`` a dropped connection is resumed within ``reconnect_timeout`` seconds (see the
        module docstring). Other options as for the constructor. Raises ``TransportError`` if the
        server cannot be reached, ``ExecServerError`` if it rejects the handshake.
        """

        async def open_transport() -> Transport:
            return await WebSocketTransport.connect(
                url, open_timeout=open_timeout, additional_headers=headers
            )

        return Opening(
            cls(
                open_transport,
                can_reconnect=reconnect,
                name=f"exec-server {url}",
                reconnect_timeout=reconnect_timeout,
                client_name=client_name,
                final_read=final_read,
                gap_grace=gap_grace,
                stall_timeout=stall_timeout,
                request_timeout=request_timeout,
            )
        )

    @classmethod
    def spawn(
        cls,
        codex_bin: str | os.PathLike[str] | None = None,
        *,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        client_name: str = "agent-fleet",
        final_read: bool = False,
        gap_grace: float = 0.05,
        stall_timeout: float = 2.0,
        request_timeout: float | None = 60.0,
    ) -> Opening:
        """A client for a new ``codex exec-server --listen stdio`` child (found by ``find_codex``).

        ``args`` are extra CLI arguments (e.g. ``("-c", "key=value")``), ``env`` the child's whole
        environment (default: inherited). Closing the client (or losing the pipe) kills the child;
        a lost pipe cannot be reconnected, so live processes then fail with ``ConnectionClosed``.
        Other options as for the constructor. Raises ``ProviderUnavailable`` if the child cannot
        start or fails the handshake.
        """
        codex = find_codex(codex_bin)
        opened = False

        async def open_transport() -> Transport:
            nonlocal opened
            if opened:  # pragma: no cover - can_reconnect is False for stdio
                raise UsageError("a stdio exec-server cannot be reconnected")
            opened = True
            proc = await spawn_child(codex, ["exec-server", "--listen", "stdio", *args], env=env)
            return ChildTransport(proc)

        return Opening(
            cls(
                open_transport,
                can_reconnect=False,
                name=f"exec-server stdio {codex}",
                client_name=client_name,
                final_read=final_read,
                gap_grace=gap_grace,
                stall_timeout=stall_timeout,
                request_timeout=request_timeout,
            )
        )

    # -- lifecycle --------------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the transport and run the handshake. Called by ``async with`` / ``await``."""
        if self._opened or self._closing:
            raise UsageError("open() called twice or after close()")
        self._opened = True
        transport = await self._open_transport()
        try:
            await self._attach(transport, resume=None)
        except RPCError as exc:
            raise translate_rpc_error(exc) from exc
        except (TransportError, RequestTimeout) as exc:
            if isinstance(transport, ChildTransport):
                raise ProviderUnavailable(
                    f"codex exec-server handshake failed: {exc}",
                    stderr_tail=transport.stderr_tail(),
                ) from exc
            raise

    async def __aenter__(self) -> ExecServerClient:
        if not self._opened:
            await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Terminate still-running processes (best effort), fail their waiters with
        ``ConnectionClosed``, close the connection; a spawned child is killed. Idempotent."""
        if self._closing:
            return
        self._closing = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reconnect_task
        conn = self._conn
        live = [p for p in self._processes.values() if p.returncode is None]
        if conn is not None and not conn.closed and live:
            with contextlib.suppress(AgentFleetError, TimeoutError):
                async with asyncio.timeout(_TERMINATE_ON_CLOSE_TIMEOUT):
                    await asyncio.gather(
                        *(conn.request("process/terminate", {"processId": p.process_id}) for p in live),
                        return_exceptions=True,
                    )
        closed = ConnectionClosed(f"{self._name}: client closed")
        if self._failure is None:
            self._failure = closed
        self._ready.set()  # wake waiters in _request so they see the failure
        for proc in list(self._processes.values()):
            proc._fail(self._failure_error())
        if conn is not None:
            await conn.close(closed)

    @property
    def closed(self) -> bool:
        return self._closing or self._failure is not None

    @property
    def stats(self) -> ExecServerStats:
        """A snapshot of the traffic counters over all connections of this client."""
        requests: Counter[str] = Counter()
        notes = sent = received = 0
        for conn in self._connections:
            requests.update(conn.requests_sent)
            notes += conn.notifications_received
            sent += conn.bytes_sent
            received += conn.bytes_received
        return ExecServerStats(
            requests=MappingProxyType(dict(requests)),
            notifications_received=notes,
            bytes_sent=sent,
            bytes_received=received,
            reconnects=self._reconnects,
        )

    # -- processes --------------------------------------------------------------------------------

    async def start(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        tty: bool = False,
        pipe_stdin: bool = False,
        arg0: str | None = None,
    ) -> RemoteProcess:
        """Start ``argv`` on the server and return its ``RemoteProcess``.

        ``cwd``: an absolute path on the server's host (default: the server's own cwd). ``env``: the
        child's exact environment; None inherits the server's environment (codex's default excludes
        drop names containing KEY, SECRET or TOKEN). ``tty`` runs it on a pty (output stream
        ``"pty"``); ``pipe_stdin`` keeps a non-tty stdin writable. ``arg0`` overrides ``argv[0]`` as
        the process sees it. Raises ``InvalidParamsError`` (e.g. empty argv),
        ``InternalServerError`` (e.g. no such program), ``ConnectionClosed``.
        """
        argv = tuple(argv)
        if not all(isinstance(a, str) for a in argv):
            raise UsageError("argv must be a sequence of str")
        self._next_id += 1
        pid = f"{self._id_prefix}{self._next_id}"
        params: dict[str, Any] = {
            "processId": pid,
            "argv": list(argv),
            "cwd": self._cwd_uri(cwd),
            "env": dict(env) if env is not None else {},
            "tty": tty,
            "pipeStdin": pipe_stdin,
            "arg0": arg0,
        }
        if env is None:
            params["envPolicy"] = {
                "inherit": "all",
                "ignoreDefaultExcludes": False,
                "exclude": [],
                "set": {},
                "includeOnly": [],
            }
        proc = RemoteProcess(
            self,
            pid,
            argv,
            tty=tty,
            final_read=self._final_read,
            gap_grace=self._gap_grace,
            stall_timeout=self._stall_timeout,
        )
        # Subscribe before process/start: its first events may arrive before the response.
        self._processes[pid] = proc
        try:
            conn = await self._ready_connection()
            proc._subscribe(conn)
            result = await self._request("process/start", params)
        except BaseException as exc:
            self._processes.pop(pid, None)
            proc._unsubscribe()
            if isinstance(exc, ConnectionClosed) and self._failure is None and not self._closing:
                # The connection dropped with the start unanswered: it may have happened. Once the
                # session is resumed, make sure no process runs that nobody listens to.
                self._spawn(self._terminate_quietly(pid), f"{self._name}:terminate {pid}")
            raise
        if isinstance(result, dict) and isinstance(result.get("sandboxType"), str):
            proc.sandbox_type = result["sandboxType"]
        return proc

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the whole run's deadline is the contract
    ) -> ProcessResult:
        """Run ``argv`` to completion (no stdin) and return its ``ProcessResult``.

        ``timeout`` (seconds, None = no limit) covers start to completion; on expiry the process is
        terminated and ``ProcessTimeout`` raised. Other errors as for ``start``.
        """
        if timeout is None:
            proc = await self.start(argv, cwd=cwd, env=env)
            return await proc.wait()
        started: RemoteProcess | None = None
        try:
            async with asyncio.timeout(timeout) as deadline:
                started = await self.start(argv, cwd=cwd, env=env)
                return await started.wait()
        except TimeoutError:
            if not deadline.expired():
                raise
        out = err = b""
        if started is not None:
            with contextlib.suppress(AgentFleetError):
                await started.terminate()
            with contextlib.suppress(AgentFleetError, TimeoutError):
                async with asyncio.timeout(_TERMINATE_ON_CLOSE_TIMEOUT):
                    await started.wait()
            out, err = started._collected()
        raise ProcessTimeout(list(argv), timeout, stdout=out, stderr=err)

    async def _terminate_quietly(self, pid: str) -> None:
        with contextlib.suppress(AgentFleetError):
            await self._request("process/terminate", {"processId": pid})

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _cwd_uri(self, cwd: str | os.PathLike[str] | None) -> str:
        if cwd is not None:
            return to_uri(cwd)
        server_cwd = self.environment_info.get("cwd")
        if isinstance(server_cwd, str):
            return server_cwd
        raise UsageError("the server did not report its cwd; pass cwd=")

    def _forget(self, proc: RemoteProcess) -> None:
        if self._processes.get(proc.process_id) is proc:
            del self._processes[proc.process_id]

    # -- requests ---------------------------------------------------------------------------------

    async def _ready_connection(self) -> Connection:
        while True:
            if self._failure is not None:
                raise self._failure_error()
            if self._closing:
                raise ConnectionClosed(f"{self._name}: client is closing")
            if not self._opened:
                raise UsageError("the client is not open: use `async with` or `await` on connect()/spawn()")
            conn = self._conn
            if self._ready.is_set():
                if conn is not None and not conn.closed:
                    return conn
                # on_close callbacks run synchronously at close, so this cannot persist; be safe.
                raise ConnectionClosed(f"{self._name}: connection is closed")
            await self._ready.wait()

    async def _request(self, method: str, params: Any, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        """Send ``method`` on the live connection (waiting out a reconnection) and return its result.

        Raises the typed ``ExecServerError`` for an error answer, ``ConnectionClosed`` when the session
        is gone or the connection dropped before the answer.
        """
        conn = await self._ready_connection()
        try:
            return await conn.request(method, params, timeout=timeout)
        except RPCError as exc:
            raise translate_rpc_error(exc) from exc

    def _failure_error(self) -> ConnectionClosed:
        failure = self._failure
        assert failure is not None
        exc = ConnectionClosed(
            failure.message,
            cause=failure.cause,
            exit_code=failure.exit_code,
            stderr_tail=failure.stderr_tail,
        )
        exc.__cause__ = failure
        return exc

    # -- connection management --------------------------------------------------------------------

    async def _attach(self, transport: Transport, *, resume: str | None) -> None:
        """Handshake on ``transport`` and make it the live connection."""
        conn = Connection(
            transport,
            core=JsonRpcCore(emit_version=False),  # the exec-server dialect omits "jsonrpc": "2.0"
            route_key=param_key("processId"),
            on_protocol_error=self._on_protocol_error,
            name=self._name,
        )
        conn.set_fallback(on_notification=self._on_stray_notification)
        for proc in self._processes.values():
            proc._subscribe(conn)  # resumed notifications may follow initialize immediately
        self._connections.append(conn)
        conn.start()
        params: dict[str, Any] = {"clientName": self._client_name}
        if resume is not None:
            params["resumeSessionId"] = resume
        try:
            result = await conn.request("initialize", params, timeout=self._request_timeout)
            await conn.notify("initialized", {})
        except BaseException:
            await conn.close()
            raise
        if isinstance(result, dict):
            sid = result.get("sessionId")
            if isinstance(sid, str):
                self.session_id = sid
            info = result.get("environmentInfo")
            if isinstance(info, dict):
                self.environment_info = MappingProxyType(info)
        self._conn = conn
        self._ready.set()
        conn.on_close(lambda cause: self._on_conn_closed(conn, cause))

    def _on_conn_closed(self, conn: Connection, cause: BaseException | None) -> None:
        if conn is not self._conn or self._closing or self._failure is not None:
            return
        self._ready.clear()
        if self._can_reconnect and self.session_id is not None:
            logger.warning("%s: connection lost (%s); reconnecting", self._name, cause)
            self._reconnect_task = asyncio.get_running_loop().create_task(
                self._reconnect(cause), name=f"{self._name}:reconnect"
            )
        else:
            self._fail_session(self._closed_error("connection lost", cause))

    def _closed_error(self, what: str, cause: BaseException | None) -> ConnectionClosed:
        exc = ConnectionClosed(
            f"{self._name}: {what}" + (f" ({cause})" if cause is not None else ""),
            cause=cause,
            exit_code=cause.exit_code if isinstance(cause, TransportError) else None,
            stderr_tail=cause.stderr_tail if isinstance(cause, TransportError) else "",
        )
        exc.__cause__ = cause
        return exc

    def _fail_session(self, exc: ConnectionClosed) -> None:
        if self._failure is not None:
            return
        self._failure = exc
        self._ready.set()  # wake waiters so they see the failure
        for proc in list(self._processes.values()):
            proc._fail(self._failure_error())

    async def _reconnect(self, cause: BaseException | None) -> None:
        deadline = time.monotonic() + self._reconnect_timeout
        attempt = 0
        last: BaseException | None = cause
        while not self._closing:
            try:
                transport = await self._open_transport()
                try:
                    await self._attach(transport, resume=self.session_id)
                except BaseException:
                    await transport.close()
                    raise
            except RPCError as exc:
                last = exc
                if exc.code != ExecServerError.SESSION_ALREADY_ATTACHED:
                    self._fail_session(
                        self._closed_error("cannot resume the session", translate_rpc_error(exc))
                    )
                    return
            except (TransportError, RequestTimeout) as exc:
                last = exc
            else:
                self._reconnects += 1
                logger.info("%s: session %s resumed", self._name, self.session_id)
                for proc in list(self._processes.values()):
                    proc._on_reconnected()
                return
            if time.monotonic() >= deadline:
                break
            delay = _RECONNECT_DELAYS[min(attempt, len(_RECONNECT_DELAYS) - 1)]
            attempt += 1
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        if not self._closing:
            self._fail_session(
                self._closed_error(f"could not resume within {self._reconnect_timeout:g}s", last)
            )

    def _on_protocol_error(self, err: ProtocolError) -> None:
        # We cannot tell which process an unreadable message belonged to: every live one re-reads.
        for proc in list(self._processes.values()):
            proc._on_lost()

    def _on_stray_notification(self, msg: Notification) -> None:
        logger.debug("%s: notification for no live process: %s", self._name, msg.method)
