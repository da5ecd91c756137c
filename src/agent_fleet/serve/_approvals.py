"""Deferred approvals: requests the policy left to a person.

``ApprovalQueue.handler`` is the providers' ``approval_handler``. It is called on a task of its own for
each request the policy did not decline for good (the codex handle spawns it), so a parked request
blocks only its own turn. The declines that ask for someone are parked (``PARKED``, the policy's
refinable ones): ``default-ask`` (``PermissionConfig(default="ask")``: nobody decided),
``escalation-unproven`` (the request would run outside the OS sandbox and is not proven harmless nor
allowed by ``--allow-escalation``: issue #27's "or a person") and ``strict-unproven`` (the strict
profile could not prove it harmless). Every other decision is returned unchanged (a final decline never
reaches the handler, and an allow needs nobody). A parked request waits until ``decide`` or its
timeout, which declines it with rule ``approval-timeout``. ``pending()`` shows the requests redacted (a
command may carry a credential), with why they wait: the rule, the policy's reason, and ``escalated``
(accepting lets it run outside the sandbox; an accept is then for that one run).

The session that asked is told, in its own event stream: ``System(subtype="approval_pending")`` when
its request is parked (what waits, its approval id, where to decide: the dashboard and the API path,
the deadline) and ``System(subtype="approval_decided")`` when it is decided or times out, so a client
(``run --server``, ``batch --server``) shows what waits instead of going quiet. (The provider gives the
handler the session's emitter and id: ``agent_fleet._provider.refine.HANDLER_EMIT`` and
``HANDLER_SESSION``.)

What a person deciding needs is shown with each request: the session that asked and, through
``context`` (set by the daemon), its task, batch and prompt; the rule that left it undecided (with what
that rule means) and the policy's reason. ``on_change(kind, data)`` is told of every request parked
(``"approval"``, the request as ``pending()`` shows it) and decided (``"approval_decided"``).
A decline's ``reason`` goes back to the model where the provider can carry it (the daemon also tells the
session's running turn: codex's command approvals take no reason).

"Allow for the session" is kept here, not left to the provider: codex offers no ``acceptForSession`` for
many requests (the answer is then sent as a one-time accept), and would ask again. So the daemon
remembers what a person allowed for a session, and the same request of the same session (the same kind,
command, paths, cwd, destination or tool) is allowed without asking again (``allowed for the session``
in its reason) — only ever a request the policy left to a person (``default-ask``): rules that decline
still decline first.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from agent_fleet._provider.refine import HANDLER_EMIT, HANDLER_SESSION, REFINABLE_DECLINES
from agent_fleet._redact import Redactor
from agent_fleet.errors import UsageError
from agent_fleet.events import System
from agent_fleet.policy import ApprovalRequest, Decision
from agent_fleet.policy.engine import RULES

Context = Callable[[str], dict[str, Any]]
_REMEMBERED_SESSIONS: Final = 1000  # sessions whose "allow for the session" answers are kept (oldest go)


def _same(request: ApprovalRequest) -> Hashable:
    """What makes two requests the same request (for "allow for the session")."""
    command = request.command
    return (
        request.kind,
        command if isinstance(command, str) or command is None else tuple(map(str, command)),
        tuple(map(str, request.paths)),
        request.cwd,
        tuple(map(str, request.writable_roots)),
        request.host,
        request.port,
        request.protocol,
        request.network,
        request.tool,
    )


def _none(*args: Any) -> Any:
    return None


#: The declines a person may still turn into an accept: parked until one decides.
PARKED: Final = frozenset(REFINABLE_DECLINES)
Answer = Literal["allow_once", "allow_for_session", "decline", "cancel"]
ANSWERS: Final = ("allow_once", "allow_for_session", "decline", "cancel")


@dataclass(slots=True)
class Pending:
    id: str
    request: ApprovalRequest
    created: float
    deadline: float | None
    future: asyncio.Future[Decision] = field(repr=False)
    session_id: str | None = None
    rule: str | None = None
    why: str | None = None

    def to_dict(self, redactor: Redactor, context: Context | None = None) -> dict[str, Any]:
        """The request as the API and the dashboard show it: redacted (a command may carry a key)."""
        request = self.request
        command = request.command
        shown: dict[str, Any] = {
            "approval_id": self.id,
            "kind": request.kind,
            "command": command if isinstance(command, str) or command is None else list(command),
            "paths": list(request.paths),
            "cwd": request.cwd,
            "escalated": request.escalated,
            "created": self.created,
            "deadline": self.deadline,
            "session_id": self.session_id,
            "rule": self.rule,
            "rule_means": RULES.get(self.rule or ""),
            "why": self.why,
        }
        if request.kind == "network":
            shown.update(host=request.host, port=request.port, protocol=request.protocol)
        if request.tool is not None:
            shown["tool"] = request.tool
        if context is not None and self.session_id is not None:
            shown.update(context(self.session_id))
        redacted: dict[str, Any] = redactor.value(shown)
        return redacted


class ApprovalQueue:
    """Pending deferred approvals (see the module docstring). ``timeout`` None: wait forever."""

    def __init__(self, *, timeout: float | None = 300.0, redactor: Redactor | None = None) -> None:
        self.timeout = timeout
        self._redactor = redactor if redactor is not None else Redactor()
        self._pending: dict[str, Pending] = {}
        self._ids = itertools.count(1)
        self.parked = 0  # how many requests were ever parked
        self.changed = asyncio.Event()  # set (and replaced) whenever the queue changes
        self.url: str | None = None  # the daemon's, for "where to decide" (set when it listens)
        self.context: Context | None = None  # a session id -> what to show of it (module docstring)
        self.on_change: Callable[[str, dict[str, Any]], None] = _none
        self._granted: OrderedDict[str, set[Hashable]] = OrderedDict()  # allowed for the session

    def pending(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """The pending requests (of ``session_id`` only, when given), oldest first, redacted."""
        return [
            p.to_dict(self._redactor, self.context)
            for p in self._pending.values()
            if session_id is None or p.session_id == session_id
        ]

    def session_of(self, approval_id: str) -> str | None:
        """The session a pending request came from (None: unknown, or not pending)."""
        pending = self._pending.get(approval_id)
        return pending.session_id if pending is not None else None

    def _bump(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def handler(self, request: ApprovalRequest, decision: Decision) -> Decision:
        if decision.action != "decline" or decision.rule not in PARKED:
            return decision
        session_id = HANDLER_SESSION.get()
        # (an escalated request is allowed once at a time: leaving the sandbox is never remembered)
        if (
            not request.escalated
            and session_id is not None
            and _same(request) in self._granted.get(session_id, ())
        ):
            return Decision(action="allow_for_session", reason="allowed for the session by a person")
        approval_id = f"a{next(self._ids)}"
        self.parked += 1
        now = time.time()
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        pending = Pending(
            id=approval_id,
            request=request,
            created=now,
            deadline=now + self.timeout if self.timeout is not None else None,
            future=future,
            session_id=session_id,
            rule=decision.rule,
            why=decision.reason,
        )
        self._pending[approval_id] = pending
        self._bump()
        self.on_change("approval", pending.to_dict(self._redactor, self.context))
        emit = HANDLER_EMIT.get()
        if emit is not None:
            shown = pending.to_dict(self._redactor)
            where = {
                "decide": f"POST /v1/approvals/{approval_id}",
                "dashboard": f"{self.url}/" if self.url else None,
            }
            emit(System(subtype="approval_pending", data={**shown, **where}))
        decided: Decision | None = None
        try:
            async with asyncio.timeout(self.timeout):
                decided = await asyncio.shield(future)
                return decided
        except TimeoutError:
            decided = Decision(
                action="decline",
                rule="approval-timeout",
                reason=f"nobody decided within {self.timeout:g}s",
            )
            return decided
        finally:
            self._pending.pop(approval_id, None)
            self._bump()
            granted = decided is not None and decided.action == "allow_for_session"
            if granted and session_id is not None and not request.escalated:
                self._remember(session_id, _same(request))
            outcome = decided.action if decided is not None else "cancel"
            rule = decided.rule if decided is not None else None
            self.on_change(
                "approval_decided",
                self._redactor.value(
                    {
                        "approval_id": approval_id,
                        "session_id": pending.session_id,
                        "decision": outcome,
                        "rule": rule,
                        "reason": decided.reason if decided is not None else None,
                    }
                ),
            )
            if emit is not None:
                emit(
                    System(
                        subtype="approval_decided",
                        data={"approval_id": approval_id, "decision": outcome, "rule": rule},
                    )
                )

    def _remember(self, session_id: str, request: Hashable) -> None:
        self._granted.setdefault(session_id, set()).add(request)
        self._granted.move_to_end(session_id)
        while len(self._granted) > _REMEMBERED_SESSIONS:
            self._granted.popitem(last=False)

    def decide(self, approval_id: str, answer: str, reason: str | None = None) -> Pending:
        """Answer a pending request; returns it. ``KeyError`` when it is not pending; ``UsageError`` for
        a bad answer."""
        if answer not in ANSWERS:
            raise UsageError(f"decision must be one of {', '.join(ANSWERS)}, not {answer!r}")
        pending = self._pending[approval_id]
        if not pending.future.done():
            pending.future.set_result(
                Decision(
                    action=answer,  # type: ignore[arg-type]  # checked above
                    reason=reason or f"decided through the API: {answer}",
                    rule="api-decline" if answer in ("decline", "cancel") else None,
                )
            )
        return pending

    def decline_all(self, reason: str) -> None:
        """Decline every pending request (the daemon is draining)."""
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_result(Decision(action="decline", rule="shutdown", reason=reason))


def asked(request: ApprovalRequest) -> str:
    """What ``request`` asks, in a few words (for a message to the agent)."""
    if request.command is not None:
        command = request.command if isinstance(request.command, str) else " ".join(map(str, request.command))
        return f"the command `{command}`"
    if request.tool is not None:
        return f"the tool {request.tool}"
    if request.kind == "network":
        return f"network access to {request.host or 'any host'}"
    if request.paths:
        return f"the {request.kind.replace('_', ' ')} of {', '.join(map(str, request.paths))}"
    return f"a {request.kind.replace('_', ' ')} request"
