"""Codex approval requests <-> the policy engine: wire params in, wire decision out. Fails closed.

``judge`` turns one server request into the engine's ``ApprovalRequest`` and decides it; it never
raises (a bridge or policy failure is a decline with rule ``policy-error``). ``settle`` fits a decision
to what codex offered, ``to_wire`` writes the reply. What is judged, method by method:

- ``item/commandExecution/requestApproval`` (and legacy ``execCommandApproval``): the ``command``,
  marked ``escalated`` (accepted only on proof, never by the default) when accepting it lets it run
  outside the sandbox of a sandboxed session: codex 0.163 says so only by a ``reason`` (the agent's
  justification for ``sandbox_permissions: "require_escalated"``, or its own "retry without sandbox";
  ``additionalPermissions`` widen the sandbox and are judged as a permission request, below); a
  command that does not run through the box's tripwire (another
  shell than bash) may be re-run unsandboxed, so it counts as one too, as does input for a process
  that runs outside the sandbox. An accepted escalation gets a one-use grant from the box (``_box``);
  with a ``networkApprovalContext`` (the sandbox blocked a connection; ``command`` may be null) the
  host, port and protocol against ``allowed_hosts``; with ``kind: "writeStdin"`` the input by what
  reads it (``_stdin``: a shell's input as a command, an interpreter's as inline code; the process is
  known from its ``item/started``, unknown -> declined); with ``additionalPermissions`` each part as a
  permission request, all of which must pass (an accept cannot narrow them). A ``cwd`` outside the session's
  workspace and writable roots is declined (``foreign-cwd``); one inside is where relative targets
  resolve, while containment stays the workspace.
- ``item/fileChange/requestApproval``: every path of the item announced at ``item/started``, move
  destinations and ``grantRoot`` included; an item never announced has no paths -> declined
  (``no-paths``). Legacy ``applyPatchApproval``: the ``fileChanges`` keys and their ``move_path``.
- ``item/permissions/requestApproval``: each write root is judged on its own (contained in the
  workspace), network access is the sandbox's whole network (``*://*`` in ``allowed_hosts``); the
  reply grants only what passed (``grant``), for the turn unless the decision is ``allow_for_session``.
- ``mcpServer/elicitation/request`` with ``_meta.codex_approval_kind: "mcp_tool_call"``: the MCP tool
  call it is about (``_mcp_approval``), by ``PermissionConfig.mcp_tools``; another approval kind is
  declined like an unknown method.
- any other approval-shaped method: declined (``unknown-request``), announced by a
  ``System(subtype="unknown_approval_kind")`` naming the method.
- shape drift: a file change, legacy patch or permission profile carrying a field or kind this version
  does not know (``_shapes``, e.g. ``movePath`` for ``move_path``) is declined (``unknown-field``),
  announced by a ``System(subtype="unknown_approval_field")`` naming the field.

Wire formats of the policy's words (``allow_once``, ``allow_for_session``, ``decline``, ``cancel``):

- v2 command / file change: ``{"decision": "accept" | "acceptForSession" | "decline" | "cancel"}``,
  only ever one that ``availableDecisions`` offers (``settle``; amendments are never chosen). codex
  0.163 offers no ``decline`` for commands, so a refusal is sent as ``cancel`` (the handle then goes on
  with a new turn telling the agent why);
- permissions: ``{"permissions": <granted>, "scope": "turn" | "session"}``; a decline grants nothing;
- legacy: ``{"decision": "approved" | "approved_for_session" | {"denied": {...}} | "abort"}``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from agent_fleet._provider.refine import REFINABLE_DECLINES
from agent_fleet.codex._box import Box
from agent_fleet.codex._mcp_approval import ELICITATION, approval_kind, tool_requests
from agent_fleet.codex._mcp_approval import TOOL_CALL as MCP_TOOL_CALL
from agent_fleet.codex._mcp_approval import wire as mcp_wire
from agent_fleet.codex._permissions import additional_verdict, grant_permissions, requested_roots
from agent_fleet.codex._shapes import legacy_change_drift, profile_drift
from agent_fleet.codex._stdin import stdin_requests, stdin_text
from agent_fleet.events import System
from agent_fleet.policy import Action, ApprovalPolicy, ApprovalRequest, Decision, check_paths

APPROVAL_METHODS: Final = frozenset(
    {
        "item/commandExecution/requestApproval",
        "item/fileChange/requestApproval",
        "item/permissions/requestApproval",
        "execCommandApproval",
        "applyPatchApproval",
    }
)
_COMMAND_METHODS: Final = frozenset({"item/commandExecution/requestApproval", "execCommandApproval"})
_NETWORK_PROTOCOLS: Final = frozenset({"http", "https", "socks5Tcp", "socks5Udp"})


def is_approval(method: str) -> bool:
    """True for every approval-shaped server request, including kinds we do not know (declined)."""
    return method in APPROVAL_METHODS or method.endswith("requestApproval") or method.endswith("Approval")


class _Malformed(ValueError):
    """The params are not what the method defines: declined with rule ``malformed-request``."""


class _Unknown(ValueError):
    """A field this version does not know where it decides safety (``_shapes``): declined with rule
    ``unknown-field`` and a ``System(unknown_approval_field)`` naming it."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """What the bridge knows of the session: its workspace (the containment root), its other writable
    roots (the box's temporary directory and declared roots), the current turn's items (file changes and
    commands by item id), the input each running process accepted so far (by item id), its ``box``
    (None: not sandboxed, nothing is an escalation) and the commands accepted to run outside it."""

    workspace: str
    writable_roots: tuple[str, ...] = ()
    box: Box | None = None
    escalated_items: Collection[str] = frozenset()
    file_changes: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    commands: Mapping[str, Any] = field(default_factory=dict)
    mcp_calls: Mapping[str, tuple[str, str, Any]] = field(default_factory=dict)
    stdin_history: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Judged:
    """The engine's request and decision; ``grant`` is the permissions a permission request may get
    (``None`` for other methods); ``notices`` go to the event stream before the decision; ``once``: an
    accept is for this request only (a command asking for more rights or to leave the sandbox, input
    to a process); ``stdin``: (item id, input) to add to that process's history once the input is
    accepted; ``escalation``: the command to grant one run outside the sandbox when it is accepted."""

    request: ApprovalRequest
    decision: Decision
    grant: dict[str, Any] | None = None
    notices: tuple[System, ...] = ()
    once: bool = False
    stdin: tuple[str, str] | None = None
    escalation: Any = None


def _decline(rule: str, reason: str) -> Decision:
    return Decision(action="decline", rule=rule, reason=reason)


def _command(value: Any) -> str | tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise _Malformed(f"command must be a string or a list of strings, not {type(value).__name__}")


def _base(params: Mapping[str, Any], session: Session) -> tuple[str, tuple[str, ...], Decision | None]:
    """(cwd, writable roots) for the engine, or a ``foreign-cwd`` decline. A request ``cwd`` inside the
    workspace is where relative paths resolve; the workspace stays a root, so containment is unchanged."""
    roots = session.writable_roots
    cwd = params.get("cwd")
    if cwd is None:
        return session.workspace, roots, None
    if not isinstance(cwd, str) or not cwd:
        raise _Malformed("cwd must be a non-empty string")
    if not os.path.isabs(cwd):
        cwd = os.path.join(session.workspace, cwd)
    if check_paths([cwd], session.workspace, roots) is not None:
        reason = f"the request's cwd {cwd!r} is outside the session's workspace {session.workspace!r}"
        return session.workspace, roots, _decline("foreign-cwd", reason)
    return cwd, (session.workspace, *roots), None


def _change_paths(changes: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    paths: list[str] = []
    for change in changes:
        if change.get("unknown_field"):
            raise _Unknown(str(change["unknown_field"]))
        for key in ("path", "move_path"):
            value = change.get(key)
            if value is not None and not isinstance(value, str):
                raise _Malformed(f"file change {key} must be a string")
            if value:
                paths.append(value)
    return tuple(paths)


def _grant_root(params: Mapping[str, Any]) -> tuple[str, ...]:
    grant = params.get("grantRoot")
    if grant is None:
        return ()
    if not isinstance(grant, str):
        raise _Malformed("grantRoot must be a string")
    return (grant,)


def _file_change(
    changes: tuple[str, ...],
    params: Mapping[str, Any],
    cwd: str,
    roots: tuple[str, ...],
    foreign: Decision | None,
) -> tuple[ApprovalRequest, Decision | None]:
    """A file change is judged on the files it changes; a ``grantRoot`` (writes under a root for the
    rest of the session) only adds a path that must be contained too. An item never announced, or one
    that changes nothing, has nothing to judge: declined, whatever root it asks for."""
    paths = changes + _grant_root(params)
    request = ApprovalRequest(kind="file_change", paths=paths, cwd=cwd, writable_roots=roots)
    if not changes:
        return request, foreign or _decline("no-paths", "a file change that names no changed file")
    return request, foreign


def _network(params: Mapping[str, Any], cwd: str, roots: tuple[str, ...]) -> ApprovalRequest:
    context = params["networkApprovalContext"]
    if not isinstance(context, dict):
        raise _Malformed("networkApprovalContext must be an object")
    host, protocol, port = context.get("host"), context.get("protocol"), context.get("port")
    if not isinstance(host, str) or not host.strip():
        raise _Malformed("networkApprovalContext.host must be a non-empty string")
    if protocol not in _NETWORK_PROTOCOLS:
        raise _Malformed(f"networkApprovalContext.protocol {protocol!r} is not one codex defines")
    if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536):
        raise _Malformed("networkApprovalContext.port must be a port number")
    return ApprovalRequest(
        kind="network", host=host, port=port, protocol=protocol, cwd=cwd, writable_roots=roots
    )


def _escalates(params: Mapping[str, Any], command: Any, session: Session) -> bool:
    """Accepting this command lets it run outside the sandbox of a sandboxed session (see the module
    docstring); where it cannot be told, it does."""
    box = session.box
    if box is None or not box.sandboxed:
        return False
    reason = params.get("reason")
    return (isinstance(reason, str) and bool(reason.strip())) or not box.covers(command)


def _request(
    method: str, params: Mapping[str, Any], session: Session
) -> tuple[ApprovalRequest, Decision | None]:
    """The engine's request, and a decline the bridge itself makes (``foreign-cwd``) if any."""
    cwd, roots, foreign = _base(params, session)
    match method:
        case "item/commandExecution/requestApproval" | "execCommandApproval":
            if params.get("networkApprovalContext") is not None:
                return _network(params, cwd, roots), foreign
            command = _command(params.get("command"))
            kind = params.get("kind", "command")
            if kind == "writeStdin":  # judged in _judge_stdin; this request names the process for audit
                target = session.commands.get(str(params.get("itemId")))
                if target is None:
                    request = ApprovalRequest(kind="command", command=command, cwd=cwd, writable_roots=roots)
                    return request, foreign or _decline(
                        "malformed-request", "input for a command this turn never started"
                    )
                command = _command(target)
            elif kind not in (None, "command"):
                raise _Malformed(f"unknown command approval kind {kind!r}")
            # input for a process is judged as what reads it (``_judge_stdin``), not as a new command
            escalated = kind != "writeStdin" and _escalates(params, command, session)
            request = ApprovalRequest(
                kind="command", command=command, cwd=cwd, writable_roots=roots, escalated=escalated
            )
            return request, foreign
        case "item/fileChange/requestApproval":
            changes = _change_paths(session.file_changes.get(str(params.get("itemId")), ()))
            return _file_change(changes, params, cwd, roots, foreign)
        case "applyPatchApproval":
            file_map = params.get("fileChanges")
            if file_map is not None and not isinstance(file_map, dict):
                raise _Malformed("fileChanges must be an object")
            for path, change in (file_map or {}).items():
                if (drift := legacy_change_drift(change, f"fileChanges[{path!r}]")) is not None:
                    raise _Unknown(drift)
            listed = [
                {"path": path, **(c if isinstance(c, dict) else {})} for path, c in (file_map or {}).items()
            ]
            return _file_change(_change_paths(listed), params, cwd, roots, foreign)
        case "item/permissions/requestApproval":
            asked = params.get("permissions")
            if not isinstance(asked, dict):
                raise _Malformed("permissions must be an object")
            if (drift := profile_drift(asked)) is not None:
                raise _Unknown(drift)
            try:
                write, network = requested_roots(asked)
            except ValueError as exc:
                raise _Malformed(str(exc)) from exc
            request = ApprovalRequest(
                kind="permissions", paths=write, network=network, cwd=cwd, writable_roots=roots
            )
            return request, foreign
        case _:
            return ApprovalRequest(kind="unknown", cwd=cwd, writable_roots=roots), None


def is_approval_request(method: str, params: Any) -> bool:
    """``is_approval``, or an elicitation that is an approval (``_mcp_approval``)."""
    return is_approval(method) or approval_kind(method, params) is not None


async def _judge_mcp(policy: ApprovalPolicy, kind: str, params: dict[str, Any], session: Session) -> Judged:
    """An MCP tool approval asked as an elicitation: the policy on the tool(s) it is about."""
    fallback = ApprovalRequest(kind="unknown", cwd=session.workspace, writable_roots=session.writable_roots)
    if kind != MCP_TOOL_CALL:
        notice = System(subtype="unknown_approval_kind", data={"method": ELICITATION, "kind": kind})
        decision = _decline("unknown-request", f"agent-fleet does not know the approval kind {kind!r}")
        return Judged(request=fallback, decision=decision, notices=(notice,))
    try:
        found = tool_requests(params, session.mcp_calls, session.workspace, session.writable_roots)
        if isinstance(found, Decision):
            return Judged(request=fallback, decision=found)
        verdicts = [await policy.evaluate_async(request) for request in found]
    except Exception as exc:  # a bug in the policy or here: decline, never an RPC error, never an accept
        decision = _decline("policy-error", f"approval policy failed: {type(exc).__name__}: {exc}")
        return Judged(request=fallback, decision=decision)
    for request, verdict in zip(found, verdicts, strict=True):
        if not verdict.accepted:
            return Judged(request=request, decision=verdict)
    once = [v for v in verdicts if v.action == "allow_once"]  # every call must be allowed as widely
    return Judged(request=found[0], decision=once[0] if once else verdicts[0])


async def judge(policy: ApprovalPolicy, method: str, params: Any, session: Session) -> Judged:
    """Decide one approval request (a large command is judged off the event loop). Never raises."""
    kind = approval_kind(method, params)
    if kind is not None:
        return await _judge_mcp(policy, kind, params, session)
    notices: tuple[System, ...] = ()
    if method not in APPROVAL_METHODS:
        notices = (System(subtype="unknown_approval_kind", data={"method": method}),)
    fallback = ApprovalRequest(kind="unknown", cwd=session.workspace, writable_roots=session.writable_roots)
    if not isinstance(params, dict):
        decision = _decline("malformed-request", f"{method} params are not an object")
        return Judged(request=fallback, decision=decision, notices=notices)
    once = False
    stdin: tuple[str, str] | None = None
    try:
        request, bridge_decline = _request(method, params, session)
        grant = None
        if bridge_decline is not None:
            decision = bridge_decline
        elif params.get("kind") == "writeStdin" and method in _COMMAND_METHODS:
            once = True  # each input is judged on its own (after what came before)
            decision, stdin = await _judge_stdin(policy, params, session, request)
        elif request.kind == "permissions":  # judged part by part: the grant holds what passed
            grant, decision = grant_permissions(policy, params["permissions"], request)
        else:
            decision = await policy.evaluate_async(request)
        if method in _COMMAND_METHODS and params.get("additionalPermissions") is not None:
            once = True  # wider rights for this command only, never cached for the session
            request, decision = _with_additional(policy, params["additionalPermissions"], request, decision)
    except _Malformed as exc:
        return Judged(request=fallback, decision=_decline("malformed-request", str(exc)), notices=notices)
    except _Unknown as exc:
        reason = f"{method} carries {exc.field}, a field this version of agent-fleet does not know"
        notice = System(subtype="unknown_approval_field", data={"method": method, "field": exc.field})
        decision = _decline("unknown-field", reason)
        return Judged(request=fallback, decision=decision, notices=(*notices, notice))
    except Exception as exc:  # a bug in the policy or here: decline, never an RPC error, never an accept
        decision = _decline("policy-error", f"approval policy failed: {type(exc).__name__}: {exc}")
        return Judged(request=fallback, decision=decision, notices=notices)
    if request.kind == "unknown":
        decision = _decline("unknown-request", f"agent-fleet does not know the approval method {method}")
    escalation = None
    if request.escalated:
        once = True  # one run outside the sandbox, never cached for the session
        escalation = params.get("command")
    if once and decision.action == "allow_for_session":
        decision = replace(decision, action="allow_once")
    return Judged(
        request=request,
        decision=decision,
        grant=grant,
        notices=notices,
        once=once,
        stdin=stdin,
        escalation=escalation,
    )


async def _judge_stdin(
    policy: ApprovalPolicy, params: Mapping[str, Any], session: Session, process: ApprovalRequest
) -> tuple[Decision, tuple[str, str] | None]:
    """Input for a running process (see ``_stdin``): the decision, and (item id, input) to add to the
    process's history when the input is sent."""
    text = stdin_text(params.get("command"))
    if text is None:
        return _decline("malformed-request", "a stdin approval without the input it writes"), None
    if not text.strip(" \t\r\n\x03\x04"):  # a newline, Ctrl-C, Ctrl-D: nothing new runs
        return Decision(action="allow_once", reason="the input holds no command"), None
    item = str(params.get("itemId"))
    roots = tuple(map(str, process.writable_roots))
    found = stdin_requests(
        process.command, text, session.stdin_history.get(item, ""), session.workspace, roots
    )
    if isinstance(found, Decision):
        return found, None
    if item in session.escalated_items:  # the process runs outside the sandbox: so does its input
        found = [replace(request, escalated=True) for request in found]
    for request in found:
        verdict = await policy.evaluate_async(request)
        if not verdict.accepted:
            return verdict, None
    what = "judged after what the process was given before" if len(found) > 1 else "data for the command"
    return Decision(action="allow_once", reason=f"the input is {what}"), (item, text)


def _with_additional(
    policy: ApprovalPolicy, asked: Any, request: ApprovalRequest, decision: Decision
) -> tuple[ApprovalRequest, Decision]:
    """A command that also asks for ``additionalPermissions``: the command's own verdict, unless the
    permissions decline -- a final decline of theirs wins over a refinable one of the command's."""
    if (drift := profile_drift(asked, "additionalPermissions")) is not None:
        raise _Unknown(drift)
    try:
        extra = additional_verdict(policy, asked, request.cwd, request.writable_roots)
        paths, network = requested_roots(asked)
    except ValueError as exc:
        raise _Malformed(str(exc)) from exc
    audited = replace(request, paths=paths, network=network)  # what was asked, for the audit events
    if extra is None or (not decision.accepted and decision.rule not in REFINABLE_DECLINES):
        return audited, decision
    if decision.accepted or extra.rule not in REFINABLE_DECLINES:
        return audited, extra
    return audited, decision


def regrant(policy: ApprovalPolicy, params: Any, judged: Judged, refined: Decision) -> Judged:
    """``judged`` after an ``approval_handler`` answered ``refined``: an accept of a refinable decline
    of a permission request grants what the policy would grant on an accept (containment and the host
    allow-list still hold; an accept that grants nothing is a decline); an accept of a command that asks
    for more rights is for this command only."""
    if judged.once and refined.action == "allow_for_session":
        refined = replace(refined, action="allow_once")
    if judged.request.kind != "permissions" or not refined.accepted or judged.decision.accepted:
        return replace(judged, decision=refined)
    try:
        grant, verdict = grant_permissions(policy, params["permissions"], judged.request, refined=True)
    except Exception as exc:  # the same request was judged once already: fail closed all the same
        verdict = _decline("policy-error", f"approval policy failed: {type(exc).__name__}: {exc}")
        return replace(judged, decision=verdict, grant=None)
    if not grant:
        return replace(judged, decision=verdict, grant=None)
    return replace(judged, decision=refined, grant=grant)


# -- replies ------------------------------------------------------------------------------------------

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
#: For each verdict, the words that carry it out, narrowest first. An accept nobody offered falls back
#: to a refusal; amendments (persistent exec-policy or network rules) are never chosen.
_CARRIES: Final[dict[Action, tuple[Action, ...]]] = {
    "allow_once": ("allow_once",),
    "allow_for_session": ("allow_for_session", "allow_once"),
    "decline": ("decline", "cancel"),
    "cancel": ("cancel", "decline"),
}


def _offered(params: Mapping[str, Any]) -> set[str] | None:
    available = params.get("availableDecisions")
    if not isinstance(available, list):
        return None
    return {d for d in available if isinstance(d, str)}


def settle(method: str, params: Any, decision: Decision) -> Decision:
    """``decision`` narrowed to what codex offers in ``availableDecisions`` (v2 approvals that list
    them: commands, and any unknown method that does). An accept that cannot be expressed becomes a
    refusal (rule ``not-offered``); a refusal is ``decline`` where offered, else ``cancel``."""
    if "/" not in method or method == "item/permissions/requestApproval" or not isinstance(params, dict):
        return decision
    offered = _offered(params)
    if offered is None:
        return decision
    for action in _CARRIES[decision.action]:
        if _V2[action] in offered:  # the reason stays the policy's; the action says what was sent
            return decision if action == decision.action else replace(decision, action=action)
    refusal: Action = "decline" if "decline" in offered or "cancel" not in offered else "cancel"
    if decision.accepted:
        reason = f"{_V2[decision.action]} was accepted by the policy but codex offered only {sorted(offered)}"
        return Decision(action=refusal, rule="not-offered", reason=reason)
    return replace(decision, action=refusal)


def to_wire(
    method: str, params: Any, decision: Decision, grant: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The response body codex expects for ``method`` given the (settled) ``decision``."""
    action = decision.action
    match method:
        case "execCommandApproval" | "applyPatchApproval":
            if action == "decline":
                reason = decision.reason or "declined by agent-fleet policy"
                return {"decision": {"denied": {"rejection": reason}}}
            return {"decision": _LEGACY[action]}
        case _ if method == ELICITATION:
            return mcp_wire(params, decision)
        case "item/permissions/requestApproval":
            if not decision.accepted or not grant:
                return {"permissions": {}, "scope": "turn"}
            return {
                "permissions": dict(grant),
                "scope": "session" if action == "allow_for_session" else "turn",
            }
        case _ if "/" not in method and decision.action == "decline":  # an unknown legacy-style method
            return {"decision": {"denied": {"rejection": decision.reason or "declined"}}}
        case _:
            return {"decision": _V2[action]}


def describe(request: ApprovalRequest) -> dict[str, Any]:
    """What a decision was about, for audit events: the command, the paths, the host or the tool."""
    if request.tool is not None:
        return {"kind": request.kind, "tool": request.tool}
    about: dict[str, Any] = {"kind": request.kind}
    if request.command is not None:
        about["command"] = request.command if isinstance(request.command, str) else list(request.command)
    if request.escalated:
        about["escalated"] = True
    if request.paths:
        about["paths"] = list(request.paths)
    if request.kind == "network":
        about.update(host=request.host, port=request.port, protocol=request.protocol)
    if request.network:
        about["network"] = True
    return about


def summary(request: ApprovalRequest) -> str:
    """A short phrase naming what was asked, for the agent: ``the command `ls```, ``network access to x``."""
    if request.kind == "network":
        return f"network access to {request.host}"
    if request.command is not None:
        text = request.command if isinstance(request.command, str) else " ".join(request.command)
        return f"the command `{text[:200]}`"
    if request.paths:
        return f"the {request.kind.replace('_', ' ')} of {', '.join(map(str, list(request.paths)[:5]))}"
    return f"a {request.kind} request"
