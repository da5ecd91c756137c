"""The events that report an approval decision: the same audit trail from every provider."""

from __future__ import annotations

from typing import Any

from agent_fleet.events import Event, System, ToolResult, ToolUse
from agent_fleet.policy import Decision


def approval_events(use_id: str, about: dict[str, Any], decision: Decision) -> list[Event]:
    """A synthetic ``approval`` ``ToolUse``/``ToolResult`` pair for the decision on ``about`` (what
    was asked; the result's ``status`` is the policy's word, e.g. ``allow_for_session``), plus
    ``System(subtype="approval_denied")`` naming the rule when it is a decline."""
    declined = not decision.accepted
    events: list[Event] = [
        ToolUse(id=use_id, name="approval", input=about, synthetic=True),
        ToolResult(
            id=use_id,
            output=decision.reason or decision.action,
            is_error=declined,
            status=decision.action,
            synthetic=True,
        ),
    ]
    if declined:
        events.append(
            System(
                subtype="approval_denied", data={"reason": decision.reason, "rule": decision.rule, **about}
            )
        )
    return events
