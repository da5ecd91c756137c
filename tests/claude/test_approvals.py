"""The policy's neutral decisions translated to Claude Code's permission results."""

from __future__ import annotations

from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

from agent_fleet.claude import _approvals
from agent_fleet.policy import Decision


def test_both_allows_allow() -> None:
    assert isinstance(_approvals.to_permission(Decision(action="allow_once")), PermissionResultAllow)
    assert isinstance(_approvals.to_permission(Decision(action="allow_for_session")), PermissionResultAllow)


def test_decline_denies_without_interrupting_and_names_the_rule() -> None:
    result = _approvals.to_permission(Decision(action="decline", reason="too risky", rule="git-reset-hard"))
    assert isinstance(result, PermissionResultDeny)
    assert not result.interrupt
    assert "git-reset-hard" in result.message and "too risky" in result.message


def test_cancel_denies_and_interrupts() -> None:
    result = _approvals.to_permission(Decision(action="cancel"))
    assert isinstance(result, PermissionResultDeny) and result.interrupt
    assert result.message.endswith(": cancel")


def test_spec_tools_are_tool_requests_named_plainly() -> None:
    request = _approvals.to_request("mcp__agent_fleet__add", {"a": 1}, cwd="/w")
    assert (request.kind, request.tool) == ("tool", "add")
    assert _approvals.describe(request, "mcp__agent_fleet__add") == {"kind": "tool", "tool": "add"}
    assert _approvals.tool_name("mcp__agent_fleet__add") == "add"
    # another MCP server's tools stay what they were
    other = _approvals.to_request("mcp__docs__search", {}, cwd="/w")
    assert (other.kind, other.tool) == ("unknown", None)
    assert _approvals.tool_name("mcp__docs__search") == "mcp:docs/search"
