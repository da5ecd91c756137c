"""Claude Code tool calls <-> the policy engine, and Claude tool names <-> agent-fleet tool names.

Claude Code asks ``can_use_tool(tool_name, input, context)``; ``decide`` builds the engine's
``ApprovalRequest`` and decides it, and never raises (a malformed input is a ``malformed-request``
decline, a failure of the policy a ``policy-error`` one):

- ``Bash`` -> ``command`` (``input["command"]``, shell text parsed by the engine); with
  ``dangerouslyDisableSandbox: true`` in a session whose commands run in Claude Code's sandbox, the
  command asks to run outside it: the request is ``escalated``, accepted only on proof (a command the
  policy proves harmless, ``PermissionConfig.escalation_patterns``, or an ``approval_handler``), never
  by the default;
- ``Edit``, ``Write``, ``MultiEdit``, ``NotebookEdit`` -> ``file_change`` with the file path;
- ``Read``, ``NotebookRead``, ``Grep``, ``Glob``, ``LS`` -> ``read`` of the file or the directory
  searched (``path``; the working directory when absent; the fixed prefix of an absolute, ``~`` or
  ``..`` glob pattern): credential files and anything outside the workspace are declined;
- every path as the CLI reads it (trimmed; ``~`` and ``~/`` are the home directory; ``tool_paths``),
  and ``~user`` / ``$HOME`` also as a shell would read them;
- ``WebFetch`` -> ``network`` to the URL's host; ``WebSearch`` -> ``network`` to any host (searches go
  wherever the search engine goes): both by ``PermissionConfig.allowed_hosts``;
- ``mcp__agent_fleet__<name>`` (a ``Spec.tools`` function) -> ``tool`` with ``tool=<name>``;
- any other ``mcp__server__tool`` -> ``tool`` named ``mcp:server/tool``, by ``PermissionConfig.mcp_tools``;
- ``Task`` / ``Agent`` (subagents; each tool call a subagent makes comes back through
  ``can_use_tool`` and is judged like any other), to-do and plan tools, the output and stop tools of
  Claude's own background shells -> ``tool`` named ``builtin:<Name>``: the default decides;
- anything else -> ``unknown``: declined. (``AskUserQuestion`` never gets here: the handle answers it.)

The policy's answer goes back as the SDK's permission result (``to_permission``): either allow is an
allow (Claude Code keeps no session grant of ours), ``decline`` a deny the model reads, ``cancel`` a deny
that also interrupts the turn.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

from agent_fleet.claude.translate import TOOLS_SERVER
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision

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
READ_TOOLS: Final = {"Read": "file_path", "NotebookRead": "notebook_path"}
SEARCH_TOOLS: Final = frozenset({"Grep", "Glob", "LS"})
#: Tools that act only on the session itself (its to-do list, plan, background shells, subagents):
#: judged as ``tool`` requests, so the default decides.
SESSION_TOOLS: Final = frozenset(
    {
        "Task",
        "Agent",
        "ListAgents",
        "TodoWrite",
        "TaskCreate",
        "TaskGet",
        "TaskList",
        "TaskUpdate",
        "TaskOutput",
        "TaskStop",
        "BashOutput",
        "KillShell",
        "KillBash",
        "ExitPlanMode",
        "EnterPlanMode",
        "ToolSearch",
    }
)
#: Subagent tools: their input must carry the subagent's prompt.
SUBAGENT_TOOLS: Final = frozenset({"Task", "Agent"})

#: Tools that are part of agent-fleet's own plumbing, not actions: accepted without the policy.
#: ``StructuredOutput`` is how the CLI returns the ``Spec.output_schema`` answer.
INTERNAL_TOOLS: Final = frozenset({"StructuredOutput"})

#: The ``Bash`` input that asks to run the command outside Claude Code's sandbox.
UNSANDBOXED: Final = "dangerouslyDisableSandbox"

_GLOB_CHAR = re.compile(r"[*?\[{]")


class MalformedInput(ValueError):
    """A tool input that is not what the tool defines."""


def _text(tool_input: Mapping[str, Any], key: str, tool: str) -> str:
    value = tool_input.get(key)
    if not isinstance(value, str) or not value:
        raise MalformedInput(f"{tool}: {key!r} must be a non-empty string")
    return value


def _optional_text(tool_input: Mapping[str, Any], key: str, tool: str) -> str | None:
    return None if tool_input.get(key) is None else _text(tool_input, key, tool)


def _glob_root(pattern: str) -> str | None:
    """The fixed directory an absolute (or ``..``-climbing) glob pattern starts from."""
    head = _GLOB_CHAR.split(pattern, maxsplit=1)[0]
    if not (head.startswith(("/", "~")) or ".." in pattern):
        return None
    root = head if head.endswith("/") or head == pattern else os.path.dirname(head)
    return root or "/"


_HOME_VARS = re.compile(r"\$(?:HOME\b|\{HOME\})")


def tool_paths(raw: str, home: str) -> tuple[str, ...]:
    """The paths a Claude Code file tool may touch for the path ``raw`` it was given.

    The CLI trims the path, then expands ``~`` and ``~/...`` to the home directory and nothing else
    (``~user`` and ``$HOME`` stay names, relative to the working directory). Each form is judged: the
    CLI's reading, and for ``~user`` / ``$HOME`` also the shell's, so a CLI that expanded more could
    still not step outside what was judged."""
    text = raw.strip()
    if text == "~" or text.startswith("~/"):
        return (home + text[1:],)
    forms = [text or "."]
    if text.startswith("~"):
        forms.append(os.path.expanduser(text))
    if _HOME_VARS.search(text):
        forms.append(_HOME_VARS.sub(lambda _: home, text))
    return tuple(dict.fromkeys(forms))


def to_request(
    tool_name: str,
    tool_input: Any,
    *,
    cwd: str | None,
    writable_roots: Sequence[str] = (),
    home: str | None = None,
    sandboxed: bool = False,
) -> ApprovalRequest:
    """The engine's request for one tool call; ``home`` is the CLI's home directory (default: ours);
    ``sandboxed``: the session's commands run in Claude Code's sandbox, so one asking to leave it is an
    escalation. Raises ``MalformedInput`` for an input the tool does not define (``decide`` turns that
    into a decline)."""
    if not isinstance(tool_input, Mapping):
        raise MalformedInput(f"{tool_name}: the input is {type(tool_input).__name__}, not an object")
    roots = tuple(writable_roots)
    home = home or os.path.expanduser("~")
    own = own_tool(tool_name)
    if own is not None:
        return ApprovalRequest(kind="tool", tool=own, cwd=cwd, writable_roots=roots)
    if tool_name == "Bash":
        command = _text(tool_input, "command", tool_name)
        unsandboxed = tool_input.get(UNSANDBOXED, False)
        if not isinstance(unsandboxed, bool):
            raise MalformedInput(f"Bash: {UNSANDBOXED!r} must be true or false")
        return ApprovalRequest(
            kind="command",
            command=command,
            cwd=cwd,
            writable_roots=roots,
            escalated=sandboxed and unsandboxed,
        )
    key = FILE_TOOLS.get(tool_name)
    if key is not None:
        path = tool_input.get(key) if isinstance(tool_input.get(key), str) else tool_input.get("file_path")
        path = _text({"path": path}, "path", tool_name)
        return ApprovalRequest(
            kind="file_change", paths=tool_paths(path, home), cwd=cwd, writable_roots=roots
        )
    key = READ_TOOLS.get(tool_name)
    if key is not None:
        path = _text(tool_input, key, tool_name)
        return ApprovalRequest(kind="read", paths=tool_paths(path, home), cwd=cwd, writable_roots=roots)
    if tool_name in SEARCH_TOOLS:
        where = (
            _text(tool_input, "path", tool_name)
            if tool_name == "LS"
            else _optional_text(tool_input, "path", tool_name)
        )
        bases = tool_paths(where, home) if where else (cwd or ".",)
        paths = list(bases)
        if tool_name == "Glob":
            pattern = _text(tool_input, "pattern", tool_name)
            root = _glob_root(pattern.strip())
            if root is not None:
                # An absolute or ~ root stands alone; a relative one (..) starts from each base.
                paths += [
                    p for form in tool_paths(root, home) for p in {os.path.join(b, form) for b in bases}
                ]
        elif tool_name == "Grep":
            _text(tool_input, "pattern", tool_name)
        return ApprovalRequest(kind="read", paths=tuple(dict.fromkeys(paths)), cwd=cwd, writable_roots=roots)
    if tool_name == "WebFetch":
        url = _text(tool_input, "url", tool_name)
        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port
        except ValueError as exc:
            raise MalformedInput(f"WebFetch: bad url {url!r}: {exc}") from exc
        if parts.scheme not in ("http", "https") or not host:
            raise MalformedInput(f"WebFetch: {url!r} is not an http(s) URL with a host")
        return ApprovalRequest(
            kind="network", host=host, port=port, protocol=parts.scheme, cwd=cwd, writable_roots=roots
        )
    if tool_name == "WebSearch":
        _text(tool_input, "query", tool_name)
        return ApprovalRequest(kind="network", host=None, protocol="https", cwd=cwd, writable_roots=roots)
    if tool_name.startswith("mcp__"):
        name = _mcp_name(tool_name)
        if name is None:
            raise MalformedInput(f"{tool_name!r} is not an mcp__server__tool name")
        return ApprovalRequest(kind="tool", tool=name, cwd=cwd, writable_roots=roots)
    if tool_name in SESSION_TOOLS:
        if tool_name in SUBAGENT_TOOLS:
            _text(tool_input, "prompt", tool_name)
        return ApprovalRequest(kind="tool", tool=f"builtin:{tool_name}", cwd=cwd, writable_roots=roots)
    return ApprovalRequest(kind="unknown", tool=tool_name, cwd=cwd, writable_roots=roots)


async def decide(
    policy: ApprovalPolicy,
    tool_name: str,
    tool_input: Any,
    *,
    cwd: str | None,
    writable_roots: Sequence[str] = (),
    home: str | None = None,
    sandboxed: bool = False,
) -> tuple[ApprovalRequest, Decision]:
    """The request and the policy's decision for one tool call. Never raises: fails closed."""
    try:
        request = to_request(
            tool_name, tool_input, cwd=cwd, writable_roots=writable_roots, home=home, sandboxed=sandboxed
        )
    except MalformedInput as exc:
        request = ApprovalRequest(kind="unknown", tool=tool_name, cwd=cwd)
        return request, Decision(action="decline", rule="malformed-request", reason=str(exc))
    except Exception as exc:  # ApprovalRequest's own validation, or a bug here
        request = ApprovalRequest(kind="unknown", tool=tool_name, cwd=cwd)
        return request, Decision(action="decline", rule="policy-error", reason=f"{type(exc).__name__}: {exc}")
    try:
        decision = await policy.evaluate_async(request)  # a large command is judged off the loop
    except Exception as exc:  # the engine fails closed by design; this guards a bug in it
        decision = Decision(action="decline", reason=f"approval policy failed: {exc}", rule="policy-error")
    if request.kind == "unknown" and decision.rule == "unknown-request":
        decision = Decision(
            action="decline",
            rule="unknown-request",
            reason=f"agent-fleet does not judge the tool {tool_name}",
        )
    return request, decision


def to_permission(decision: Decision) -> PermissionResultAllow | PermissionResultDeny:
    """The SDK's answer to ``can_use_tool`` for the policy's ``decision``."""
    if decision.accepted:
        return PermissionResultAllow()
    rule = f" ({decision.rule})" if decision.rule else ""
    message = f"Declined by the agent-fleet approval policy{rule}: {decision.reason or decision.action}"
    return PermissionResultDeny(message=message, interrupt=decision.action == "cancel")


def describe(request: ApprovalRequest, tool_name: str) -> dict[str, Any]:
    """What a decision was about, for audit events: the command, paths or host (and the Claude tool)."""
    about: dict[str, Any] = {"kind": request.kind}
    if request.tool is not None:
        about["tool"] = request.tool
        return about
    if request.command is not None:
        about["command"] = request.command if isinstance(request.command, str) else list(request.command)
    elif request.paths:
        about["paths"] = list(request.paths)
    if request.kind == "network":
        about["host"] = request.host
    if request.escalated:
        about["escalated"] = True  # it would run outside the sandbox
    if tool_name != "Bash":
        about["tool"] = tool_name
    return about


def tool_name(name: str) -> str:
    """Claude tool name -> agent-fleet name: ``Bash`` -> ``shell``, ``mcp__srv__tool`` -> ``mcp:srv/tool``,
    a ``Spec.tools`` function -> its own name."""
    if name == "Bash":
        return "shell"
    return own_tool(name) or _mcp_name(name) or name


def _mcp_name(name: str) -> str | None:
    if not name.startswith("mcp__"):
        return None
    server, _, tool = name.removeprefix("mcp__").partition("__")
    return f"mcp:{server}/{tool}" if server and tool else None


def tool_input(name: str, value: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ToolUse.input`` for a Claude tool call (``shell`` carries only ``{"command": ...}``, and
    ``"escalated": True`` when it asks to run outside the sandbox)."""
    if name == "Bash":
        shown = {"command": value.get("command")}
        if value.get(UNSANDBOXED) is True:
            shown["escalated"] = True
        return shown
    return dict(value)
