"""Events described for people: one line (or a few) per event worth showing, ``None`` for the rest."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent_fleet.events import (
    AssistantMessage,
    Compaction,
    Error,
    McpServerStatus,
    Reasoning,
    System,
    ToolResult,
    ToolUse,
)
from agent_fleet.runner import TaskEvent

__all__ = ["BATCH_NOTICES", "BRIEF", "MESSAGES", "VERBOSE", "command_text", "describe", "first_line"]


def command_text(command: Any) -> str:
    """``/bin/bash -lc 'git status'`` -> ``git status``."""
    text = command if isinstance(command, str) else shlex.join(str(c) for c in command or [])
    with contextlib.suppress(ValueError):
        words = shlex.split(text)
        if (
            len(words) == 3
            and words[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh")
            and words[1] in ("-c", "-lc")
        ):
            return words[2]
    return text


def first_line(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


#: Notices about the whole batch's state (said once, above the live view).
BATCH_NOTICES = frozenset({"runner.batch_paused", "runner.batch_resumed"})

#: ``describe``'s levels of detail: first lines only (a fleet's lines); the agent's messages and
#: reasoning in full (``run``); also every command's exit code and its output's last lines (``-v``).
BRIEF, MESSAGES, VERBOSE = 0, 1, 2
_OUTPUT_LINES = 3


def describe(task_event: TaskEvent, detail: int = BRIEF) -> str | None:
    """One line for a person (more with ``detail``: see ``BRIEF``), or None for events not worth a line
    (deltas, usage, raw notifications). A sub-agent's event (``agent`` set) is marked
    ``[sub-agent <end of its id>]``."""
    line = _detailed(task_event) if detail else None
    if line is None or (detail < VERBOSE and isinstance(task_event.event, ToolResult)):
        line = _describe(task_event)
    agent = getattr(task_event.event, "agent", None)
    return f"[sub-agent {agent[-8:]}] {line}" if line is not None and agent else line


def _detailed(task_event: TaskEvent) -> str | None:
    """The lines ``MESSAGES`` and ``VERBOSE`` show in full; None: as ``BRIEF``."""
    match task_event.event:
        case AssistantMessage(text=text) if task_event.source == "agent" and text.strip():
            return f"agent: {text.strip()}"
        case Reasoning(text=text) if task_event.source == "agent" and text.strip():
            return f"thinking: {text.strip()}"
        case System(subtype="session", data=data) if isinstance(data.get("model"), str):
            return f"model: {data['model']}"
        case ToolResult(synthetic=False, exit_code=code, output=output) if code is not None:
            tail = [line for line in output.rstrip().splitlines() if line.strip()][-_OUTPUT_LINES:]
            prefix = "[review] " if task_event.source == "review" else ""
            return "\n".join([f"{prefix}  (exit {code})", *(f"  | {line}" for line in tail)])
    return None


def _describe(task_event: TaskEvent) -> str | None:
    event = task_event.event
    prefix = "[review] " if task_event.source == "review" else ""
    match event:
        case System(subtype="subagent_turn", data=data):
            what = data.get("text") or data.get("message") or ""
            return f"finished ({data.get('status')}): {first_line(str(what))}"
        case ToolUse(name="shell", synthetic=False, input=data):
            return f"{prefix}$ {command_text(data.get('command'))}"
        case ToolUse(name="apply_patch", synthetic=False, input=data):
            changes = data.get("changes") or []
            paths = ", ".join(f"{c.get('kind')} {Path(str(c.get('path'))).name}" for c in changes)
            return f"{prefix}edit: {paths}"
        case ToolUse(synthetic=False, name=name):
            return f"{prefix}tool: {name}"
        case ToolResult(synthetic=False, exit_code=code) if code not in (None, 0):
            return f"{prefix}  (exit {code})"
        case System(subtype="approval_denied", data=data):
            what = data.get("command")
            shown = (
                command_text(what)
                if what
                else ", ".join(map(str, data.get("paths") or [])) or data.get("kind")
            )
            return f"{prefix}declined: {shown} ({data.get('rule') or 'policy'}: {data.get('reason')})"
        case System(subtype="approval_pending", data=data):  # parked on a daemon (serve) for a person
            what = data.get("command")
            shown = (
                command_text(what)
                if what
                else ", ".join(map(str, data.get("paths") or [])) or data.get("kind")
            )
            where = data.get("dashboard") or data.get("decide")
            return f"{prefix}waiting for approval {data.get('approval_id')}: {shown} (decide at {where})"
        case System(subtype="approval_decided", data=data):
            return f"{prefix}approval {data.get('approval_id')}: {data.get('decision')}"
        case AssistantMessage(text=text) if task_event.source == "agent":
            return f"agent: {first_line(text)}"
        case Reasoning(text=text) if task_event.source == "agent":
            return f"thinking: {first_line(text)}"
        case Error(code=code, message=message):
            return f"{prefix}turn ended: {code}: {first_line(message)}"
        case System(subtype="runner.gate", data=data):
            return (
                f"gate: {data.get('summary')}"
                if data.get("passed")
                else f"gate FAILED: {data.get('summary')}"
            )
        case System(subtype="runner.retry", data=data):
            return (
                f"retry {data.get('attempt')}/{data.get('max_attempts')} in {data.get('delay')}s "
                f"after {data.get('code')}: {first_line(str(data.get('message')))}"
            )
        case System(subtype="stream_retry", data=data) if task_event.source == "agent":
            return _stream_retry(data)
        case System(subtype="runner.followup", data=data):
            return (
                f"follow-up {data.get('number')}/{data.get('limit')}: {first_line(str(data.get('prompt')))}"
            )
        case System(subtype="codex_refused", data=data) if data.get("kind") == "unsandboxed_run":
            return f"{prefix}refused to re-run outside the sandbox: {command_text(data.get('command'))}"
        case System(subtype="codex_refused", data=data):
            return f"{prefix}codex refused ({data.get('kind')}): {first_line(str(data.get('message')))}"
        case System(subtype="no_os_sandbox", data=data):
            return f"{prefix}no OS sandbox ({data.get('reason')}): the approval policy is the only guard"
        case System(subtype="runner.started", data=data) if (
            data.get("approvals_enforced") is False
            or data.get("sandbox") == "danger-full-access"
            or ("os_sandbox" in data and data["os_sandbox"] is None)
        ):
            lines = []
            if data.get("approvals_enforced") is False:
                lines.append(
                    f"approvals: NOT enforced by the {data.get('provider')} provider "
                    "(it never asks; only its sandbox guards this run)"
                )
            if data.get("sandbox") == "danger-full-access":
                lines.append(
                    "sandbox: OFF (danger-full-access): nothing confines the agent's commands; "
                    "the approval policy is the only guard"
                )
            elif "os_sandbox" in data and data["os_sandbox"] is None:
                lines.append(
                    f"sandbox: no OS sandbox for the {data.get('provider')} provider here: nothing "
                    "confines the agent's commands; the approval policy is the only guard"
                )
            return "\n".join(lines)
        case System(subtype="runner.review_started", data=data):
            target = data.get("target") or {}
            what = target.get("sha") or target.get("base") or target.get("type")
            return f"review #{data.get('number')}: {target.get('type')} {str(what)[:12]}"
        case System(subtype="runner.review", data=data):
            findings = data.get("findings") or []
            lines = [f"review: {len(findings)} finding(s), {data.get('blocking')} blocking"]
            lines += [f"  - {f.get('title')}" for f in findings]
            return "\n".join(lines)
        case System(subtype="runner.review_skipped", data=data):
            return f"review skipped: {data.get('reason')}"
        case System(subtype="runner.batch_paused", data=data):
            return (
                f"batch paused: the model is unreachable ({first_line(str(data.get('cause')))}); "
                f"waiting up to {data.get('limit')}s for it"
            )
        case System(subtype="runner.batch_resumed"):
            return "batch resumed: the model answers again"
        case System(subtype="runner.rate_limited", data=data):
            return f"rate limit near ({data.get('used')}% used): waiting {data.get('wait')}s before the turn"
        case McpServerStatus(status="failed", name=name, error=error):
            return f"{prefix}MCP server {name} failed to start: {first_line(str(error))}"
        case Compaction() if task_event.source == "agent":
            return "context compacted"
        case System(subtype="runner.push", data=data):  # --backend ray --push
            if data.get("pushed"):
                return f"pushed {data.get('branch')} ({str(data.get('commit') or '')[:12]})"
            return f"push of {data.get('branch')} refused: {first_line(str(data.get('error')))}"
        case System(subtype="runner.attempt_failed", data=data):  # --backend ray: a node or actor died
            return f"{first_line(str(data.get('reason')))}" + (" (retrying)" if data.get("retry") else "")
        case System(subtype="runner.node_excluded", data=data):  # --backend ray: a batch-level notice
            running = data.get("running") or []
            moved = f"; its running tasks go elsewhere: {', '.join(map(str, running))}" if running else ""
            return f"{data.get('where')} excluded: {first_line(str(data.get('reason')))}{moved}"
    return None


def _stream_retry(data: Mapping[str, Any]) -> str:
    """The cause, the attempt and when codex gives up: one line per retry, each saying how far it got."""
    cause = first_line(str(data.get("cause") or data.get("message") or "no cause given"), 100)
    line = f"model stream dropped ({cause}): codex retries it"
    attempt, limit = data.get("attempt"), data.get("max_attempts")
    if isinstance(attempt, int) and isinstance(limit, int):
        line += f", attempt {attempt}/{limit} (it gives up after {limit})"
    return line
