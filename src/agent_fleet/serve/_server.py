"""``Daemon``: the API on uvicorn, with its state directory, token, providers and drain on SIGTERM.

Calling order::

    async with Daemon(ServeConfig(...)) as daemon:   # bound (port 0 picks one), serving
        print(daemon.url)
        await daemon.wait()                            # until SIGTERM/SIGINT (or daemon.close())

Closing drains: new work is refused, running turns are stopped and their terminal events recorded,
waiting approvals are declined, providers shut down, then the server closes its connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from agent_fleet.contract import PermissionConfig, Provider
from agent_fleet.errors import UsageError
from agent_fleet.runner import Redactor
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.serve._app import App
from agent_fleet.serve._approvals import ApprovalQueue
from agent_fleet.serve._batches import Batches
from agent_fleet.serve._feed import Feed
from agent_fleet.serve._floor import Floor
from agent_fleet.serve._guard import Hosts, load_or_create_token
from agent_fleet.serve._sessions import Sessions
from agent_fleet.serve._state import open_state_dir
from agent_fleet.serve._store import Store


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "agent-fleet" / "serve"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeConfig:
    """How the daemon runs. ``options`` maps provider names to their options objects (the registry's
    options types); the daemon adds its approval handler and restart-on-crash to each. ``permission``
    is a floor for every session (a client may add restrictions, never remove them); ``trust_clients``
    lets clients ask for what escapes the sandbox and the policy (see ``serve._floor``).
    ``allowed_hosts``: ``Host`` header names served besides the loopback names and ``host`` (a reverse
    proxy's public name); any other is refused (DNS rebinding). ``head_timeout``: seconds a connection
    has to send a whole request head (slowloris). ``orphan_timeout``: seconds a running session may go
    without any client reading its events before its turn is stopped (None: never). ``prices``: a price
    table for the cost the dashboard shows of sessions whose provider reports none (``--prices``)."""

    host: str = "127.0.0.1"
    port: int = 0
    token_file: Path | None = None
    state_dir: Path = field(default_factory=default_state_dir)
    provider: str = "codex"
    options: Mapping[str, Any] = field(default_factory=dict)
    permission: PermissionConfig | None = None
    allow_roots: Sequence[Path] = ()
    approval_timeout: float | None = 300.0
    max_body: int = 1 << 20
    trust_clients: bool = False
    max_live_sessions: int = 256
    allowed_hosts: Sequence[str] = ()
    head_timeout: float = 10.0
    orphan_timeout: float | None = 300.0
    prices: PriceTable | None = None

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and self.token_file is None:
            raise UsageError(
                f"--host {self.host} is not a loopback address: give --token-file so the API is not "
                "open to the network with a token nobody chose"
            )
        if not 0 <= self.port <= 65535:
            raise UsageError(f"--port must be 0..65535, not {self.port}")
        if not 0 < self.head_timeout < 3600:
            raise UsageError(f"head_timeout must be 0 < seconds < 3600, not {self.head_timeout}")
        if self.orphan_timeout is not None and not self.orphan_timeout > 0:
            raise UsageError(f"orphan_timeout must be > 0 seconds (or None), not {self.orphan_timeout}")
        if self.max_live_sessions < 1:
            raise UsageError(f"max_live_sessions must be >= 1, not {self.max_live_sessions}")


def _head_timed(timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, except that a request head must be read whole within ``timeout`` seconds
    of the connection opening or of the request's first byte: a client trickling header bytes
    (slowloris) is cut off. uvicorn's own keep-alive timer restarts with every byte received, so it
    does not bound this; once the head is in, the timer is off (a response may stream for hours), and
    between requests the keep-alive timer alone decides."""

    class HeadTimedH11(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(timeout, self._head_timed_out)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._head_timer is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the first byte of the next request on a kept-alive connection
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the head is in
                self._disarm()

    return HeadTimedH11


class _Server(uvicorn.Server):
    """uvicorn, except that the first SIGTERM/SIGINT drains the daemon before the server stops."""

    def __init__(self, config: uvicorn.Config, daemon: Daemon) -> None:
        super().__init__(config)
        self._daemon = daemon
        self._woken = asyncio.Event()

    async def main_loop(self) -> None:
        """uvicorn's loop (``on_tick`` every 0.1 s until it says stop), except that ``wake()`` ends a wait
        at once: the daemon's ``close()`` does not wait for the next tick."""
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.1):
                    await self._woken.wait()
            should_exit = await self.on_tick(counter)

    def wake(self) -> None:
        self._woken.set()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._daemon.closing:
            self.force_exit = True
            return
        self._daemon.loop.call_soon_threadsafe(self._daemon.request_close)


class Daemon:
    """The running daemon (see the module docstring). ``providers``: makes a provider of a kind from
    its options (default: the runner's registry, ``make_provider``), e.g. a test double."""

    def __init__(
        self, config: ServeConfig, *, providers: Callable[[str, Any], Provider] | None = None
    ) -> None:
        self.config = config
        self._make_provider = providers
        state = config.state_dir
        # Sessions, prompts and transcripts live here: nobody else on the machine may read them, and one
        # daemon at a time (a second one would take the first's running sessions for interrupted).
        self._lock, warnings = open_state_dir(state)
        try:
            self._build(config, warnings)
        except BaseException:
            self._lock.close()
            raise

    def _build(self, config: ServeConfig, warnings: list[str]) -> None:
        state = config.state_dir
        self.token, self.token_path, token_warnings = load_or_create_token(config.token_file, state)
        self.warnings = [*warnings, *token_warnings]
        if not is_loopback(config.host):
            self.warnings.append(
                f"serving plain HTTP on the network ({config.host}): the token and every answer cross it "
                "in the clear; put the daemon behind a reverse proxy that terminates TLS "
                "(see docs/how-to/proxy.md)"
            )
        self.redactor = Redactor(extra=(self.token,))
        self.store = Store(state / "sessions.sqlite3", redactor=self.redactor)
        self.approvals = ApprovalQueue(timeout=config.approval_timeout, redactor=self.redactor)
        roots = tuple(Path(os.path.realpath(r)) for r in (tuple(config.allow_roots) or (Path.cwd(),)))
        self.floor = Floor(
            permission=config.permission,
            trust_clients=config.trust_clients,
            allow_roots=roots,
            boxes=Path(os.path.realpath(state / "boxes")),  # where batches' boxes go (Batches.box_root)
        )
        self.sessions = Sessions(
            store=self.store,
            options=config.options,
            approval_handler=self.approvals.handler,
            allow_roots=roots,
            redactor=self.redactor,
            floor=self.floor,
            max_live=config.max_live_sessions,
            orphan_timeout=config.orphan_timeout,
            prices=config.prices,
            **({"providers": self._make_provider} if self._make_provider is not None else {}),
        )
        self.batches = Batches(
            root=state / "batches",
            sessions=self.sessions,
            store=self.store,
            floor=self.floor,
            redactor=self.redactor,
        )
        self.feed = Feed(session_row=self._session_update, batch_row=self.batches.row)
        self.sessions.on_change = self.feed.session
        self.sessions.on_note = lambda sid, note: self.feed.publish(
            "note", {"session_id": sid, **note}, session=sid
        )
        self.batches.on_change = self.feed.batch
        self.approvals.context = self._approval_context
        self.approvals.on_change = lambda kind, data: self.feed.publish(
            kind, data, session=data.get("session_id")
        )
        self.app = App(
            feed=self.feed,
            sessions=self.sessions,
            approvals=self.approvals,
            batches=self.batches,
            token=self.token,
            redactor=self.redactor,
            provider=config.provider,
            max_body=config.max_body,
            secure_cookie=not is_loopback(config.host),
            hosts=Hosts(config.host, config.allowed_hosts),
            boxes=self.floor.boxes,
        )
        self.closing = False
        self._closed = asyncio.Event()
        self._serve_task: asyncio.Task[None] | None = None
        self._close_task: asyncio.Future[None] | None = None
        self._server: _Server | None = None
        self._socket: socket.socket | None = None
        self.loop = asyncio.get_running_loop()

    def _session_update(self, session_id: str) -> dict[str, Any] | None:
        """A session's row as the updates send it, with how many sessions run now (the dashboard's
        count: every running session is loaded)."""
        row = self.sessions.row(session_id)
        if row is not None:
            row["fleet_running"] = sum(s.state == "running" for s in self.sessions.live.values())
        return row

    def _approval_context(self, session_id: str) -> dict[str, Any]:
        """What a person deciding a session's request is shown of the session."""
        row = self.store.session(session_id)
        if row is None:
            return {}
        spec = row["spec"] if isinstance(row["spec"], dict) else {}
        return {"task_id": row.get("task_id"), "batch_id": row.get("batch_id"), "prompt": spec.get("prompt")}

    @property
    def port(self) -> int:
        assert self._socket is not None
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        host = self.config.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.config.host else socket.AF_INET
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only when the listening
        # socket says TCP, and without it every answer after the first on a keep-alive connection waited
        # for the client's delayed ACK (a 13-event turn: 90 ms instead of 4).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.config.host, self.config.port))
        except OSError as exc:
            sock.close()
            raise UsageError(
                f"cannot listen on {self.config.host}:{self.config.port}: {exc.strerror}"
            ) from exc
        sock.listen(512)
        sock.setblocking(False)
        self._socket = sock
        self.approvals.url = self.url
        uv_config = uvicorn.Config(
            self.app.asgi,
            lifespan="off",
            access_log=False,  # paths are enough for nobody, and a log must never carry a secret
            log_level="warning",
            timeout_graceful_shutdown=5,
            limit_concurrency=None,
            h11_max_incomplete_event_size=64 * 1024,
            http=_head_timed(self.config.head_timeout),
            # Longer than clients keep idle connections (httpx: 5 s): the client lets go first, so it
            # never sends a request on a connection the daemon is closing (a ReadError).
            timeout_keep_alive=30,
        )
        self._server = _Server(uv_config, self)
        self._serve_task = asyncio.create_task(self._server.serve(sockets=[sock]), name="uvicorn")
        while not self._server.started:
            if self._serve_task.done():
                await self._serve_task
                raise UsageError("the server stopped while starting")
            await asyncio.sleep(0.01)

    def request_close(self) -> None:
        if not self.closing:
            self.closing = True
            self._close_task = asyncio.ensure_future(self.close())

    async def close(self) -> None:
        """Drain and stop (idempotent)."""
        self.closing = True
        if self._closed.is_set():
            return
        self.approvals.decline_all("the daemon is shutting down")
        self.feed.close()
        await self.batches.drain()
        await self.sessions.drain()
        if self._server is not None:
            self._server.should_exit = True
            self._server.wake()
        if self._serve_task is not None:
            await asyncio.wait([self._serve_task], timeout=10)
        if self._socket is not None:
            self._socket.close()
        self.store.close()
        self._lock.close()
        self._closed.set()

    async def wait(self) -> None:
        """Until the daemon has closed (SIGTERM/SIGINT or ``close()``)."""
        await self._closed.wait()

    def install_signal_handlers(self) -> None:
        """Drain on SIGTERM/SIGINT when not served by uvicorn's own capture (e.g. not the main thread)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self.request_close)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
