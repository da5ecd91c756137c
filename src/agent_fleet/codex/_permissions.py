"""``item/permissions/requestApproval``: grant each part of the request the policy allows, nothing else.

A request (``RequestPermissionProfile``) may ask for network access (``network.enabled``) and for file
system access: legacy ``fileSystem.read`` / ``fileSystem.write`` path lists, or ``fileSystem.entries``
(``{"access": "read" | "write" | "deny", "path": {"type": "path", "path": ...}}``; glob patterns and
special paths such as the whole disk cannot be judged and are never granted). Each part is judged on
its own by the engine: a write root as a ``permissions`` request (contained in the workspace, then the
default), a read root as a ``read`` request (no credential files, contained), network as a
``permissions`` request for the sandbox's whole network (``*://*`` in ``allowed_hosts``). The granted
profile has the same shape as the request, holding only what passed.

A command approval may carry the same profile as ``additionalPermissions``; its reply cannot narrow the
grant (an accept runs the command with everything asked), so ``additional_verdict`` refuses the whole
command unless every part passes.

A profile may name any number of paths (10,000 is no effort for a hostile model), and each is a request
of its own: ``grant_permissions`` and ``additional_verdict`` never judge them on the event loop. A small
profile is judged at once; a larger one (over the engine's ``INLINE_CHARS``) is built and judged in the
policy's child process (``agent_fleet.policy.engine.judge_apart``) while the loop runs on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias

from agent_fleet._provider.refine import REFINABLE_DECLINES
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision, RequestKind
from agent_fleet.policy.engine import judge_apart

__all__ = ["additional_verdict", "grant_permissions", "requested_roots"]

_Path: TypeAlias = str | os.PathLike[str]


class _Part(NamedTuple):
    """One grantable part of a request: where it goes in the granted profile (``write``, ``read``,
    ``entries``, ``network``), what is granted there, how to name it, the engine's verdict."""

    section: str
    value: Any
    what: str
    verdict: Decision


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


def _judge_parts(
    policy: ApprovalPolicy, asked: Mapping[str, Any], cwd: _Path | None, roots: Sequence[_Path]
) -> list[_Part]:
    """Every grantable part of ``asked`` with the engine's verdict on it alone (``_verdicts``)."""
    file_system = asked.get("fileSystem") or {}
    if not isinstance(file_system, dict):
        raise ValueError("permissions fileSystem must be an object")
    listed: list[tuple[str, Any, str, str, str | None]] = []  # section, value, what, access, path
    for access in ("write", "read"):
        for path in _strings(file_system.get(access), f"fileSystem.{access}"):
            listed.append((access, path, f"{access} {path}", access, path))
    for entry in _entries(file_system):
        entry_access = entry.get("access")
        if entry_access not in ("read", "write"):
            continue  # "deny" narrows access; there is nothing to grant
        what = f"{entry_access} {entry.get('path')!r}"
        listed.append(("entries", dict(entry), what, str(entry_access), _entry_path(entry)))
    verdicts: dict[int, Decision] = {}
    for access in ("write", "read"):
        at = [i for i, item in enumerate(listed) if item[3] == access and item[4] is not None]
        paths = [listed[i][4] or "" for i in at]
        verdicts.update(zip(at, _verdicts(policy, access, paths, cwd, roots), strict=True))
    unjudgeable = Decision(
        action="decline", rule="no-paths", reason="a glob or special path cannot be judged"
    )
    parts = [
        _Part(section, value, what, verdicts.get(i, unjudgeable))
        for i, (section, value, what, _, _) in enumerate(listed)
    ]
    if _network_asked(asked):
        network = ApprovalRequest(kind="permissions", network=True, cwd=cwd, writable_roots=roots)
        parts.append(_Part("network", True, "network", policy.evaluate(network)))
    return parts


#: Declines that come after every check of every path: the same for each path of a run.
_BY_DEFAULT = frozenset({"default-ask", "default-deny"})


def _verdicts(
    policy: ApprovalPolicy, access: str, paths: Sequence[str], cwd: _Path | None, roots: Sequence[_Path]
) -> list[Decision]:
    """The engine's verdict on each path alone, found by halves: a run of paths judged as one request
    is accepted exactly when each of them alone is (a read or a write root is judged path by path:
    credentials, containment, vital paths, then the default), and then each gets that verdict, as it
    does when the run passed every check and the default declines it; a run declined for one of its
    paths is split until the declined paths stand alone. 10,000 paths with a few bad ones cost a few
    dozen requests, and the workspace's own facts are read once per request, not per path."""
    kind: RequestKind = "read" if access == "read" else "permissions"
    verdicts: list[Decision | None] = [None] * len(paths)
    runs = [(0, len(paths))] if paths else []
    while runs:
        low, high = runs.pop()
        run = paths[low:high]
        verdict = policy.evaluate(ApprovalRequest(kind=kind, paths=run, cwd=cwd, writable_roots=roots))
        if verdict.accepted or verdict.rule in _BY_DEFAULT or high - low == 1:
            verdicts[low:high] = [verdict] * (high - low)
        else:
            middle = (low + high) // 2
            runs += [(middle, high), (low, middle)]
    return [verdict for verdict in verdicts if verdict is not None]


def _granted(part: _Part, refined: bool) -> bool:
    return part.verdict.accepted or (refined and part.verdict.rule in REFINABLE_DECLINES)


def _first_decline(declined: Sequence[_Part]) -> _Part:
    """The part whose decline speaks for the request: a refinable one (an ``approval_handler`` may still
    grant it) before a final one; a final one otherwise."""
    for part in declined:
        if part.verdict.rule in REFINABLE_DECLINES:
            return part
    return declined[0]


def _size(asked: Mapping[str, Any]) -> int:
    """How much a profile gives the judge to read (every path asked for). Raises ``ValueError`` for a
    malformed profile."""
    paths, _ = requested_roots(asked)
    return sum(len(path) + 1 for path in paths)


def _no_grant(decision: Decision) -> tuple[dict[str, Any], Decision]:
    return {}, decision


async def grant_permissions(
    policy: ApprovalPolicy, asked: Mapping[str, Any], whole: ApprovalRequest, *, refined: bool = False
) -> tuple[dict[str, Any], Decision]:
    """(the granted profile, the decision for the whole request): ``allow_once`` naming what was
    withheld when something was granted, else a part's decline (a refinable one first, so that an
    ``approval_handler`` sees it). ``refined``: an ``approval_handler`` accepted a refinable decline, so
    the parts declined only for want of someone to ask are granted too; containment and the host
    allow-list still hold. Judged off the event loop when large (see the module docstring); a failure
    grants nothing. Raises ``ValueError`` for a malformed profile."""
    size = _size(asked)
    return await judge_apart(policy, _grant_now, (dict(asked), whole, refined), size=size, failed=_no_grant)


def _grant_now(
    policy: ApprovalPolicy, asked: Mapping[str, Any], whole: ApprovalRequest, refined: bool
) -> tuple[dict[str, Any], Decision]:
    """``grant_permissions``, judged here and now (on the caller's thread, or in the child)."""
    parts = _judge_parts(policy, asked, whole.cwd, whole.writable_roots)
    granted: dict[str, Any] = {}
    fs_granted: dict[str, Any] = {}
    declined: list[_Part] = []
    for part in parts:
        if not _granted(part, refined):
            declined.append(part)
        elif part.section == "network":
            granted["network"] = {"enabled": True}
        else:
            fs_granted.setdefault(part.section, []).append(part.value)
    if fs_granted:
        granted["fileSystem"] = fs_granted
    if not granted:
        if declined:
            first = _first_decline(declined)
            verdict = first.verdict
            return {}, Decision(action="decline", rule=verdict.rule, reason=f"{first.what}: {verdict.reason}")
        return {}, Decision(
            action="decline", rule="no-paths", reason="the request asks for nothing grantable"
        )
    withheld = "; ".join(f"{part.what} ({part.verdict.rule})" for part in declined)
    reason = "granted for the turn" + (f"; withheld: {withheld}" if withheld else "")
    return granted, Decision(action="allow_once", reason=reason)


async def additional_verdict(
    policy: ApprovalPolicy, asked: Any, cwd: _Path | None, roots: Sequence[_Path]
) -> Decision | None:
    """A command approval's ``additionalPermissions``: ``None`` when the policy grants every part (or
    nothing is asked), else the decline of the whole command -- an accept grants everything asked, so
    it cannot be narrowed. A final decline wins over a refinable one. Judged off the event loop when
    large (see the module docstring); a failure declines. Raises ``ValueError`` for a malformed
    profile."""
    if asked is None:
        return None
    if not isinstance(asked, dict):
        raise ValueError("additionalPermissions must be an object")
    size = _size(asked)  # the shape of every part, before any is judged
    args = (asked, os.fspath(cwd) if cwd is not None else None, tuple(os.fspath(root) for root in roots))
    return await judge_apart(policy, _additional_now, args, size=size, failed=_as_is)


def _as_is(decision: Decision) -> Decision | None:
    return decision


def _additional_now(
    policy: ApprovalPolicy, asked: Mapping[str, Any], cwd: _Path | None, roots: Sequence[_Path]
) -> Decision | None:
    """``additional_verdict``, judged here and now (on the caller's thread, or in the child)."""
    declined = [part for part in _judge_parts(policy, asked, cwd, roots) if not part.verdict.accepted]
    if not declined:
        return None
    final = [part for part in declined if part.verdict.rule not in REFINABLE_DECLINES]
    first = (final or declined)[0]
    return Decision(
        action="decline",
        rule=first.verdict.rule,
        reason=f"the command asks for additional permissions: {first.what}: {first.verdict.reason}",
    )
