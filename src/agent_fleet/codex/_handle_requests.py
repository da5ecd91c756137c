"""``ServerRequests``: how a ``CodexHandle`` answers the server requests of its thread.

Approvals are judged at once on the connection's worker for the thread; an ``approval_handler`` runs
on a task of its own so it may take as long as it likes. So do ``Spec.tools`` calls (``item/tool/call``:
policy, then the function) and questions / MCP elicitations (the ``input_handler``, else canned answers
or a decline). ``currentTime/read`` is answered at once; anything else is an RPC error and a
``System(unhandled_server_request)``. An approval's reply is only ever a decision codex offered
(``_approvals.settle``); a refusal codex lets us send only as ``cancel`` marks the turn to be continued
(``AppServerTurn.resume_after``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent_fleet._provider.asking import answer_input
from agent_fleet._provider.audit import approval_events
from agent_fleet._provider.refine import for_handler, refine
from agent_fleet._provider.sessions import HandleHost
from agent_fleet.codex import _approvals
from agent_fleet.codex import _server_requests as _requests
from agent_fleet.codex._box import Box
from agent_fleet.codex._stdin import StdinHistory
from agent_fleet.codex._subagents import tagged
from agent_fleet.codex._subthreads import SubThread
from agent_fleet.codex._turn import AppServerTurn
from agent_fleet.contract import Spec
from agent_fleet.errors import AgentFleetError
from agent_fleet.events import Error, Event, System
from agent_fleet.jsonrpc import Connection, Request
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision
from agent_fleet.tools import Tool, failure

if TYPE_CHECKING:
    from agent_fleet.codex.appserver import CodexProvider

__all__ = ["ServerRequests"]

logger = logging.getLogger("agent_fleet.codex")


class ServerRequests:
    """Mixed into ``CodexHandle``, which sets these attributes and defines ``_emit``, ``notice`` and
    ``end_turn``."""

    _provider: CodexProvider
    _host: HandleHost
    _conn: Connection
    _thread_id: str
    _spec: Spec
    _policy: ApprovalPolicy
    _cwd: str
    _roots: tuple[str, ...]
    _turn: AppServerTurn | None
    _tools: dict[str, Tool]
    _stdin: StdinHistory
    _box: Box | None
    _escalated: set[str]  # item ids of commands accepted to run outside the sandbox

    def _emit(self, event: Event) -> None:
        raise NotImplementedError

    def end_turn(self, error: Error) -> None:
        raise NotImplementedError

    def notice(self, event: Event) -> None:
        raise NotImplementedError

    async def _on_request(self, msg: Request) -> None:
        method = msg.method
        if _approvals.is_approval_request(method, msg.params):  # MCP tool approvals included
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

    async def on_subthread_approval(self, msg: Request, sub: SubThread) -> None:
        """An approval of one of this session's sub-agents: judged with this session's policy and
        workspace on the sub-agent's own items; reported in this session's events (with the
        sub-agent's ``thread_id``). A refusal sent as ``cancel`` ends the sub-agent's turn, not ours."""
        await self._on_approval(msg, sub)

    async def _on_approval(self, msg: Request, sub: SubThread | None = None) -> None:
        mapper = sub.mapper if sub is not None else self._turn.mapper if self._turn is not None else None
        session = _approvals.Session(
            workspace=self._cwd,
            writable_roots=self._roots,
            file_changes=mapper.file_changes if mapper is not None else {},
            commands=mapper.commands if mapper is not None else {},
            mcp_calls=mapper.mcp_calls if mapper is not None else {},
            stdin_history=sub.stdin if sub is not None else self._stdin,
            box=self._box,
            escalated_items=self._escalated,
        )
        judged = await _approvals.judge(self._policy, msg.method, msg.params, session)
        emit = self._emit if sub is None else self._sub_emit(sub)
        for notice in judged.notices:
            emit(notice)
        handler = self._provider.options.approval_handler
        decision = judged.decision
        if handler is not None and for_handler(decision):
            # A human may take minutes: answer from a task so this thread's events keep flowing.
            self._host.spawn_task(self._refine(msg, judged, sub), f"approval:{msg.id}")
            return
        await self._answer(msg, judged, sub)

    async def _refine(self, msg: Request, judged: _approvals.Judged, sub: SubThread | None) -> None:
        refined = await self._ask_handler(judged.request, judged.decision)
        await self._answer(msg, _approvals.regrant(self._policy, msg.params, judged, refined), sub)

    def _sub_emit(self, sub: SubThread) -> Callable[[Event], None]:
        """Where a sub-agent's notices go: this session's stream, tagged with the sub-agent."""

        def emit(event: Event) -> None:
            self.notice(tagged(event, sub.thread_id))

        return emit

    async def _ask_handler(
        self, request: ApprovalRequest, decision: Decision, emit: Callable[[Event], None] | None = None
    ) -> Decision:
        """The ``approval_handler``'s refinement of ``decision`` (``_provider.refine``)."""
        turn = self._turn
        if turn is not None:
            turn.approvals += 1  # a handler still deciding counts as activity for the idle watchdog
        try:
            handler = self._provider.options.approval_handler
            emit = emit or self._emit
            sid = self._thread_id
            return await refine(handler, request, decision, emit, _approvals.describe, session_id=sid)
        finally:
            if turn is not None:
                turn.approvals -= 1

    async def _tool_call(
        self, msg: Request, params: dict[str, Any], emit: Callable[[Event], None] | None = None
    ) -> None:
        """Answer ``item/tool/call``: the policy, then the ``Spec.tools`` function (``ToolUse`` and
        ``ToolResult`` come from codex's own ``dynamicToolCall`` item). ``emit``: where its notices go
        (default: this session's turn)."""
        emit = emit or self._emit
        name = str(params.get("tool") or "")
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            output = failure(f"unknown tool {name!r} (this session's tools: {known})")
        else:
            request = ApprovalRequest(kind="tool", tool=name, cwd=self._cwd)
            try:
                verdict = self._policy.evaluate(request)
            except Exception as exc:  # evaluate fails closed itself; this guards a bug in it
                reason = f"approval policy failed: {type(exc).__name__}: {exc}"
                verdict = Decision(action="decline", rule="policy-error", reason=reason)
            decision = await self._ask_handler(request, verdict, emit)
            use_id = f"approval:{params.get('callId') or msg.id}"
            for event in approval_events(use_id, _approvals.describe(request), decision):
                emit(event)
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

    async def _user_input(
        self, msg: Request, params: dict[str, Any], emit: Callable[[Event], None] | None = None
    ) -> None:
        """Answer a question or an MCP elicitation: the ``input_handler``, else canned answers or a
        decline the model can act on (``agent_fleet.user_input``). ``emit`` as for ``_tool_call``."""
        options = self._provider.options
        request = _requests.input_request(msg.method, params, self._thread_id)
        canned = (self._spec.answers, options.canned_answers)  # the session's own answers first
        answer = await answer_input(request, options.input_handler, canned, emit or self._emit)
        await self._reply(msg, _requests.input_response(msg.method, request, answer))

    async def _answer(self, msg: Request, judged: _approvals.Judged, sub: SubThread | None = None) -> None:
        params = msg.params if isinstance(msg.params, dict) else {}
        verdict = judged.decision
        decision = _approvals.settle(msg.method, params, verdict)  # only what codex offers
        turn = self._turn
        if verdict.action == "decline" and decision.action == "cancel" and turn is not None and sub is None:
            turn.resume_after = f"The approval policy declined {_approvals.summary(judged.request)}" + (
                f" (rule {verdict.rule}: {verdict.reason})." if verdict.rule else "."
            )
        use_id = (
            f"approval:{params.get('approvalId') or params.get('itemId') or params.get('callId') or msg.id}"
        )
        about = _approvals.describe(judged.request)
        if sub is not None:
            about["thread_id"] = sub.thread_id
        emit = self._emit if sub is None else self._sub_emit(sub)
        for event in approval_events(use_id, about, decision):
            emit(event)
        if judged.stdin is not None and decision.accepted:
            # what the process has been given: the context of what follows
            (sub.stdin if sub is not None else self._stdin).record(*judged.stdin)
        if judged.request.escalated and decision.accepted:
            # one run outside the sandbox for exactly this command (the box's tripwire checks it)
            if self._box is not None and judged.escalation is not None:
                self._box.grant(judged.escalation)
            self._escalated.add(str(params.get("itemId")))
        try:
            await self._conn.respond(msg.id, _approvals.to_wire(msg.method, params, decision, judged.grant))
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
