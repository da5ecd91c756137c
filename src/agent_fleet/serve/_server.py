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
import ipaddress
import os
import signal
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self

import uvicorn

from agent_fleet.contract import PermissionConfig
from agent_fleet.errors import UsageError
from agent_fleet.runner import Redactor
from agent_fleet.serve._app import App
from agent_fleet.serve._approvals import ApprovalQueue
from agent_fleet.serve._batches import Batches
from agent_fleet.serve._floor import Floor
from agent_fleet.serve._guard import load_or_create_token
from agent_fleet.serve._sessions import Sessions
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
    lets clients ask for what escapes the sandbox and the policy (see ``serve._floor``)."""

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

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and self.token_file is None:
            raise UsageError(
                f"--host {self.host} is not a loopback address: give --token-file so the API is not "
                "open to the network with a token nobody chose"
            )
        if not 0 <= self.port <= 65535:
            raise UsageError(f"--port must be 0..65535, not {self.port}")
        if self.max_live_sessions < 1:
            raise UsageError(f"max_live_sessions must be >= 1, not {self.max_live_sessions}")


class _Server(uvicorn.Server):
    """uvicorn, except that the first SIGTERM/SIGINT drains the daemon before the server stops."""

    def __init__(self, config: uvicorn.Config, daemon: Daemon) -> None:
        super().__init__(config)
        self._daemon = daemon

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._daemon.closing:
            self.force_exit = True
            return
        self._daemon.loop.call_soon_threadsafe(self._daemon.request_close)


class Daemon:
    """The running daemon (see the module docstring)."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        state = config.state_dir
        # Sessions, prompts and transcripts live here: nobody else on the machine may read them.
        try:
            state.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not os.access(state, os.W_OK | os.X_OK):
                raise PermissionError(f"{state} is not writable")
        except OSError as exc:
            raise UsageError(
                f"cannot use the state directory {str(state)!r}: {exc.strerror or exc} (see --state-dir)"
            ) from exc
        self.token, self.token_path, self.warnings = load_or_create_token(config.token_file, state)
        self.redactor = Redactor(extra=(self.token,))
        self.store = Store(state / "sessions.sqlite3", redactor=self.redactor)
        self.approvals = ApprovalQueue(timeout=config.approval_timeout, redactor=self.redactor)
        roots = tuple(Path(os.path.realpath(r)) for r in (tuple(config.allow_roots) or (Path.cwd(),)))
        self.floor = Floor(
            permission=config.permission, trust_clients=config.trust_clients, allow_roots=roots
        )
        self.sessions = Sessions(
            store=self.store,
            options=config.options,
            approval_handler=self.approvals.handler,
            allow_roots=roots,
            redactor=self.redactor,
            floor=self.floor,
            max_live=config.max_live_sessions,
        )
        self.batches = Batches(
            root=state / "batches",
            sessions=self.sessions,
            store=self.store,
            floor=self.floor,
            redactor=self.redactor,
        )
        self.app = App(
            sessions=self.sessions,
            approvals=self.approvals,
            batches=self.batches,
            token=self.token,
            redactor=self.redactor,
            provider=config.provider,
            max_body=config.max_body,
            secure_cookie=not is_loopback(config.host),
        )
        self.closing = False
        self._closed = asyncio.Event()
        self._serve_task: asyncio.Task[None] | None = None
        self._close_task: asyncio.Future[None] | None = None
        self._server: _Server | None = None
        self._socket: socket.socket | None = None
        self.loop = asyncio.get_running_loop()

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
        sock = socket.socket(family, socket.SOCK_STREAM)
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
        uv_config = uvicorn.Config(
            self.app.asgi,
            lifespan="off",
            access_log=False,  # paths are enough for nobody, and a log must never carry a secret
            log_level="warning",
            timeout_graceful_shutdown=5,
            limit_concurrency=None,
            h11_max_incomplete_event_size=64 * 1024,
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
        await self.batches.drain()
        await self.sessions.drain()
        if self._server is not None:
            self._server.should_exit = True
        if self._serve_task is not None:
            await asyncio.wait([self._serve_task], timeout=10)
        if self._socket is not None:
            self._socket.close()
        self.store.close()
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
