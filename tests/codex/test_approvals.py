"""The policy's neutral decisions translated to each codex approval wire format."""

from __future__ import annotations

from typing import Any, get_args

import pytest

from agent_fleet.codex import _approvals
from agent_fleet.policy import Action, Decision

_V2 = "item/commandExecution/requestApproval"
_PERMS = "item/permissions/requestApproval"


@pytest.mark.parametrize(
    ("action", "v2", "legacy"),
    [
        ("allow_once", "accept", "approved"),
        ("allow_for_session", "acceptForSession", "approved_for_session"),
        ("cancel", "cancel", "abort"),
    ],
)
def test_every_non_decline_action_has_a_word_in_both_formats(action: Action, v2: str, legacy: str) -> None:
    decision = Decision(action=action)
    assert _approvals.to_wire(_V2, {}, decision) == {"decision": v2}
    assert _approvals.to_wire("item/fileChange/requestApproval", {}, decision) == {"decision": v2}
    assert _approvals.to_wire("execCommandApproval", {}, decision) == {"decision": legacy}
    assert _approvals.to_wire("applyPatchApproval", {}, decision) == {"decision": legacy}


def test_decline_carries_the_reason_in_the_legacy_format() -> None:
    decision = Decision(action="decline", reason="no", rule="user-deny")
    assert _approvals.to_wire(_V2, {}, decision) == {"decision": "decline"}
    assert _approvals.to_wire("execCommandApproval", {}, decision) == {
        "decision": {"denied": {"rejection": "no"}}
    }


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("allow_once", {"permissions": {"network": True}, "scope": "turn"}),
        ("allow_for_session", {"permissions": {"network": True}, "scope": "session"}),
        ("decline", {"permissions": {}, "scope": "turn"}),
        ("cancel", {"permissions": {}, "scope": "turn"}),
    ],
)
def test_permission_grants_follow_the_action(action: Action, expected: dict[str, Any]) -> None:
    params = {"permissions": {"network": True}}
    assert _approvals.to_wire(_PERMS, params, Decision(action=action)) == expected


def test_the_tables_cover_every_action() -> None:
    assert set(get_args(Action)) == set(_approvals._V2)
    assert set(get_args(Action)) - {"decline"} == set(_approvals._LEGACY)
