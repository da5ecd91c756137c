"""Codex approval requests <-> the policy engine: wire params in, wire decision out.

The policy answers in its own words (``allow_once``, ``allow_for_session``, ``decline``, ``cancel``);
each approval method has its own wire format for them:

- ``item/commandExecution/requestApproval``, ``item/fileChange/requestApproval``:
  ``{"decision": "accept" | "acceptForSession" | "decline" | "cancel"}``
- ``item/permissions/requestApproval``: ``{"permissions": <granted>, "scope": "turn" | "session"}``;
  a decline grants nothing
- legacy ``execCommandApproval`` / ``applyPatchApproval``:
  ``{"decision": "approved" | "approved_for_session" | {"denied": {...}} | "abort"}``
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent_fleet.policy import Action, ApprovalRequest, Decision

APPROVAL_METHODS: Final = frozenset(
    {
        "item/commandExecution/requestApproval",
        "item/fileChange/requestApproval",
        "item/permissions/requestApproval",
        "execCommandApproval",
        "applyPatchApproval",
    }
)


def is_approval(method: str) -> bool:
    """True for every approval-shaped server request, including kinds we do not know yet."""
    return method in APPROVAL_METHODS or method.endswith("requestApproval") or method.endswith("Approval")


def _command(value: Any) -> str | tuple[str, ...] | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def to_request(
    method: str,
    params: Mapping[str, Any],
    *,
    cwd: str | None,
    writable_roots: Sequence[str] = (),
    file_changes: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> ApprovalRequest:
    """Build the engine's request. ``file_changes`` maps item ids to the changes seen at item/started
    (v2 file-change approvals carry only the item id)."""
    req_cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else cwd
    roots = tuple(writable_roots)
    match method:
        case "item/commandExecution/requestApproval" | "execCommandApproval":
            return ApprovalRequest(
                kind="command", command=_command(params.get("command")), cwd=req_cwd, writable_roots=roots
            )
        case "item/fileChange/requestApproval":
            changes = (file_changes or {}).get(str(params.get("itemId")), ())
            paths = tuple(str(c["path"]) for c in changes if c.get("path"))
            grant = params.get("grantRoot")
            if isinstance(grant, str):
                paths += (grant,)
            return ApprovalRequest(kind="file_change", paths=paths, cwd=req_cwd, writable_roots=roots)
        case "applyPatchApproval":
            file_map = params.get("fileChanges")
            paths = tuple(file_map) if isinstance(file_map, dict) else ()
            for change in file_map.values() if isinstance(file_map, dict) else ():
                if isinstance(change, dict) and isinstance(change.get("move_path"), str):
                    paths += (change["move_path"],)
            grant = params.get("grantRoot")
            if isinstance(grant, str):
                paths += (grant,)
            return ApprovalRequest(kind="file_change", paths=paths, cwd=req_cwd, writable_roots=roots)
        case "item/permissions/requestApproval":
            return ApprovalRequest(kind="permissions", cwd=req_cwd, writable_roots=roots)
        case _:
            return ApprovalRequest(kind="unknown", cwd=req_cwd, writable_roots=roots)


_V2: Final[dict[Action, str]] = {
    "allow_once": "accept",
    "allow_for_session": "acceptForSession",
    "decline": "decline",
    "cancel": "cancel",
}
_LEGACY: Final[dict[Action, str]] = {
    "allow_once": "approved",
    "allow_for_session": "approved_for_session",
    "cancel": "abort",
}


def to_wire(method: str, params: Mapping[str, Any], decision: Decision) -> dict[str, Any]:
    """The response body codex expects for ``method`` given the engine's ``decision``."""
    action = decision.action
    match method:
        case "execCommandApproval" | "applyPatchApproval":
            if action == "decline":
                reason = decision.reason or "declined by agent-fleet policy"
                return {"decision": {"denied": {"rejection": reason}}}
            return {"decision": _LEGACY[action]}
        case "item/permissions/requestApproval":
            if not decision.accepted:
                return {"permissions": {}, "scope": "turn"}
            requested = params.get("permissions")
            granted = dict(requested) if isinstance(requested, dict) else {}
            return {"permissions": granted, "scope": "session" if action == "allow_for_session" else "turn"}
        case _:
            return {"decision": _V2[action]}


def describe(request: ApprovalRequest) -> dict[str, Any]:
    """What a decision was about, for audit events: the command, the paths or the tool."""
    if request.tool is not None:
        return {"kind": request.kind, "tool": request.tool}
    if request.command is not None:
        command = request.command if isinstance(request.command, str) else list(request.command)
        return {"kind": request.kind, "command": command}
    if request.paths:
        return {"kind": request.kind, "paths": list(request.paths)}
    return {"kind": request.kind}
