"""Deferred approvals: requests the policy left to a person (``PermissionConfig(default="ask")``).

``ApprovalQueue.handler`` is the providers' ``approval_handler``. It is called on a task of its own for
each request the policy did not decline (the codex handle spawns it), so a parked request blocks only
its own turn. Only a ``default-ask`` decline is parked; every other decision is returned unchanged (a
built-in decline never reaches the handler, and an allow needs nobody). A parked request waits until
``decide`` or its timeout, which declines it with rule ``approval-timeout``. ``pending()`` shows the
requests redacted: a command may carry a credential.

The session that asked is told, in its own event stream: ``System(subtype="approval_pending")`` when
its request is parked (what waits, its approval id, where to decide: the dashboard and the API path,
the deadline) and ``System(subtype="approval_decided")`` when it is decided or times out, so a client
(``run --server``, ``batch --server``) shows what waits instead of going quiet. (The provider gives the
handler the session's emitter: ``agent_fleet._provider.refine.HANDLER_EMIT``.)
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from agent_fleet._provider.refine import HANDLER_EMIT
from agent_fleet._redact import Redactor
from agent_fleet.errors import UsageError
from agent_fleet.events import System
from agent_fleet.policy import ApprovalRequest, Decision

ASK_RULE: Final = "default-ask"
Answer = Literal["allow_once", "allow_for_session", "decline", "cancel"]
ANSWERS: Final = ("allow_once", "allow_for_session", "decline", "cancel")


@dataclass(slots=True)
class Pending:
    id: str
    request: ApprovalRequest
    created: float
    deadline: float | None
    future: asyncio.Future[Decision] = field(repr=False)

    def to_dict(self, redactor: Redactor) -> dict[str, Any]:
        """The request as the API and the dashboard show it: redacted (a command may carry a key)."""
        command = self.request.command
        shown: dict[str, Any] = {
            "approval_id": self.id,
            "kind": self.request.kind,
            "command": command if isinstance(command, str) or command is None else list(command),
            "paths": list(self.request.paths),
            "cwd": self.request.cwd,
            "created": self.created,
            "deadline": self.deadline,
        }
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

    def pending(self) -> list[dict[str, Any]]:
        return [p.to_dict(self._redactor) for p in self._pending.values()]

    def _bump(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()

    async def handler(self, request: ApprovalRequest, decision: Decision) -> Decision:
        if decision.rule != ASK_RULE:
            return decision
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
        )
        self._pending[approval_id] = pending
        self._bump()
        emit = HANDLER_EMIT.get()
        if emit is not None:
            shown = pending.to_dict(self._redactor)
            where = {
                "decide": f"POST /v1/approvals/{approval_id}",
                "dashboard": f"{self.url}/" if self.url else None,
            }
            emit(System(subtype="approval_pending", data={**shown, **where, "rule": decision.rule}))
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
            if emit is not None:
                outcome = decided.action if decided is not None else "cancel"
                rule = decided.rule if decided is not None else None
                emit(
                    System(
                        subtype="approval_decided",
                        data={"approval_id": approval_id, "decision": outcome, "rule": rule},
                    )
                )

    def decide(self, approval_id: str, answer: str, reason: str | None = None) -> None:
        """Answer a pending request. ``KeyError`` when it is not pending; ``UsageError`` for a bad answer."""
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

    def decline_all(self, reason: str) -> None:
        """Decline every pending request (the daemon is draining)."""
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_result(Decision(action="decline", rule="shutdown", reason=reason))
