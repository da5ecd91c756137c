"""An ``approval_handler``'s refinement of the policy's decision: who may see which decisions, and a
handler that fails or answers nonsense declines (never an accept, never an exception to the peer)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Final

from agent_fleet.events import Event, System
from agent_fleet.policy import ApprovalRequest, Decision
from agent_fleet.policy.engine import REFINABLE_RULES

__all__ = ["HANDLER_EMIT", "HANDLER_SESSION", "REFINABLE_DECLINES", "for_handler", "refine"]

#: While an ``approval_handler`` decides a request: the emitter of the session that asked (its event
#: stream), so a handler that parks the request for a person can tell the session's reader what waits
#: (the daemon's ``approval_pending`` notice). ``None`` outside a handler call.
HANDLER_EMIT: ContextVar[Callable[[Event], None] | None] = ContextVar("approval_handler_emit", default=None)
#: While an ``approval_handler`` decides a request: the id of the session that asked (for a sub-agent's
#: request, the session it belongs to), so a handler that shows the request to a person can say where it
#: comes from (the daemon's dashboard). ``None`` outside a handler call or where the provider does not say.
HANDLER_SESSION: ContextVar[str | None] = ContextVar("approval_handler_session", default=None)

#: The declines an ``approval_handler`` may still turn into an accept: the strict profile's "not proven
#: harmless", an escalation's "runs outside the sandbox, not proven harmless" and
#: ``PermissionConfig(default="ask")``'s "nobody decided". Every other decline is final.
#: (Defined with the engine, which needs the same set to pick the stricter of two decisions.)
REFINABLE_DECLINES: Final = REFINABLE_RULES


def for_handler(decision: Decision) -> bool:
    """Whether an ``approval_handler`` sees ``decision``: anything but a decline, and the declines that
    ask for someone (``REFINABLE_DECLINES``). A handler refines, never overrides."""
    return decision.action != "decline" or decision.rule in REFINABLE_DECLINES


async def refine(
    handler: Callable[[ApprovalRequest, Decision], Awaitable[Decision]] | None,
    request: ApprovalRequest,
    decision: Decision,
    emit: Callable[[Event], None],
    describe: Callable[[ApprovalRequest], dict[str, Any]],
    *,
    session_id: str | None = None,
) -> Decision:
    """``handler``'s refinement of ``decision`` when it may see it (``for_handler``), else ``decision``.
    A handler that raises or returns something other than a ``Decision`` declines with rule
    ``handler-error`` and ``emit``s ``System(subtype="approval_handler_failed")``. ``session_id``: the
    session that asked (``HANDLER_SESSION`` while the handler runs)."""
    if handler is None or not for_handler(decision):
        return decision
    token = HANDLER_EMIT.set(emit)
    session_token = HANDLER_SESSION.set(session_id)
    try:
        refined = await handler(request, decision)
        if not isinstance(refined, Decision):
            raise TypeError(f"approval_handler returned {type(refined).__name__}, not Decision")
    except Exception as exc:
        emit(
            System(
                subtype="approval_handler_failed",
                data={"error": f"{type(exc).__name__}: {exc}", **describe(request)},
            )
        )
        return Decision(action="decline", reason=f"approval handler failed: {exc}", rule="handler-error")
    finally:
        HANDLER_EMIT.reset(token)
        HANDLER_SESSION.reset(session_token)
    return refined
