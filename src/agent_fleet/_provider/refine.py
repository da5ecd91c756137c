"""An ``approval_handler``'s refinement of the policy's decision: who may see which decisions, and a
handler that fails or answers nonsense declines (never an accept, never an exception to the peer)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from agent_fleet.events import Event, System
from agent_fleet.policy import ApprovalRequest, Decision
from agent_fleet.policy.engine import ESCALATION_RULE, STRICT_RULE

__all__ = ["REFINABLE_DECLINES", "for_handler", "refine"]

#: The declines an ``approval_handler`` may still turn into an accept: the strict profile's "not proven
#: harmless", an escalation's "runs outside the sandbox, not proven harmless" and
#: ``PermissionConfig(default="ask")``'s "nobody decided". Every other decline is final.
REFINABLE_DECLINES: Final = frozenset({STRICT_RULE, ESCALATION_RULE, "default-ask"})


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
) -> Decision:
    """``handler``'s refinement of ``decision`` when it may see it (``for_handler``), else ``decision``.
    A handler that raises or returns something other than a ``Decision`` declines with rule
    ``handler-error`` and ``emit``s ``System(subtype="approval_handler_failed")``."""
    if handler is None or not for_handler(decision):
        return decision
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
    return refined
