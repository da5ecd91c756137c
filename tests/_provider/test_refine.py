"""``_provider.refine``: a handler sees accepts and the two refinable declines, never a final decline;
a handler that fails declines."""

from __future__ import annotations

from typing import Any

import pytest

from agent_fleet._provider.refine import REFINABLE_DECLINES, for_handler, refine
from agent_fleet.events import Event, System
from agent_fleet.policy import ApprovalRequest, Decision

REQUEST = ApprovalRequest(kind="command", command="make deploy", cwd="/w")


def describe(request: ApprovalRequest) -> dict[str, Any]:
    return {"command": request.command}


async def accept(request: ApprovalRequest, decision: Decision) -> Decision:
    return Decision(action="allow_once", reason="a person said yes")


@pytest.mark.parametrize("rule", sorted(REFINABLE_DECLINES))
async def test_a_refinable_decline_reaches_the_handler(rule: str) -> None:
    decision = Decision(action="decline", rule=rule, reason="nobody decided")
    assert for_handler(decision)
    refined = await refine(accept, REQUEST, decision, lambda e: None, describe)
    assert refined.action == "allow_once"


@pytest.mark.parametrize("rule", ["rm-root", "user-deny", "default-deny", "policy-error", None])
async def test_a_final_decline_never_reaches_the_handler(rule: str | None) -> None:
    decision = Decision(action="decline", rule=rule, reason="no")
    assert not for_handler(decision)
    assert await refine(accept, REQUEST, decision, lambda e: None, describe) is decision


async def test_without_a_handler_the_decision_stands() -> None:
    decision = Decision(action="decline", rule="default-ask")
    assert await refine(None, REQUEST, decision, lambda e: None, describe) is decision


async def raises(request: ApprovalRequest, decision: Decision) -> Decision:
    raise RuntimeError("the pager is down")


async def nonsense(request: ApprovalRequest, decision: Decision) -> Decision:
    return "yes"  # type: ignore[return-value]


@pytest.mark.parametrize("handler", [raises, nonsense])
async def test_a_failing_handler_declines_and_says_so(handler: Any) -> None:
    events: list[Event] = []
    refined = await refine(handler, REQUEST, Decision(action="allow_for_session"), events.append, describe)
    assert refined.action == "decline" and refined.rule == "handler-error"
    assert [e.subtype for e in events if isinstance(e, System)] == ["approval_handler_failed"]
    assert isinstance(events[0], System) and events[0].data["command"] == "make deploy"
