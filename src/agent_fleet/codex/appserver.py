"""``CodexProvider``: one long-lived ``codex app-server`` child, many threads multiplexed on it.

Theory of operation
-------------------
``start()`` (context entry) finds the binary, spawns ``codex app-server`` in its own process group,
wires a JSON-RPC ``Connection`` over its stdio (routing by ``threadId``) and completes
``initialize`` -> ``initialized``. Any failure there is ``ProviderUnavailable`` with the stderr tail.
The version codex reports in its ``userAgent`` is checked (``_codex_binary.check_codex_version``): an
older binary than the supported minimum is refused; one that is not the pinned version works, with one
``System(subtype="codex_version")`` notice (on ``notices()`` and in the first session's stream).

``spawn`` sends ``thread/start`` then the first ``turn/start``; ``resume`` sends ``thread/resume`` then
``turn/start``. Each thread gets a ``CodexHandle`` subscribed to its id.

When the connection closes for any reason other than ``shutdown()`` (child killed, exited, stdout
EOF), every live handle ends its turn with ``Error(code="app_server_crashed")`` at once, and pending
requests fail. With ``restart_on_crash`` a new child is started in the background; ``resume`` then
continues old threads (same ``CODEX_HOME``, so codex finds their rollouts).

``shutdown()`` stops every handle, closes stdin, and ends the whole process group (TERM, then KILL),
so no orphan is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from agent_fleet import __version__
from agent_fleet._codex_binary import (
    check_codex_version,
    codex_version_async,
    find_codex,
    version_from_user_agent,
)
from agent_fleet._codex_toml import config_args
from agent_fleet._process import ChildProcess
from agent_fleet._provider.sessions import Sessions
from agent_fleet.codex import _approvals, _overload
from agent_fleet.codex import _server_requests as _requests
from agent_fleet.codex._account import LOGIN_COMPLETED, AccountMixin
from agent_fleet.codex._box import OS_SANDBOX, Box, session_box
from agent_fleet.codex._child import Child, route, stderr_reason, workspace
from agent_fleet.codex._late import LateUndo
from agent_fleet.codex._notices import NoticeRouter
from agent_fleet.codex._review import ReviewSession
from agent_fleet.codex._stored import StoredMixin
from agent_fleet.codex._subthreads import SubThread, SubThreads
from agent_fleet.codex.handle import CodexHandle
from agent_fleet.codex.mapping import OPT_OUT_NOTIFICATIONS
from agent_fleet.codex.options import CodexOptions
from agent_fleet.codex.translate import declared_writable_roots, plan_spawn
from agent_fleet.contract import (
    Capabilities,
    Provider,
    ReviewResult,
    ReviewTarget,
    Spec,
)
from agent_fleet.errors import (
    AgentFleetError,
    ConnectionClosed,
    ProviderUnavailable,
    RPCError,
    TransportError,
    UsageError,
)
from agent_fleet.events import Event, RateLimits, System, TokenUsage
from agent_fleet.jsonrpc import Connection, Notification, Request, StreamTransport
from agent_fleet.notices import spec_unsupported
from agent_fleet.policy import ApprovalPolicy, Decision

__all__ = ["CodexProvider"]

logger = logging.getLogger("agent_fleet.codex")

# Measured in bench/fleet_concurrency.py (docs/benchmarks.md, "Fleet thread settings"): without the
# per-thread shell snapshot a fleet spends 20-25 % less CPU; commands still run as `bash -lc` with the
# same login profile. A user's own `config` wins.
APP_SERVER_DEFAULTS: dict[str, Any] = {"features.shell_snapshot": False}

#: Server requests of a sub-agent's thread answered as its session's own would be (approvals aside).
_SESSION_REQUESTS = frozenset({_requests.TOOL_CALL, *_requests.INPUT_METHODS})
_STDERR_TAIL_BYTES = 64 * 1024
#: thread/start, thread/resume and thread/fork requests in flight at once (bench/spawn_overload.py).
_THREAD_STARTS = 32
_STDOUT_LIMIT = 64 * 1024 * 1024


class CodexProvider(AccountMixin, StoredMixin, Provider):
    """The codex app-server provider. ``async with CodexProvider(options) as provider: ...``"""

    name = "codex"

    def __init__(self, options: CodexOptions | None = None) -> None:
        self.options = options or CodexOptions()
        self._child: Child | None = None
        self._sessions: Sessions[CodexHandle] = Sessions(logger)
        self._start_lock = asyncio.Lock()
        self._thread_starts = asyncio.Semaphore(_THREAD_STARTS)
        self._restarting: asyncio.Task[None] | None = None
        self._shutting_down = False
        self._closed = False
        self._notices = NoticeRouter(self._sessions.handles)  # what no handle subscribed to
        self._subthreads = SubThreads()  # sub-agents' threads: their approvals are their session's
        self._private_tmp: str | None = None  # the child's TMPDIR (removed at shutdown)
        self._version_notice: System | None = None  # for the first session (once)
        self._version_warned = False
        self._logins: dict[str, asyncio.Future[dict[str, Any]]] = {}  # device-code logins by id
        self._default_efforts: dict[str | None, str | None] = {}  # model -> its default effort
        self.crashes = 0

    # -- properties --------------------------------------------------------------------------------

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            supports_injection=True,
            supports_resume=True,
            supports_tool_plugins=True,
            supports_output_schema=True,
            supports_reasoning_effort=True,
            needs_permission_config=False,
            emits_subagent_events=True,
            tool_permission_format="codex-approval",
            supports_review=True,
            supports_python_tools=True,  # dynamicTools + item/tool/call
            os_sandbox=OS_SANDBOX,
        )

    @property
    def closed(self) -> bool:
        """True once ``shutdown()`` was called."""
        return self._closed

    @property
    def pid(self) -> int | None:
        """Process id of the app-server child (None before start / after shutdown)."""
        return self._child.proc.pid if self._child is not None else None

    @property
    def version(self) -> str | None:
        """The version of the running codex app-server (None before ``start()``)."""
        return self._child.version if self._child is not None else None

    @property
    def connection(self) -> Connection:
        """The live JSON-RPC connection (for protocol calls agent-fleet does not wrap)."""
        return self._require_child().conn

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Spawn the app-server and complete the handshake. Raises ``ProviderUnavailable``."""
        if self._closed:
            raise UsageError("this CodexProvider was shut down; create a new one")
        async with self._start_lock:
            if self._child is None:
                self._child = await self._launch()

    async def _launch(self) -> Child:
        opts = self.options
        binary = find_codex(opts.codex_bin)
        argv = [os.fspath(binary), *opts.args, *config_args({**APP_SERVER_DEFAULTS, **opts.config})]
        env = opts.child_env()
        if "TMPDIR" not in opts.env:
            # private; and codex's bubblewrap helper is made even with CODEX_HOME under the shared one
            if self._private_tmp is None:
                self._private_tmp = tempfile.mkdtemp(prefix="agent-fleet-codex-")
            env["TMPDIR"] = self._private_tmp
        try:
            # Under the reaper: a crash, a shutdown or our own death ends every command codex started.
            proc = await ChildProcess.start(
                argv,
                env=env,
                cwd=opts.cwd,
                tail_bytes=_STDERR_TAIL_BYTES,
                limit=_STDOUT_LIMIT,
                name="codex-app-server",
            )
        except OSError as exc:
            raise ProviderUnavailable(f"cannot start {binary}: {exc}", tried=[str(binary)]) from exc
        assert proc.stdout is not None and proc.stdin is not None
        conn = Connection(StreamTransport(proc.stdout, proc.stdin), route_key=route, name="codex-app-server")
        conn.set_late_handler(LateUndo(conn, self._sessions.handles))  # undoes work for timed-out requests
        child = Child(proc, conn)
        conn.set_fallback(on_notification=self._on_global_notification, on_request=self._on_global_request)
        conn.on_close(lambda cause: self._on_close(child, cause))
        conn.start()
        try:
            init = await conn.request(
                "initialize",
                {
                    "clientInfo": {"name": "agent-fleet", "title": "agent-fleet", "version": __version__},
                    "capabilities": {
                        "experimentalApi": True,
                        "optOutNotificationMethods": list(OPT_OUT_NOTIFICATIONS),
                    },
                },
                timeout=opts.handshake_timeout,
            )
            await conn.notify("initialized")
        except AgentFleetError as exc:
            await self._kill(child)
            tail = child.stderr_tail().strip()
            exit_code = proc.returncode
            detail = "timed out" if isinstance(exc, TimeoutError) else str(exc)
            reason = stderr_reason(tail)
            message = (
                f"codex app-server failed to start: {reason}"
                if reason
                else f"codex app-server handshake failed ({detail})"
            )
            raise ProviderUnavailable(
                message + (f"; exit code {exit_code}" if exit_code is not None else ""),
                tried=[" ".join(argv[:2])],
                stderr_tail=tail[-4000:],
                # a handshake that timed out may pass (a loaded machine; the exit code is then our own
                # kill's); a configuration codex refused, or a child that exited by itself, stays
                # refused until someone changes something
                retryable=isinstance(exc, TimeoutError) and not reason,
            ) from exc
        await self._check_version(child, binary, init)
        return child

    async def _check_version(self, child: Child, binary: os.PathLike[str], init: Any) -> None:
        """Refuse a codex older than the supported minimum; note once one that is not the pinned one."""
        version = version_from_user_agent(init.get("userAgent") if isinstance(init, dict) else None)
        try:
            if version is None:  # not in the userAgent (never seen from codex): ask the binary
                version = await codex_version_async(binary)
            warning = check_codex_version(version, binary=binary)
        except ProviderUnavailable:
            await self._kill(child)
            raise
        child.version = version
        if warning is not None and not self._version_warned:
            self._version_warned = True
            logger.warning("%s", warning)
            notice = System(subtype="codex_version", data={"version": version, "message": warning})
            self._version_notice = notice
            self._notices.post(notice)

    async def shutdown(self) -> None:
        """Stop every handle and end the child and its process group. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._shutting_down = True
        if self._restarting is not None:
            self._restarting.cancel()
            with contextlib.suppress(asyncio.CancelledError, AgentFleetError):
                await self._restarting
        handles = self._sessions.handles()
        if handles and self._child is not None and not self._child.conn.closed:
            await asyncio.gather(*(h.stop() for h in handles), return_exceptions=True)
        for h in self._sessions.handles():
            h.crashed("provider shut down", {})
        self._notices.close()
        child, self._child = self._child, None
        if child is not None:
            await self._kill(child)
        await self._sessions.close()
        if self._private_tmp is not None:
            await asyncio.to_thread(shutil.rmtree, self._private_tmp, ignore_errors=True)
            self._private_tmp = None

    async def _kill(self, child: Child) -> None:
        await child.conn.close(ConnectionClosed("provider shut down"))
        # Closing stdin (above) asks codex to exit; then its whole tree gets TERM, then KILL.
        await child.proc.stop(stdin_grace=2.0)

    # -- crash handling ------------------------------------------------------------------------------

    def _on_close(self, child: Child, cause: BaseException | None) -> None:
        if self._shutting_down or child is not self._child:
            return
        self.crashes += 1
        exit_code = child.proc.returncode
        message = "codex app-server exited" + (f" with code {exit_code}" if exit_code is not None else "")
        if cause is not None and not isinstance(cause, ConnectionClosed):
            message += f" ({cause})"
        data = {"exit_code": exit_code, "stderr_tail": child.stderr_tail()[-4000:]}
        for handle in self._sessions.handles():
            handle.crashed(message, data)
        self._child = None
        self._spawn_task(self._reap(child), "codex-reap")
        if self.options.restart_on_crash and not self._closed:
            self._restarting = self._spawn_task(self._restart(), "codex-restart")

    async def _reap(self, child: Child) -> None:
        with contextlib.suppress(AgentFleetError):
            await self._kill(child)

    async def _restart(self) -> None:
        async with self._start_lock:
            if self._child is None and not self._closed:
                self._child = await self._launch()

    async def _ready(self) -> Child:
        if self._closed:
            raise UsageError("this CodexProvider was shut down")
        if self._restarting is not None and not self._restarting.done():
            with contextlib.suppress(AgentFleetError):
                await self._restarting
        if self._child is None:
            if self._restarting is None and self.crashes:
                raise ConnectionClosed("codex app-server crashed (restart_on_crash is off)")
            await self.start()
        return self._require_child()

    async def _connection(self) -> Connection:
        return (await self._ready()).conn

    def _live_handles(self) -> list[CodexHandle]:
        return self._sessions.handles()

    def _require_child(self) -> Child:
        if self._child is None:
            raise ConnectionClosed("codex app-server is not running")
        return self._child

    # -- sessions ----------------------------------------------------------------------------------------

    async def spawn(self, spec: Spec) -> CodexHandle:
        """Start a thread and its first turn.

        Raises ``ValueError`` for a bad permission pattern (before any wire traffic), ``RPCError``,
        ``ConnectionClosed`` or ``ProviderUnavailable``.
        """
        return await self._thread("thread/start", spec, None, turn=True, baseline=TokenUsage())

    async def resume(self, session_id: str, spec: Spec) -> CodexHandle:
        """Resume thread ``session_id`` (history kept) and start a turn with ``spec.prompt``."""
        if session_id in self._sessions:
            raise UsageError(f"thread {session_id} already has a live handle; stop() it first")
        return await self._thread("thread/resume", spec, session_id, turn=True, baseline=None)

    async def fork(self, session_id: str, spec: Spec) -> CodexHandle:
        """A new thread with a copy of thread ``session_id``'s history (``thread/fork``) and ``spec``'s
        settings; no turn runs until ``send()`` (``spec.prompt`` is not sent)."""
        return await self._thread("thread/fork", spec, session_id, turn=False, baseline=None)

    async def _thread(
        self, method: str, spec: Spec, session_id: str | None, *, turn: bool, baseline: TokenUsage | None
    ) -> CodexHandle:
        """``method`` for a session of ``spec`` in a box of its own (removed if anything fails)."""
        await self._ready()  # a closed provider raises before a box is made
        policy = ApprovalPolicy(spec.permission)  # bad user regex: ValueError before any wire traffic
        box = session_box(
            workspace(spec, self.options), spec, declared_writable_roots(spec.config, self.options.config)
        )
        try:
            plan = plan_spawn(spec, self.options.config, box)
            params = dict(plan.thread_params)
            if session_id is not None:  # resume and fork take no dynamicTools: the thread keeps its own
                params["threadId"] = session_id
                params.pop("dynamicTools", None)
            child, result = await self._start_thread(method, params, session_id)
            notices = spec_unsupported(plan.untranslated)
            turn_params = plan.turn_params if turn else None
            return await self._open(child, result, spec, turn_params, policy, notices, baseline, box)
        except BaseException:
            box.close()
            raise

    async def _start_thread(
        self, method: str, params: dict[str, Any], session_id: str | None
    ) -> tuple[Child, Any]:
        """``thread/start`` / ``resume`` / ``fork`` and the child it ran on, at most ``_THREAD_STARTS`` in
        flight: codex starts threads one after another, so with a thousand sent at once the last would
        wait out their timeout in its queue; waiting here instead, each gets its whole ``rpc_timeout``.

        A child that dies under the request (killed between two sessions: the write meets its dead pipe
        before the reader sees its end) took whatever it started with it; with ``restart_on_crash`` the
        request is sent once more to the restarted child instead of failing the session."""
        async with self._thread_starts:
            child = await self._ready()
            try:
                return child, await self._request_start(child, method, params, session_id)
            except TransportError:
                if not self.options.restart_on_crash or self._closed or not await _closes_soon(child):
                    raise
            child = await self._ready()
            return child, await self._request_start(child, method, params, session_id)

    async def _request_start(
        self, child: Child, method: str, params: dict[str, Any], session_id: str | None
    ) -> Any:
        timeout = self.options.rpc_timeout
        try:
            return await _overload.request(child.conn, method, params, timeout=timeout)
        except RPCError as exc:
            if method != "thread/resume" or session_id is None:
                raise
            # codex refuses to resume an archived thread (a finished one a fleet let go of to free the
            # app-server's memory). Unarchiving is the only way back; when it fails too the thread was
            # not archived and the refusal stands.
            unarchive = {"threadId": session_id}
            try:
                await _overload.request(child.conn, "thread/unarchive", unarchive, timeout=timeout)
            except RPCError:
                raise exc from None
            return await _overload.request(child.conn, method, params, timeout=timeout)

    @property
    def rate_limits(self) -> RateLimits | None:
        """The latest ``account/rateLimits/updated`` codex sent (None before the first)."""
        return self._notices.rate_limits

    def notices(self) -> AsyncIterator[Event]:
        """Connection-wide notices (warnings, account and config changes, rate limits, MCP start-up,
        notices for threads without a handle) as events: the last 256 kept, then each new one, until
        ``shutdown()``. A reader that falls behind gets ``System(subtype="notices_dropped")``."""
        return self._notices.follow()

    async def _open(
        self,
        child: Child,
        result: Any,
        spec: Spec,
        turn_params: dict[str, Any] | None,
        policy: ApprovalPolicy,
        notices: list[System],
        baseline: TokenUsage | None,
        box: Box,
    ) -> CodexHandle:
        thread = result.get("thread") if isinstance(result, dict) else None
        thread_id = thread.get("id") if isinstance(thread, dict) else None
        if not isinstance(thread_id, str):
            raise RPCError(-32603, f"thread response without a thread id: {result!r}")
        # Containment: the box -- the workspace, its temporary directory and the declared roots.
        handle = CodexHandle(
            self, self._sessions, child.conn, thread_id, spec, policy, box.workspace, box.roots,
            baseline=baseline, box=box,
        )  # fmt: skip
        handle.thread_settings(result)
        self._sessions.add(handle)
        # Notices codex sent for this thread before the handle subscribed (MCP start-up, ...).
        for event in self._notices.adopt(thread_id):
            handle.notice(event)
        # The model the thread really runs (set by Spec.model, a -c override or the user's config).
        model = result.get("model")
        if isinstance(model, str) and model:
            provider = result.get("modelProvider")
            data = {"model": model, "model_provider": provider, "codex_version": child.version}
            handle.notice(System(subtype="session", data={**data, "sandbox": box.sandbox}))
        if self._version_notice is not None:  # once: the first session after start
            handle.notice(self._version_notice)
            self._version_notice = None
        for notice in notices:
            handle.notice(notice)
        if turn_params is None:
            return handle
        items = turn_params["input"]
        extra = {k: v for k, v in turn_params.items() if k != "input"}
        try:
            await handle.start_turn(items, extra)
        except BaseException:
            await handle.stop()
            raise
        return handle

    async def review(
        self,
        target: ReviewTarget,
        *,
        cwd: str | os.PathLike[str],
        model: str | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> ReviewResult:
        """A codex review of ``target`` in ``cwd`` on a fresh read-only thread (see ``codex._review``)."""
        child = await self._ready()
        session = ReviewSession(
            child.conn,
            rpc_timeout=self.options.rpc_timeout,
            cwd=cwd,
            model=model,
            on_event=on_event,
        )
        return await session.run(target)

    # -- plumbing ------------------------------------------------------------------------------------

    def _spawn_task(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return self._sessions.spawn_task(coro, name)

    def _on_global_notification(self, msg: Notification) -> None:
        if msg.method == LOGIN_COMPLETED:
            self._login_completed(msg.params)
        seen = self._subthreads.observe(msg.method, msg.params)  # a sub-agent's, or no thread's
        if seen is not None:
            sub, events = seen
            owner = self._owner(sub)
            if owner is not None:  # a sub-agent's events go into its session's stream
                owner.subagent_events(sub.thread_id, events)
                return
        self._notices.route(msg.method, msg.params)

    def _owner(self, sub: SubThread) -> CodexHandle | None:
        """The open session ``sub`` works for (cached on it), or None."""
        owner: CodexHandle | None = sub.owner
        if owner is None or owner.closed:
            owner = sub.owner = self._subthreads.owner(sub.thread_id, self._sessions.handles())
        return owner

    async def _on_global_request(self, msg: Request) -> None:
        child = self._child
        if child is None:
            return
        if _approvals.is_approval_request(msg.method, msg.params):
            await self._thread_approval(child.conn, msg)
        elif msg.method == _requests.AUTH_REFRESH:
            # The handler may take long (a browser login): answer from a task, never on the worker.
            self._spawn_task(self._refresh_auth(child.conn, msg), f"auth-refresh:{msg.id}")
        elif msg.method == _requests.CURRENT_TIME:
            with contextlib.suppress(AgentFleetError):
                await child.conn.respond(msg.id, _requests.current_time_response())
        elif msg.method in _SESSION_REQUESTS and (found := self._request_owner(msg)) is not None:
            owner, sub = found  # a sub-agent's tool call or question: answered as its session's would be
            await owner.on_subthread_request(msg, sub)
        else:
            with contextlib.suppress(AgentFleetError):
                await child.conn.respond_error(
                    msg.id, RPCError.METHOD_NOT_FOUND, f"agent-fleet does not handle {msg.method}"
                )

    async def _thread_approval(self, conn: Connection, msg: Request) -> None:
        """An approval for a thread without a handle: a sub-agent's is judged by the session it works
        for; any other is declined (the refusal codex offers) and reported on ``notices()``. Never an
        RPC error: an approval left unanswered or errored is not judged."""
        found = self._request_owner(msg)
        if found is not None:
            owner, sub = found
            await owner.on_subthread_approval(msg, sub)
            return
        thread_id = route(msg.method, msg.params)
        reason = f"an approval for thread {thread_id!r}, which belongs to no session of this provider"
        decision = _approvals.settle(
            msg.method, msg.params, Decision(action="decline", rule="unknown-thread", reason=reason)
        )
        data = {"rule": decision.rule, "reason": reason, "method": msg.method, "thread_id": thread_id}
        self._notices.post(System(subtype="approval_denied", data=data))
        with contextlib.suppress(AgentFleetError):
            await conn.respond(msg.id, _approvals.to_wire(msg.method, msg.params, decision))

    def _request_owner(self, msg: Request) -> tuple[CodexHandle, SubThread] | None:
        """The session a request of a thread without a handle (a sub-agent's) belongs to."""
        thread_id = route(msg.method, msg.params)
        if thread_id is None:
            return None
        sub = self._subthreads.get(thread_id)
        owner = self._owner(sub)
        return (owner, sub) if owner is not None else None


async def _closes_soon(child: Child, within: float = 5.0) -> bool:
    """Whether ``child``'s connection closes within ``within`` seconds (a failed write to a child that
    is gone comes just before its end of file; one to a live child means something else broke)."""
    closed = asyncio.Event()
    child.conn.on_close(lambda _cause: closed.set())
    try:
        async with asyncio.timeout(within):
            await closed.wait()
    except TimeoutError:
        return False
    return True
