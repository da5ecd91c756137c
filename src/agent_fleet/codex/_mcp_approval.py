"""MCP tool approvals codex asks as an elicitation (``mcpServer/elicitation/request``).

codex 0.163 asks before an MCP tool call runs with a form elicitation whose ``_meta`` says what it is:
``{"codex_approval_kind": "mcp_tool_call", "persist": ["session", "always"], "tool_params": {...},
"tool_description", ...}``, the server in ``serverName`` and the tool only in the message text. The
call it is about was announced just before (``item/started``, an ``mcpToolCall`` item with ``server``,
``tool``, ``arguments``): the tool is taken from there, by server and arguments. Such an elicitation is
an approval, judged by the policy (``PermissionConfig.mcp_tools``), never a question for the
``input_handler``; an elicitation with another ``codex_approval_kind`` is an approval we do not know
(declined). Ordinary elicitations (no ``codex_approval_kind``) stay questions.

Replies: an accept is ``{"action": "accept", "content": {}}``, with ``_meta: {"persist": "session"}``
for ``allow_for_session`` when codex offers that (never ``always``: it would be written to the user's
config and bind other sessions); a refusal ``{"action": "decline" | "cancel", "content": null}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agent_fleet.policy import ApprovalRequest, Decision

__all__ = ["ELICITATION", "approval_kind", "tool_requests", "wire"]

ELICITATION: Final = "mcpServer/elicitation/request"
_KIND_KEY: Final = "codex_approval_kind"
TOOL_CALL: Final = "mcp_tool_call"


def approval_kind(method: str, params: Any) -> str | None:
    """The ``codex_approval_kind`` of an elicitation that is an approval, else ``None``."""
    if method != ELICITATION or not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    kind = meta.get(_KIND_KEY) if isinstance(meta, dict) else None
    if kind is None:
        return None
    return kind if isinstance(kind, str) else repr(kind)


def tool_requests(
    params: Mapping[str, Any], calls: Mapping[str, tuple[str, str, Any]], cwd: str, roots: tuple[str, ...]
) -> list[ApprovalRequest] | Decision:
    """The ``tool`` requests for the call(s) an MCP tool approval may be about, or a decline when no
    call of that server is in progress. Several candidates (parallel calls to one server) are all
    judged: an accept must hold for each."""
    server = params.get("serverName")
    if not isinstance(server, str) or not server:
        return Decision(
            action="decline", rule="malformed-request", reason="an MCP tool approval with no server"
        )
    meta = params.get("_meta")
    arguments = meta.get("tool_params") if isinstance(meta, dict) else None
    of_server = [(tool, args) for srv, tool, args in calls.values() if srv == server]
    exact = [tool for tool, args in of_server if args == arguments]
    tools = sorted(set(exact or [tool for tool, _ in of_server]))
    if not tools:
        reason = f"an MCP tool approval for server {server!r}, which has no tool call in progress"
        return Decision(action="decline", rule="malformed-request", reason=reason)
    return [
        ApprovalRequest(kind="tool", tool=f"mcp:{server}/{tool}", cwd=cwd, writable_roots=roots)
        for tool in tools
    ]


def wire(params: Any, decision: Decision) -> dict[str, Any]:
    """The elicitation response for ``decision``."""
    if not decision.accepted:
        return {"action": decision.action, "content": None}
    meta = params.get("_meta") if isinstance(params, dict) else None
    persist = meta.get("persist") if isinstance(meta, dict) else None
    offered = persist if isinstance(persist, list) else [persist]
    if decision.action == "allow_for_session" and "session" in offered:
        return {"action": "accept", "content": {}, "_meta": {"persist": "session"}}
    return {"action": "accept", "content": {}}
