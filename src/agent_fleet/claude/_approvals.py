"""Claude Code tool calls <-> the policy engine, and Claude tool names <-> agent-fleet tool names.

Claude Code asks ``can_use_tool(tool_name, input, context)``; the engine wants an ``ApprovalRequest``:

- ``Bash`` -> ``kind="command"`` with ``input["command"]`` (shell text, parsed by the engine);
- ``Edit``, ``Write``, ``MultiEdit``, ``NotebookEdit`` -> ``kind="file_change"`` with the file path;
- ``mcp__agent_fleet__<name>`` (a ``Spec.tools`` function) -> ``kind="tool"`` with ``tool=<name>``;
- anything else (Read, Grep, WebFetch, MCP tools, ...) -> ``kind="unknown"``: the default decides.

The policy's answer goes back as the SDK's permission result (``to_permission``): either allow is an
allow (Claude Code keeps no session grant of ours), ``decline`` a deny the model reads, ``cancel`` a deny
that also interrupts the turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

from agent_fleet.claude.translate import TOOLS_SERVER
from agent_fleet.policy import ApprovalRequest, Decision

#: How Claude names a ``Spec.tools`` function: a tool of the session's own MCP server.
_OWN_PREFIX: Final = f"mcp__{TOOLS_SERVER}__"


def own_tool(claude_name: str) -> str | None:
    """The ``Spec.tools`` name behind a Claude tool name, or None for any other tool."""
    return claude_name.removeprefix(_OWN_PREFIX) if claude_name.startswith(_OWN_PREFIX) else None


FILE_TOOLS: Final = {
    "Edit": "file_path",
    "Write": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}

#: Tools that are part of agent-fleet's own plumbing, not actions: accepted without the policy.
#: ``StructuredOutput`` is how the CLI returns the ``Spec.output_schema`` answer.
INTERNAL_TOOLS: Final = frozenset({"StructuredOutput"})


def to_request(
    tool_name: str, tool_input: Mapping[str, Any], *, cwd: str | None, writable_roots: Sequence[str] = ()
) -> ApprovalRequest:
    """The engine's request for one tool call."""
    roots = tuple(writable_roots)
    own = own_tool(tool_name)
    if own is not None:
        return ApprovalRequest(kind="tool", tool=own, cwd=cwd, writable_roots=roots)
    if tool_name == "Bash":
        command = tool_input.get("command")
        return ApprovalRequest(
            kind="command",
            command=command if isinstance(command, str) else None,
            cwd=cwd,
            writable_roots=roots,
        )
    key = FILE_TOOLS.get(tool_name)
    if key is not None:
        path = tool_input.get(key)
        if not isinstance(path, str):
            path = tool_input.get("file_path")
        # Without a path the engine has nothing to contain and lets the default decide; the CLI
        # rejects such a call itself anyway.
        paths = (path,) if isinstance(path, str) and path else ()
        return ApprovalRequest(kind="file_change", paths=paths, cwd=cwd, writable_roots=roots)
    return ApprovalRequest(kind="unknown", cwd=cwd, writable_roots=roots)


def to_permission(decision: Decision) -> PermissionResultAllow | PermissionResultDeny:
    """The SDK's answer to ``can_use_tool`` for the policy's ``decision``."""
    if decision.accepted:
        return PermissionResultAllow()
    rule = f" ({decision.rule})" if decision.rule else ""
    message = f"Declined by the agent-fleet approval policy{rule}: {decision.reason or decision.action}"
    return PermissionResultDeny(message=message, interrupt=decision.action == "cancel")


def describe(request: ApprovalRequest, tool_name: str) -> dict[str, Any]:
    """What a decision was about, for audit events: the command or the paths (and the Claude tool)."""
    about: dict[str, Any] = {"kind": request.kind}
    if request.tool is not None:
        about["tool"] = request.tool
        return about
    if request.command is not None:
        about["command"] = request.command if isinstance(request.command, str) else list(request.command)
    elif request.paths:
        about["paths"] = list(request.paths)
    if tool_name != "Bash":
        about["tool"] = tool_name
    return about


def tool_name(name: str) -> str:
    """Claude tool name -> agent-fleet name: ``Bash`` -> ``shell``, ``mcp__srv__tool`` -> ``mcp:srv/tool``,
    a ``Spec.tools`` function -> its own name."""
    if name == "Bash":
        return "shell"
    own = own_tool(name)
    if own is not None:
        return own
    if name.startswith("mcp__"):
        server, _, tool = name.removeprefix("mcp__").partition("__")
        if server and tool:
            return f"mcp:{server}/{tool}"
    return name


def tool_input(name: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ToolUse.input`` for a Claude tool call (``shell`` carries only ``{"command": ...}``)."""
    if name == "Bash":
        return {"command": value.get("command")}
    return dict(value)
