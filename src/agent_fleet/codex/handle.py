"""``CodexHandle``: one codex thread on the shared app-server, driven turn by turn.

Theory of operation
-------------------
A handle owns one routing subscription (its ``threadId``) on the provider's connection; the
connection runs it on a worker of its own, so a slow consumer here never delays another thread.

Session states::

    OPEN ──stop()/crash/shutdown──> CLOSED

Turn states (one ``_AppServerTurn`` at a time)::

    RUNNING ──turn/completed | timeout | idle timeout | stop() | crash──> FINISHED

A turn is created *before* ``turn/start`` is sent, so no early notification is lost. Notifications
carrying the id of an earlier turn (e.g. ``turn/completed`` of a turn we interrupted on timeout) are
dropped. Every way a turn can end calls ``EventStream.finish``: the first wins, the rest are no-ops,
so ``stop()``, crash handling and the forwarder can race in any order.

Approvals are server requests on the same worker: the policy decides at once; an ``approval_handler``
runs on a task of its own so it may take as long as it likes. So do ``Spec.tools`` calls
(``item/tool/call``: policy, then the function) and questions / MCP elicitations (the
``input_handler``, else canned answers or a decline). ``currentTime/read`` is answered at once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agent_fleet._provider.asking import answer_input
from agent_fleet._provider.audit import approval_events
from agent_fleet._provider.handle import StreamedHandle
from agent_fleet._provider.sessions import HandleHost
from agent_fleet._provider.stream import TERMINAL_TYPES, EventStream
from agent_fleet._provider.watchdog import IdleWatchdog
from agent_fleet.codex import _approvals
from agent_fleet.codex import _server_requests as _requests
from agent_fleet.codex.mapping import TurnMapper
from agent_fleet.codex.translate import turn_input
from agent_fleet.contract import Spec, check_text
from agent_fleet.errors import AgentFleetError, UsageError
from agent_fleet.events import Error, Event, Result, System
from agent_fleet.jsonrpc import Connection, Notification, Request, Subscription
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision
from agent_fleet.policy.engine import STRICT_RULE
from agent_fleet.tools import by_name, failure

if TYPE_CHECKING:
    from agent_fleet.codex.appserver import CodexProvider

__all__ = ["CodexHandle"]

logger = logging.getLogger("agent_fleet.codex")

_CONTROL_TIMEOUT = 5.0  # interrupt / unsubscribe during stop: never let a dead peer hang stop()


class _AppServerTurn:
    __slots__ = ("approvals", "interrupt", "mapper", "seen", "stream", "timer", "turn_id", "watchdog")

    def __init__(self, session_id: str, *, structured: bool, bound: int | None) -> None:
        self.mapper = TurnMapper(session_id, structured=structured)
        self.stream = EventStream(bound)
        self.turn_id: str | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.watchdog: IdleWatchdog | None = None
        self.seen = False  # a notification arrived since the watchdog last looked
        self.approvals = 0  # approval_handler calls in progress (a human may take minutes)
        self.interrupt: asyncio.Task[None] | None = None

    def active(self) -> bool:
        """For the idle watchdog: anything since it last asked, a command / file change running
        (codex sends nothing during a long command) or an approval being decided."""
        seen, self.seen = self.seen, False
        return seen or self.approvals > 0 or self.mapper.tools_running


class CodexHandle(StreamedHandle[_AppServerTurn]):
    """A live codex thread. Created by ``CodexProvider.spawn`` / ``resume``; see ``Handle``."""

    _provider: CodexProvider

    def __init__(
        self,
        provider: CodexProvider,
        host: HandleHost,
        connection: Connection,
        thread_id: str,
        spec: Spec,
        policy: ApprovalPolicy,
        cwd: str,
    ) -> None:
        self._provider = provider  # read for its options and writable roots only
        self._host = host
        self._conn = connection
        self._thread_id = thread_id
        self._spec = spec
        self._policy = policy
        self._cwd = cwd
        self._bound = provider.options.event_buffer
        self._turn: _AppServerTurn | None = None
        self._old_turn_ids: set[str] = set()
        self._closed = False
        self._tools = by_name(spec.tools)
        on_note = self._on_notification_bounded if self._bound is not None else self._on_notification
        self._sub: Subscription = connection.subscribe(
            thread_id, on_notification=on_note, on_request=self._on_request
        )

    # -- public ------------------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self._thread_id

    @property
    def closed(self) -> bool:
        return self._closed

    async def _follow_up(self, prompt: str) -> None:
        await self.start_turn(turn_input(prompt))

    async def inject(self, text: str) -> None:
        """Steer the running turn with more input (``turn/steer``)."""
        turn = self._turn
        if self._closed or turn is None or turn.stream.done:
            raise UsageError("inject(): no turn is running")
        if turn.turn_id is None:
            raise UsageError("inject(): the turn has not started yet")
        check_text(text, "the injected text")
        await self._conn.request(
            "turn/steer",
            {"threadId": self._thread_id, "expectedTurnId": turn.turn_id, "input": turn_input(text)},
            timeout=self._provider.options.rpc_timeout,
        )

    async def stop(self) -> None:
        """Interrupt the running turn, end the commands it left running, unsubscribe, end the stream
        with ``Error(code="cancelled")``.

        Idempotent and safe to race with crash handling; never raises for a dead connection.
        """
        if self._closed:
            return
        self._closed = True
        turn = self._turn
        cancelled = Error(code="cancelled", message="stopped by the caller")
        if turn is not None and self._finish(turn, cancelled) and turn.turn_id is not None:
            await self._control("turn/interrupt", {"threadId": self._thread_id, "turnId": turn.turn_id})
        # Commands the session left running (codex keeps them as background terminals) end with it.
        await self._control("thread/backgroundTerminals/clean", {"threadId": self._thread_id})
        await self._control("thread/unsubscribe", {"threadId": self._thread_id})
        self._detach()

    # -- provider-facing -----------------------------------------------------------------------------

    async def start_turn(self, items: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> None:
        """Send ``turn/start`` with ``items`` (+ ``extra`` params); the new turn is live before the send."""
        if self._closed:
            raise UsageError("this session is stopped; use provider.resume() to continue it")
        previous = self._turn
        if previous is not None:
            if previous.interrupt is not None:
                # codex folds a turn/start into a still-active turn: the interrupt must land first.
                await asyncio.wait([previous.interrupt])
            if previous.turn_id is not None:
                self._old_turn_ids.add(previous.turn_id)
        turn = _AppServerTurn(
            self._thread_id, structured=self._spec.output_schema is not None, bound=self._bound
        )
        self._turn = turn
        params: dict[str, Any] = {"threadId": self._thread_id, "input": items}
        if extra:
            params.update(extra)
        try:
            # Not retried: a duplicate turn/start would run the prompt twice.
            result = await self._conn.request(
                "turn/start", params, timeout=self._provider.options.rpc_timeout
            )
        except AgentFleetError as exc:
            self._finish(turn, Error(code="turn_failed", message=f"turn/start failed: {exc}"))
            raise
        turn_obj = result.get("turn") if isinstance(result, dict) else None
        if isinstance(turn_obj, dict) and isinstance(turn_obj.get("id"), str) and turn.turn_id is None:
            turn.turn_id = turn_obj["id"]
            turn.mapper.turn_id = turn.turn_id
        if self._spec.timeout is not None and not turn.stream.done:
            loop = asyncio.get_running_loop()
            turn.timer = loop.call_later(self._spec.timeout, self._on_timeout, turn)
        if self._spec.idle_timeout and not turn.stream.done:
            turn.watchdog = IdleWatchdog(
                self._spec.idle_timeout, lambda: self._on_idle(turn), busy=turn.active
            )

    def crashed(self, message: str, data: dict[str, Any]) -> None:
        """The app-server died: end the live turn with ``app_server_crashed`` and close. Sync, idempotent.

        Retryable only with ``restart_on_crash``: then ``provider.resume`` can continue the thread.
        """
        if self._closed:
            return
        self._closed = True
        if self._turn is not None:
            retryable = self._provider.options.restart_on_crash and not self._provider.closed
            error = Error(code="app_server_crashed", message=message, retryable=retryable, data=data)
            self._finish(self._turn, error)
        self._detach()

    # -- internals ---------------------------------------------------------------------------------------

    def _detach(self) -> None:
        self._sub.close()
        self._host.forget(self)

    def _finish(self, turn: _AppServerTurn, event: Result | Error) -> bool:
        if not turn.stream.finish(event):
            return False
        if turn.timer is not None:
            turn.timer.cancel()
            turn.timer = None
        if turn.watchdog is not None:
            turn.watchdog.cancel()
        return True

    async def _control(self, method: str, params: dict[str, Any]) -> None:
        try:
            await self._conn.request(method, params, timeout=_CONTROL_TIMEOUT)
        except AgentFleetError as exc:  # the turn is already ended for the caller; best effort only
            logger.debug("%s for thread %s failed: %s", method, self._thread_id, exc)

    def _on_timeout(self, turn: _AppServerTurn) -> None:
        turn.timer = None
        message = f"turn exceeded its timeout of {self._spec.timeout:g}s and was interrupted"
        self._time_out(turn, Error(code="timeout", message=message, retryable=True))

    def _on_idle(self, turn: _AppServerTurn) -> None:
        limit = self._spec.idle_timeout
        message = f"no event from the agent for {limit:g}s (idle timeout); the turn was interrupted"
        self._time_out(turn, Error(code="timeout", message=message, data={"idle_timeout": limit}))

    def _time_out(self, turn: _AppServerTurn, error: Error) -> None:
        if self._finish(turn, error) and turn.turn_id:
            turn.interrupt = self._host.spawn_task(
                self._control("turn/interrupt", {"threadId": self._thread_id, "turnId": turn.turn_id}),
                f"interrupt:{self._thread_id}",
            )

    def _current_for(self, method: str, params: Any) -> _AppServerTurn | None:
        """The live turn this notification belongs to, or None for a stale one.

        The turn id comes from the turn/start response or from ``turn/started``, whichever is
        processed first; before either, a notification naming some turn is from an earlier turn
        (e.g. usage replayed by thread/resume) and must not be adopted.
        """
        turn = self._turn
        if turn is None or turn.stream.done:
            return None
        if isinstance(params, dict):
            turn_id = params.get("turnId")
            if turn_id is None and isinstance(params.get("turn"), dict):
                turn_id = params["turn"].get("id")
            if turn_id is not None:
                if turn_id in self._old_turn_ids:
                    return None
                if turn.turn_id is None:
                    if method != "turn/started":
                        return None
                    turn.turn_id = turn_id
                    turn.mapper.turn_id = turn_id
                elif turn_id != turn.turn_id:
                    return None
        return turn

    def _on_notification(self, msg: Notification) -> None:
        turn, params = self._turn, msg.params
        # Fast path, once per event: a notification naming the live turn's id is the live turn's (if
        # that turn has already ended, its stream drops what it is given).
        if (
            turn is None
            or turn.turn_id is None
            or type(params) is not dict
            or params.get("turnId") != turn.turn_id
        ):
            turn = self._current_for(msg.method, params)
            if turn is None:
                return
        turn.seen = True  # for the idle watchdog: one store, no branch
        stream = turn.stream
        for event in turn.mapper.feed(msg.method, params):
            if type(event) in TERMINAL_TYPES:
                self._finish(turn, event)  # type: ignore[arg-type]
            else:
                stream.push(event)

    def _on_notification_bounded(self, msg: Notification) -> None:
        # With CodexOptions.event_buffer: never waits (a wait would only move the backlog into the
        # connection's queue for this thread); an unread turn's deltas are merged instead.
        turn = self._current_for(msg.method, msg.params)
        if turn is None:
            return
        turn.seen = True
        for event in turn.mapper.feed(msg.method, msg.params):
            if type(event) in TERMINAL_TYPES:
                self._finish(turn, event)  # type: ignore[arg-type]
            else:
                turn.stream.push_coalescing(event)

    def _emit(self, event: Event) -> None:
        turn = self._turn
        if turn is not None:
            turn.stream.push(event)

    # -- server requests -----------------------------------------------------------------------------

    async def _on_request(self, msg: Request) -> None:
        method = msg.method
        if _approvals.is_approval(method):
            await self._on_approval(msg)
            return
        params = msg.params if isinstance(msg.params, dict) else {}
        if method == _requests.TOOL_CALL:
            # The caller's function may take long: run it on a task so this thread's events flow.
            self._host.spawn_task(self._tool_call(msg, params), f"tool:{msg.id}")
        elif method in _requests.INPUT_METHODS:
            self._host.spawn_task(self._user_input(msg, params), f"input:{msg.id}")
        elif method == _requests.CURRENT_TIME:
            await self._reply(msg, _requests.current_time_response())
        else:
            self._emit(System(subtype="unhandled_server_request", data={"method": method, "id": msg.id}))
            await self._reply_error(msg, -32601, f"agent-fleet does not handle {method}")

    async def _on_approval(self, msg: Request) -> None:
        params = msg.params if isinstance(msg.params, dict) else {}
        turn = self._turn
        request = _approvals.to_request(
            msg.method,
            params,
            cwd=self._cwd,
            writable_roots=self._provider.writable_roots,
            file_changes=turn.mapper.file_changes if turn is not None else None,
        )
        decision = await self._policy.evaluate_async(request)
        unknown = msg.method not in _approvals.APPROVAL_METHODS
        if unknown:
            self._emit(System(subtype="unknown_approval_kind", data={"method": msg.method}))
        handler = self._provider.options.approval_handler
        if handler is not None and (decision.action != "decline" or decision.rule == STRICT_RULE):
            # A human may take minutes: answer from a task so this thread's events keep flowing.
            self._host.spawn_task(self._refine(msg, params, request, decision), f"approval:{msg.id}")
            return
        await self._answer(msg, params, request, decision)

    async def _refine(
        self, msg: Request, params: dict[str, Any], request: ApprovalRequest, decision: Decision
    ) -> None:
        await self._answer(msg, params, request, await self._ask_handler(request, decision))

    async def _ask_handler(self, request: ApprovalRequest, decision: Decision) -> Decision:
        """The ``approval_handler``'s refinement of ``decision`` (a decline when it fails)."""
        handler = self._provider.options.approval_handler
        if handler is None or (decision.action == "decline" and decision.rule != STRICT_RULE):
            return decision  # other declines are final: a handler refines, never overrides
        turn = self._turn
        if turn is not None:
            turn.approvals += 1  # a handler still deciding counts as activity for the idle watchdog
        try:
            refined = await handler(request, decision)
            if not isinstance(refined, Decision):
                raise TypeError(f"approval_handler returned {type(refined).__name__}, not Decision")
        except Exception as exc:
            self._emit(
                System(
                    subtype="approval_handler_failed",
                    data={"error": f"{type(exc).__name__}: {exc}", **_approvals.describe(request)},
                )
            )
            refined = Decision(
                action="decline", reason=f"approval handler failed: {exc}", rule="handler-error"
            )
        finally:
            if turn is not None:
                turn.approvals -= 1
        return refined

    async def _tool_call(self, msg: Request, params: dict[str, Any]) -> None:
        """Answer ``item/tool/call``: the policy, then the ``Spec.tools`` function (``ToolUse`` and
        ``ToolResult`` come from codex's own ``dynamicToolCall`` item)."""
        name = str(params.get("tool") or "")
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            output = failure(f"unknown tool {name!r} (this session's tools: {known})")
        else:
            request = ApprovalRequest(kind="tool", tool=name, cwd=self._cwd)
            decision = await self._ask_handler(request, self._policy.evaluate(request))
            use_id = f"approval:{params.get('callId') or msg.id}"
            for event in approval_events(use_id, _approvals.describe(request), decision):
                self._emit(event)
            if decision.accepted:
                output = await tool.call(params.get("arguments"))
            else:
                rule = f" ({decision.rule})" if decision.rule else ""
                output = failure(
                    f"Declined by the agent-fleet approval policy{rule}: {decision.reason or decision.action}"
                )
                if decision.action == "cancel":
                    self.end_turn(Error(code="cancelled", message=f"tool call {name!r} cancelled the turn"))
        await self._reply(msg, _requests.tool_call_response(output))

    async def _user_input(self, msg: Request, params: dict[str, Any]) -> None:
        """Answer a question or an MCP elicitation: the ``input_handler``, else canned answers or a
        decline the model can act on (``agent_fleet.user_input``)."""
        options = self._provider.options
        request = _requests.input_request(msg.method, params, self._thread_id)
        canned = (self._spec.answers, options.canned_answers)  # the session's own answers first
        answer = await answer_input(request, options.input_handler, canned, self._emit)
        await self._reply(msg, _requests.input_response(msg.method, request, answer))

    def end_turn(self, error: Error) -> None:
        """End the live turn with ``error`` and interrupt it on the server (the session stays open)."""
        turn = self._turn
        if turn is not None and self._finish(turn, error) and turn.turn_id:
            turn.interrupt = self._host.spawn_task(
                self._control("turn/interrupt", {"threadId": self._thread_id, "turnId": turn.turn_id}),
                f"interrupt:{self._thread_id}",
            )

    async def _answer(
        self, msg: Request, params: dict[str, Any], request: ApprovalRequest, decision: Decision
    ) -> None:
        use_id = f"approval:{params.get('itemId') or params.get('callId') or msg.id}"
        for event in approval_events(use_id, _approvals.describe(request), decision):
            self._emit(event)
        try:
            await self._conn.respond(msg.id, _approvals.to_wire(msg.method, params, decision))
        except AgentFleetError as exc:
            logger.debug("approval reply for thread %s failed: %s", self._thread_id, exc)

    async def _reply(self, msg: Request, result: Any) -> None:
        try:
            await self._conn.respond(msg.id, result)
        except AgentFleetError as exc:
            logger.debug("reply to %s for thread %s failed: %s", msg.method, self._thread_id, exc)

    async def _reply_error(self, msg: Request, code: int, message: str) -> None:
        try:
            await self._conn.respond_error(msg.id, code, message)
        except AgentFleetError as exc:
            logger.debug("error reply for thread %s failed: %s", self._thread_id, exc)
