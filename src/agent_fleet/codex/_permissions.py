"""``item/permissions/requestApproval``: grant each part of the request the policy allows, nothing else.

A request (``RequestPermissionProfile``) may ask for network access (``network.enabled``) and for file
system access: legacy ``fileSystem.read`` / ``fileSystem.write`` path lists, or ``fileSystem.entries``
(``{"access": "read" | "write" | "deny", "path": {"type": "path", "path": ...}}``; glob patterns and
special paths such as the whole disk cannot be judged and are never granted). Each part is judged on
its own by the engine: a write root as a ``permissions`` request (contained in the workspace, then the
default), a read root as a ``read`` request (no credential files, contained), network as a
``permissions`` request for any host (``*`` in ``allowed_hosts``). The granted profile has the same
shape as the request, holding only what passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision

__all__ = ["grant_permissions", "requested_roots"]


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"permissions {what} must be a list of strings")
    return list(value)


def _entries(file_system: Mapping[str, Any]) -> list[dict[str, Any]]:
    entries = file_system.get("entries")
    if entries is None:
        return []
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError("permissions fileSystem.entries must be a list of objects")
    return entries


def _entry_path(entry: Mapping[str, Any]) -> str | None:
    path = entry.get("path")
    if isinstance(path, dict) and path.get("type") == "path" and isinstance(path.get("path"), str):
        return str(path["path"])
    return None  # glob patterns, special paths ("root", "minimal", ...): not judged, not granted


def _network_asked(asked: Mapping[str, Any]) -> bool:
    network = asked.get("network")
    return isinstance(network, dict) and network.get("enabled") is True


def requested_roots(asked: Mapping[str, Any]) -> tuple[tuple[str, ...], bool]:
    """(every path asked for, for audit and the whole-request decision; network asked for)."""
    file_system = asked.get("fileSystem") or {}
    if not isinstance(file_system, dict):
        raise ValueError("permissions fileSystem must be an object")
    paths = _strings(file_system.get("write"), "fileSystem.write")
    paths += _strings(file_system.get("read"), "fileSystem.read")
    for entry in _entries(file_system):
        path = _entry_path(entry)
        paths.append(path if path is not None else f"<{entry.get('path')!r}>")
    return tuple(paths), _network_asked(asked)


def grant_permissions(
    policy: ApprovalPolicy, asked: Mapping[str, Any], whole: ApprovalRequest
) -> tuple[dict[str, Any], Decision]:
    """(the granted profile, the decision for the whole request): ``allow_once`` naming what was
    withheld when something was granted, else the first part's decline."""
    cwd, roots = whole.cwd, whole.writable_roots

    def judge(access: str, path: str | None) -> Decision:
        if path is None:
            return Decision(
                action="decline", rule="no-paths", reason="a glob or special path cannot be judged"
            )
        if access == "read":
            return policy.evaluate(ApprovalRequest(kind="read", paths=(path,), cwd=cwd, writable_roots=roots))
        return policy.evaluate(
            ApprovalRequest(kind="permissions", paths=(path,), cwd=cwd, writable_roots=roots)
        )

    granted: dict[str, Any] = {}
    declines: list[tuple[str, Decision]] = []
    file_system = asked.get("fileSystem") or {}
    fs_granted: dict[str, Any] = {}
    for access in ("write", "read"):
        kept = []
        for path in _strings(file_system.get(access), f"fileSystem.{access}"):
            verdict = judge(access, path)
            (kept.append(path) if verdict.accepted else declines.append((f"{access} {path}", verdict)))
        if kept:
            fs_granted[access] = kept
    kept_entries = []
    for entry in _entries(file_system):
        entry_access = entry.get("access")
        if entry_access not in ("read", "write"):
            continue  # "deny" narrows access; there is nothing to grant
        verdict = judge(str(entry_access), _entry_path(entry))
        if verdict.accepted:
            kept_entries.append(dict(entry))
        else:
            declines.append((f"{entry_access} {entry.get('path')!r}", verdict))
    if kept_entries:
        fs_granted["entries"] = kept_entries
    if fs_granted:
        granted["fileSystem"] = fs_granted
    if _network_asked(asked):
        verdict = policy.evaluate(
            ApprovalRequest(kind="permissions", network=True, cwd=cwd, writable_roots=roots)
        )
        if verdict.accepted:
            granted["network"] = {"enabled": True}
        else:
            declines.append(("network", verdict))
    if not granted:
        if declines:
            what, first = declines[0]
            return {}, Decision(action="decline", rule=first.rule, reason=f"{what}: {first.reason}")
        return {}, Decision(
            action="decline", rule="no-paths", reason="the request asks for nothing grantable"
        )
    withheld = "; ".join(f"{what} ({verdict.rule})" for what, verdict in declines)
    reason = "granted for the turn" + (f"; withheld: {withheld}" if withheld else "")
    return granted, Decision(action="allow_once", reason=reason)
