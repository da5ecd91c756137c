"""``CodexHandle``: one codex thread on the shared app-server, driven turn by turn.

Theory of operation
-------------------
A handle owns one routing subscription (its ``threadId``) on the provider's connection; the
connection runs it on a worker of its own, so a slow consumer here never delays another thread.

Session states::

    OPEN ──stop()/crash/shutdown──> CLOSED

Turn states (one ``AppServerTurn`` at a time)::

    RUNNING ──turn/completed | timeout | idle timeout | stop() | crash──> FINISHED

A turn is created *before* ``turn/start`` is sent, so no early notification is lost. Notifications
carrying the id of an earlier turn (e.g. ``turn/completed`` of a turn we interrupted on timeout) are
dropped. Every way a turn can end calls ``EventStream.finish``: the first wins, the rest are no-ops,
so ``stop()``, crash handling and the forwarder can race in any order.

Server requests (approvals, tool calls, questions) are answered by ``ServerRequests``
(``_handle_requests``). An approval's reply is only ever a decision codex offered
(``_approvals.settle``); codex offers no ``decline`` for commands, so a refusal goes out as ``cancel``
and codex interrupts its turn. That end is not passed on: the same ``AppServerTurn`` (same stream, same
mapper) continues with a new codex turn telling the agent what was declined
(``declined_turn_continued``), at most ``_MAX_CONTINUATIONS`` times.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_fleet._provider.board import Backlog
from agent_fleet._provider.handle import StreamedHandle
from agent_fleet._provider.sessions import HandleHost
from agent_fleet._provider.stream import TERMINAL_TYPES
from agent_fleet._provider.watchdog import IdleWatchdog
from agent_fleet.codex import _overload
from agent_fleet.codex._box import Box
from agent_fleet.codex._handle_requests import ServerRequests
from agent_fleet.codex._stdin import StdinHistory
from agent_fleet.codex._subagents import SubAgents
from agent_fleet.codex._turn import AppServerTurn
from agent_fleet.codex._turn_settings import SessionSettings, TurnSettings
from agent_fleet.codex.mapping import TurnMapper, goal_event, token_usage
from agent_fleet.codex.translate import turn_input
from agent_fleet.contract import Sandbox, Spec, check_text
from agent_fleet.errors import AgentFleetError, UsageError
from agent_fleet.events import Error, Event, Goal, Result, System, TokenUsage
from agent_fleet.jsonrpc import Connection, Notification, Subscription
from agent_fleet.policy import ApprovalPolicy
from agent_fleet.tools import by_name

if TYPE_CHECKING:
    from agent_fleet.codex.appserver import CodexProvider

__all__ = ["CodexHandle"]

logger = logging.getLogger("agent_fleet.codex")


_CONTROL_TIMEOUT = 5.0  # interrupt / unsubscribe during stop: never let a dead peer hang stop()
_MAX_CONTINUATIONS = 20  # refusals carried as "cancel" in one turn before the turn is left cancelled


class CodexHandle(StreamedHandle[AppServerTurn], ServerRequests, SubAgents):
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
        writable_roots: tuple[str, ...] = (),
        *,
        baseline: TokenUsage | None = None,
        box: Box | None = None,
    ) -> None:
        self._provider = provider  # read for its options only
        self._box = box  # the session's writable world and its tripwire; removed with the session
        self._escalated: set[str] = set()
        self._host = host
        self._conn = connection
        self._thread_id = thread_id
        self._spec = spec
        self._policy = policy
        self._cwd = cwd
        self._roots = writable_roots  # declared to codex: containment counts them with the workspace
        self._bound = provider.options.event_buffer
        self._turn: AppServerTurn | None = None
        self._old_turn_ids: set[str] = set()
        self._closed = False
        # Token totals of the session before the next turn (None: unknown, e.g. a resumed thread
        # until codex replays its usage), and the notices that arrived while no turn ran.
        self._baseline = baseline
        self._backlog = Backlog()
        self.spawned: set[str] = set()  # sub-agent threads of this session (their approvals are ours)
        self._sub_usage: dict[str, TokenUsage] = {}  # each sub-agent's latest token totals
        self._idle = TurnMapper(thread_id, spawned=self.spawned)
        self._tools = by_name(spec.tools)
        self._stdin = StdinHistory()
        self._settings = TurnSettings(SessionSettings(workspace=cwd, writable_roots=writable_roots))
        self._sub: Subscription = connection.subscribe(
            thread_id, on_notification=self._on_notification, on_request=self._on_request
        )

    # -- public ------------------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self._thread_id

    @property
    def closed(self) -> bool:
        return self._closed

    def owns_turn(self, turn_id: str) -> bool:
        """``turn_id`` is one of this session's turns (a sub-agent names its root turn)."""
        turn = self._turn
        return turn_id in self._old_turn_ids or (turn is not None and turn.turn_id == turn_id)

    async def send(
        self,
        prompt: str,
        *,
        images: Sequence[str | Path] = (),
        output_schema: Mapping[str, Any] | None = None,
        model: str | None = None,
        reasoning_effort: str | None = None,
        reasoning_summary: str | None = None,
        sandbox: Sandbox | None = None,
        approval_policy: str | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        """Start a follow-up turn; the keyword settings apply to this turn only (the next turn is back
        to the session's own), checked against the session's walls (``codex._turn_settings``): a
        sandbox never wider than the session's, an approval policy (``never`` < ``on-request`` <
        ``untrusted``) never asking less, a cwd inside the workspace. ``reasoning_summary``: ``auto``,
        ``concise``, ``detailed`` or ``none``. Raises ``UsageError`` (nothing sent) for one that would
        pass a wall, while a turn runs or after ``stop()``."""
        if self.running:
            raise UsageError("send(): the current turn is still running; wait for it or stop() first")
        check_text(prompt)
        if self._settings.needs_default_effort(reasoning_effort):  # to restore: the model's default
            self._settings.with_effort(await self._provider.default_effort(self._settings.session.model))
        overrides = self._settings.params(
            model=model,
            reasoning_effort=reasoning_effort,
            reasoning_summary=reasoning_summary,
            sandbox=sandbox,
            approval_policy=approval_policy,
            cwd=cwd,
        )
        await self._follow_up(prompt, images=tuple(images), output_schema=output_schema, extra=overrides)

    async def _follow_up(
        self,
        prompt: str,
        *,
        images: tuple[str | Path, ...],
        output_schema: Mapping[str, Any] | None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        params = dict(extra or {})
        if output_schema is not None:
            params["outputSchema"] = dict(output_schema)
        await self.start_turn(turn_input(prompt, images), params, structured=True if output_schema else None)

    async def fork(self) -> CodexHandle:
        """A new thread with a copy of this one's history (``thread/fork``); no turn runs until
        ``send()``. The fork has this session's settings and approval policy."""
        if self.running:
            raise UsageError("fork(): wait for the current turn to end first")
        return await self._provider.fork(self._thread_id, self._spec)

    async def rename(self, name: str) -> None:
        """Name the thread (``thread/name/set``): its title in ``list_sessions()`` and ``read_session``."""
        check_text(name, "the name")
        if not name.strip():
            raise UsageError("rename(): the name is empty")
        await self._call("thread/name/set", {"threadId": self._thread_id, "name": name})

    async def set_goal(self, objective: str, *, token_budget: int | None = None) -> Goal:
        """Set the thread's goal (``thread/goal/set``, active); returns it as codex recorded it. Its
        changes come as ``Goal`` events."""
        check_text(objective, "the goal")
        if not objective.strip():
            raise UsageError("set_goal(): the objective is empty")
        if token_budget is not None and (isinstance(token_budget, bool) or token_budget < 1):
            raise UsageError(f"set_goal(): token_budget must be a whole number >= 1, not {token_budget!r}")
        params: dict[str, Any] = {
            "threadId": self._thread_id,
            "objective": objective,
            "status": "active",
            "origin": "user",
        }
        if token_budget is not None:
            params["tokenBudget"] = token_budget
        result = await self._call("thread/goal/set", params)
        return goal_event(result.get("goal") if isinstance(result, dict) else None)

    async def clear_goal(self) -> None:
        """Clear the thread's goal (``thread/goal/clear``)."""
        await self._call("thread/goal/clear", {"threadId": self._thread_id, "origin": "user"})

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        if self._closed:
            raise UsageError("this session is stopped; use provider.resume() to continue it")
        return await _overload.request(self._conn, method, params, timeout=self._provider.options.rpc_timeout)

    async def compact(self) -> None:
        """Compact the thread's history (``thread/compact/start``) as a turn of its own: read it with
        ``events()`` (a ``Compaction`` event, then ``Result``) or ``wait()``."""
        if self.running:
            raise UsageError("compact(): the current turn is still running; wait for it or stop() first")
        await self._begin("thread/compact/start", {"threadId": self._thread_id}, structured=False)

    async def inject(self, text: str) -> None:
        """Steer the running turn with more input (``turn/steer``)."""
        turn = self._turn
        if self._closed or turn is None or turn.stream.done:
            raise UsageError("inject(): no turn is running")
        if turn.turn_id is None:
            raise UsageError("inject(): the turn has not started yet")
        check_text(text, "the injected text")
        await _overload.request(
            self._conn,
            "turn/steer",
            {"threadId": self._thread_id, "expectedTurnId": turn.turn_id, "input": turn_input(text)},
            timeout=self._provider.options.rpc_timeout,
        )

    async def interrupt(self) -> None:
        """Stop the running turn and keep the session: the stream ends with ``Error(code="cancelled")``
        at once, codex is asked to interrupt the turn (``turn/interrupt``, awaited), and the next
        ``send()`` continues the same thread with its history. A no-op when no turn is running."""
        turn = self._turn
        if self._closed or turn is None:
            return
        error = Error(code="cancelled", message="interrupted by the caller", data={"turn_id": turn.turn_id})
        if self._finish(turn, error) and turn.turn_id is not None:
            turn.interrupt = self._host.spawn_task(
                self._control("turn/interrupt", {"threadId": self._thread_id, "turnId": turn.turn_id}),
                f"interrupt:{self._thread_id}",
            )
        if turn.interrupt is not None:
            await asyncio.wait([turn.interrupt])

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
        closing = self._close_box()
        if closing is not None:
            await closing

    # -- provider-facing -----------------------------------------------------------------------------

    async def start_turn(
        self,
        items: list[dict[str, Any]],
        extra: dict[str, Any] | None = None,
        *,
        structured: bool | None = None,
    ) -> None:
        """Send ``turn/start`` with ``items`` (+ ``extra`` params); the new turn is live before the send.
        ``structured`` (default: the spec has an output schema) parses the answer as JSON."""
        params: dict[str, Any] = {"threadId": self._thread_id, "input": items}
        if extra:
            params.update(extra)
        if structured is None:
            structured = self._spec.output_schema is not None
        await self._begin("turn/start", params, structured=structured)

    async def _begin(self, method: str, params: dict[str, Any], *, structured: bool) -> None:
        if self._closed:
            raise UsageError("this session is stopped; use provider.resume() to continue it")
        previous = self._turn
        if previous is not None:
            if previous.interrupt is not None:
                # codex folds a turn/start into a still-active turn: the interrupt must land first.
                await asyncio.wait([previous.interrupt])
            if previous.turn_id is not None:
                self._old_turn_ids.add(previous.turn_id)
            usage, known = previous.mapper.usage, self._baseline
            if usage is not None and (known is None or usage.total_tokens >= known.total_tokens):
                self._baseline = usage  # (a usage update after the turn ended may be newer)
        turn = AppServerTurn(
            self._thread_id,
            structured=structured,
            bound=self._bound,
            baseline=self._baseline,
            spawned=self.spawned,
        )
        turn.sub_baseline = self.subagents_total()
        self._turn = turn
        for event in self._backlog.drain():  # what arrived between turns comes first
            turn.stream.push(event)
        try:
            # Retried only when codex refused it unprocessed (overloaded): a duplicate would run twice.
            result = await _overload.request(
                self._conn, method, params, timeout=self._provider.options.rpc_timeout
            )
        except AgentFleetError as exc:
            self._finish(turn, Error(code="turn_failed", message=f"{method} failed: {exc}"))
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

    def thread_settings(self, result: Any) -> None:
        """What the thread runs with, from codex's thread/start (resume, fork) response: the session's
        walls and values for ``send()``'s per-turn settings."""
        summary = self._spec.config.get("model_reasoning_summary")
        self._settings = TurnSettings(
            SessionSettings.from_response(
                result,
                workspace=self._cwd,
                writable_roots=self._roots,
                summary=summary if isinstance(summary, str) else None,
            )
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
        closing = self._close_box()
        if closing is not None:  # a background task of the provider's (shutdown waits for them)
            self._host.spawn_task(closing, f"box:{self._thread_id}")

    # -- internals ---------------------------------------------------------------------------------------

    def _detach(self) -> None:
        self._sub.close()
        self._host.forget(self)

    def _close_box(self) -> Coroutine[Any, Any, None] | None:
        """Removing the session's box, to run in a worker thread (a directory tree takes tens of
        milliseconds to remove on a loaded machine: never on the event loop, where it would hold every
        other session)."""
        box, self._box = self._box, None
        return asyncio.to_thread(box.close) if box is not None else None

    def _finish(self, turn: AppServerTurn, event: Result | Error) -> bool:
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
            await _overload.request(self._conn, method, params, timeout=_CONTROL_TIMEOUT)
        except AgentFleetError as exc:  # the turn is already ended for the caller; best effort only
            logger.debug("%s for thread %s failed: %s", method, self._thread_id, exc)

    def _on_timeout(self, turn: AppServerTurn) -> None:
        turn.timer = None
        message = f"turn exceeded its timeout of {self._spec.timeout:g}s and was interrupted"
        self._time_out(turn, Error(code="timeout", message=message, retryable=True))

    def _on_idle(self, turn: AppServerTurn) -> None:
        limit = self._spec.idle_timeout
        message = f"no event from the agent for {limit:g}s (idle timeout); the turn was interrupted"
        self._time_out(turn, Error(code="timeout", message=message, data={"idle_timeout": limit}))

    def _time_out(self, turn: AppServerTurn, error: Error) -> None:
        if self._finish(turn, error) and turn.turn_id:
            turn.interrupt = self._host.spawn_task(
                self._control("turn/interrupt", {"threadId": self._thread_id, "turnId": turn.turn_id}),
                f"interrupt:{self._thread_id}",
            )

    def _current_for(self, method: str, params: Any) -> AppServerTurn | None:
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

    def _between(self, method: str, params: Any) -> None:
        """A notification that belongs to no live turn: kept for the next turn when it is news (no
        turn named, or a turn this handle never ran); the usage codex replays names the baseline."""
        if type(params) is not dict:
            return
        turn = self._turn
        turn_id = params.get("turnId")
        if method == "thread/tokenUsage/updated":
            usage = params.get("tokenUsage")
            if isinstance(usage, dict) and turn_id not in self._old_turn_ids:
                replayed = token_usage(usage, None)
                if turn is None or turn.stream.done:
                    self._baseline = replayed
                elif turn.turn_id is None and turn.mapper.baseline is None:
                    turn.mapper.baseline = replayed  # thread/resume replays the total before this turn
            return
        if turn is not None and not turn.stream.done:
            return  # a live turn, and this names another: stale
        if turn_id is not None and (
            turn_id in self._old_turn_ids or turn_id == getattr(turn, "turn_id", None)
        ):
            return
        for event in self._idle.feed(method, params):
            if type(event) not in TERMINAL_TYPES:
                self._backlog.add(event)

    def notice(self, event: Event) -> None:
        """A notice that concerns this session (from the provider): into the running turn, or kept
        for the next one."""
        turn = self._turn
        if turn is not None and not turn.stream.done:
            turn.stream.push(event)
        elif not self._closed:
            self._backlog.add(event)

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
                self._between(msg.method, params)
                return
        turn.seen = True  # for the idle watchdog: one store, no branch
        stream = turn.stream
        if msg.method == "item/completed" and self._box is not None:
            for script in self._box.refused():  # the tripwire stopped an unsandboxed run
                data = {"kind": "unsandboxed_run", "command": script[:2000]}
                stream.push(System(subtype="codex_refused", data=data))
        for event in turn.mapper.feed(msg.method, params):
            if type(event) in TERMINAL_TYPES:
                if self._sub_usage and type(event) is Result:  # the sub-agents' tokens count too
                    event = dataclasses.replace(event, usage=self.combined_usage(event.usage, turn))
                if not self._continue_declined(turn, event):
                    self._finish(turn, event)  # type: ignore[arg-type]
            else:
                if self._sub_usage and type(event) is TokenUsage:
                    event = self.combined_usage(event, turn)  # type: ignore[assignment]
                stream.push(event)

    def _emit(self, event: Event) -> None:
        turn = self._turn
        if turn is not None:
            turn.stream.push(event)

    def _continue_declined(self, turn: AppServerTurn, event: Event) -> bool:
        """True when ``event`` (the turn's end) is codex interrupting the turn because a refusal could
        only be sent as ``cancel``: the turn then goes on as a new codex turn on the same stream, whose
        prompt tells the agent what was declined and why, so a refusal never ends the work by itself."""
        note = turn.resume_after
        if note is None or not isinstance(event, Error) or event.code != "cancelled" or self._closed:
            return False
        turn.resume_after = None
        if turn.continuations >= _MAX_CONTINUATIONS:
            return False
        turn.continuations += 1
        if turn.turn_id is not None:
            self._old_turn_ids.add(turn.turn_id)
        turn.turn_id = turn.mapper.turn_id = None
        turn.stream.push(System(subtype="declined_turn_continued", data={"reason": note}))
        self._host.spawn_task(self._resume_turn(turn, note), f"continue:{self._thread_id}")
        return True

    async def _resume_turn(self, turn: AppServerTurn, note: str) -> None:
        if turn.stream.done or self._closed:
            return
        text = (
            f"[agent-fleet] {note} That request was not carried out. "
            "Continue the task without it (a plainer command may be accepted)."
        )
        params = {"threadId": self._thread_id, "input": turn_input(text)}
        try:
            result = await _overload.request(
                self._conn, "turn/start", params, timeout=self._provider.options.rpc_timeout
            )
        except AgentFleetError as exc:
            self._finish(turn, Error(code="turn_failed", message=f"turn/start after a refusal failed: {exc}"))
            return
        turn_obj = result.get("turn") if isinstance(result, dict) else None
        if isinstance(turn_obj, dict) and isinstance(turn_obj.get("id"), str) and turn.turn_id is None:
            turn.turn_id = turn.mapper.turn_id = turn_obj["id"]

    def auth_failed(self, error: Error) -> None:
        """codex could not refresh its ChatGPT tokens: a live turn ends with ``error``; an idle session
        gets ``System(auth_failed)`` first thing in its next turn (which may fail the same way)."""
        turn = self._turn
        if turn is not None and not turn.stream.done:
            self.end_turn(error)
        elif not self._closed:
            self._backlog.add(
                System(subtype="auth_failed", data={"message": error.message, **(error.data or {})})
            )

    def end_turn(self, error: Error) -> None:
        """End the live turn with ``error`` and interrupt it on the server (the session stays open)."""
        turn = self._turn
        if turn is not None and self._finish(turn, error) and turn.turn_id:
            turn.interrupt = self._host.spawn_task(
                self._control("turn/interrupt", {"threadId": self._thread_id, "turnId": turn.turn_id}),
                f"interrupt:{self._thread_id}",
            )
