"""``TaskRecorder``: what one task did, gathered from its event stream as it runs.

The recorder sees the same ``TaskEvent`` stream as the transcript (agent, review and runner events, in
order) and keeps what a summary and a report need without re-reading the transcript: the commands with
their exit codes and output tails, declined approvals with the rule that declined them, the model the
session really used, turns / tool calls / approvals / gate runs as intervals on a wall clock, the
follow-up prompts, each turn's last diff snapshot, the files the session reported changing, and the
agent's words (its messages and reasoning summaries: the latest ``MESSAGES_KEPT``, each at most
``MESSAGE_LIMIT`` characters) for the report's conversation.
``record()`` returns it as a JSON-ready dict; the summary (``_summary.build_summary``) joins it with the
task's ``TaskResult``.

Files changed (``files_changed``) come from what the session itself did: its file-change items (codex's
``apply_patch``, Claude Code's ``Edit``/``Write``/``MultiEdit``/``NotebookEdit``) that completed, and the
files its diff snapshots name; the batch adds git's view of the task's own tree (``add_files``), never
that of a tree other tasks share (``shared_tree``). Paths inside ``root`` (the task's working tree) are
relative to it.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from agent_fleet.events import AssistantMessage, Diff, Error, Reasoning, Result, System, ToolResult, ToolUse
from agent_fleet.runner._types import TaskEvent

__all__ = ["FILES_LIMIT", "OUTPUT_TAIL", "TaskRecorder", "command_text", "tail", "written_paths"]

#: Characters of a command's output (and of a gate's output) kept in a record.
OUTPUT_TAIL: Final = 4000
#: Characters of the final diff kept in a record.
DIFF_LIMIT: Final = 200_000
#: Files changed kept in a record.
FILES_LIMIT: Final = 1000
#: The agent's messages and reasoning summaries kept in a record (the latest), and the characters of each.
MESSAGES_KEPT: Final = 60
MESSAGE_LIMIT: Final = 4000
#: Tools whose ``ToolUse.input`` names the one file they write (Claude Code's), and the key naming it.
_FILE_TOOLS: Final = {
    "Edit": "file_path",
    "Write": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
_DIFF_FILE = re.compile(r"^diff --git a/(.+?) b/(.+)$", re.MULTILINE)


def _clip(text: str) -> str:
    """A message's first ``MESSAGE_LIMIT`` characters (marked when cut)."""
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def tail(text: str, limit: int = OUTPUT_TAIL) -> str:
    """The last ``limit`` characters of ``text`` (marked when cut)."""
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def command_text(command: Any) -> str:
    """``/bin/bash -lc 'git status'`` -> ``git status`` (an argv list is joined first)."""
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


@dataclass(slots=True)
class _Span:
    kind: str  # turn | tool | approval | gate | review
    name: str
    start: float
    end: float | None = None
    status: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "start": self.start,
            "end": self.end,
            "status": self.status,
        }


@dataclass(slots=True)
class TaskRecorder:
    """Call ``observe`` with every event of one task, then ``record()``. Times are epoch seconds."""

    task_id: str
    prompt: str | None = None
    provider: str | None = None
    model: str | None = None
    scripted: bool = False  # served by agent_fleet.testing's scripted model
    started_at: float | None = None
    finished_at: float | None = None
    session_id: str | None = None
    commands: list[dict[str, Any]] = field(default_factory=list)
    declines: list[dict[str, Any]] = field(default_factory=list)
    approvals: int = 0
    followups: list[dict[str, Any]] = field(default_factory=list)
    gates: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    diff: str | None = None
    timeline: list[_Span] = field(default_factory=list)
    #: the agent's words: its messages and reasoning summaries (the report's conversation)
    messages: collections.deque[dict[str, Any]] = field(
        default_factory=lambda: collections.deque(maxlen=MESSAGES_KEPT)
    )
    #: the task's working tree (paths inside it are recorded relative to it)
    root: str | None = None
    #: the task shares its working tree with other tasks (its files are then only its session's)
    shared_tree: bool = False
    files: dict[str, None] = field(default_factory=dict)
    _turn_diffs: dict[str | None, str] = field(default_factory=dict, init=False, repr=False)
    _pending_files: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False)
    _open_tools: dict[str, tuple[_Span, dict[str, Any] | None]] = field(
        default_factory=dict, init=False, repr=False
    )
    _turn: _Span | None = field(default=None, init=False, repr=False)
    _gate: _Span | None = field(default=None, init=False, repr=False)

    def observe(self, task_event: TaskEvent) -> None:
        event, at = task_event.event, task_event.time
        if task_event.source == "runner":
            self._runner(event, at)
            return
        if task_event.source == "review":
            return  # the review's own session: summarised by the runner's review notices
        match event:
            case ToolUse(synthetic=False):
                span = _Span(kind="tool", name=event.name, start=at)
                paths = written_paths(event.name, event.input)
                if paths:
                    self._pending_files[event.id] = paths
                command = None
                if event.name == "shell":
                    command = {
                        "command": command_text(event.input.get("command")),
                        "cwd": event.input.get("cwd"),
                        "started_at": at,
                        "finished_at": None,
                        "exit_code": None,
                        "status": None,
                        "output_tail": "",
                    }
                    if event.agent is not None:  # a sub-agent's command
                        command["agent"] = event.agent
                    self.commands.append(command)
                self.timeline.append(span)
                self._open_tools[event.id] = (span, command)
            case ToolUse(synthetic=True, name="approval"):
                self.approvals += 1
                span = _Span(kind="approval", name=_about(event.input), start=at)
                self.timeline.append(span)
                self._open_tools[event.id] = (span, None)
            case ToolResult():
                written = self._pending_files.pop(event.id, None)
                if written and not event.is_error and event.status not in ("declined", "failed"):
                    self.add_files(written)
                opened = self._open_tools.pop(event.id, None)
                if opened is None:
                    return
                span, command = opened
                span.end, span.status = at, event.status
                if command is not None:
                    command.update(
                        finished_at=at,
                        exit_code=event.exit_code,
                        status=event.status,
                        output_tail=tail(event.output),
                    )
            case System(subtype="approval_denied", data=data):
                about = {k: v for k, v in data.items() if k not in ("reason", "rule")}
                self.declines.append(
                    {
                        "rule": data.get("rule"),
                        "reason": data.get("reason"),
                        "command": command_text(about.get("command")) if "command" in about else None,
                        "about": about,
                        "at": at,
                    }
                )
            case AssistantMessage(text=text) | Reasoning(text=text) if text.strip():
                kind = "message" if type(event) is AssistantMessage else "reasoning"
                entry = {"kind": kind, "text": _clip(text.strip()), "at": at}
                if getattr(event, "agent", None) is not None:  # a sub-agent's
                    entry["agent"] = event.agent
                self.messages.append(entry)
            case System(subtype="session", data=data) | System(subtype="init", data=data):
                model = data.get("model")
                if isinstance(model, str) and model:
                    self.model = model
            case System(subtype="model_rerouted", data=data):
                model = data.get("toModel") or data.get("to_model")
                if isinstance(model, str) and model:
                    self.model = model
            case Result():
                self.session_id = self.session_id or event.session_id
                self._turn_close(at, "completed")
            case Error():
                self.errors.append({"code": event.code, "message": event.message, "at": at})
                self._turn_close(at, event.code)
            case Diff(turn_id=turn_id):  # each turn's last snapshot is what that turn changed
                self._turn_diffs[turn_id] = event.diff
                self._turn_diffs[turn_id] = self._turn_diffs.pop(turn_id)  # (latest turn last)
                self.add_files(m.group(2) for m in _DIFF_FILE.finditer(event.diff))
                diff = "\n".join(self._turn_diffs.values())
                self.diff = diff if len(diff) <= DIFF_LIMIT else diff[:DIFF_LIMIT] + "\n… (cut)\n"

    def _runner(self, event: Any, at: float) -> None:
        if not isinstance(event, System):
            return
        data = event.data
        match event.subtype:
            case "runner.started":  # again for a retry: the task started with its first attempt
                self.started_at = at if self.started_at is None else self.started_at
                self.prompt = data.get("prompt")
                self.provider = data.get("provider")
                self.model = self.model or data.get("model")
                self.scripted = bool(data.get("scripted"))
                self._turn_open(at)
            case "runner.followup":
                self.followups.append({"number": data.get("number"), "prompt": data.get("prompt"), "at": at})
                self._turn_open(at)
            case "runner.gate_started":
                self._gate = _Span(kind="gate", name=str(data.get("command") or "commit check"), start=at)
                self.timeline.append(self._gate)
            case "runner.gate":
                passed = bool(data.get("passed"))
                if self._gate is not None:
                    self._gate.end, self._gate.status = at, "passed" if passed else "failed"
                    self._gate = None
                self.gates.append({"passed": passed, "summary": data.get("summary"), "at": at})
            case "runner.review_started":
                self.timeline.append(_Span(kind="review", name=f"review {data.get('number')}", start=at))
            case "runner.review":
                for span in reversed(self.timeline):
                    if span.kind == "review" and span.end is None:
                        span.end, span.status = at, f"{len(data.get('findings') or [])} finding(s)"
                        break
            case "runner.shared_tree":
                self.shared_tree = True
            case "runner.worktree":  # Ray: the attempt's worktree on its node
                path = data.get("path")
                if isinstance(path, str):
                    self.root = path
            case "runner.finished":
                self.finished_at = at
                self._turn_close(at, "stopped")
                for span in self.timeline:
                    if span.end is None:
                        span.end, span.status = at, span.status or "unfinished"

    def add_files(self, paths: Iterable[str]) -> None:
        """Record files the task changed (absolute, or relative to ``root``)."""
        for path in paths:
            if len(self.files) >= FILES_LIMIT:
                return
            self.files.setdefault(self._relative(path), None)

    def _relative(self, path: str) -> str:
        root = self.root
        if root is None or not os.path.isabs(path):
            return path
        rel = os.path.relpath(path, root)
        return path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel

    def _turn_open(self, at: float) -> None:
        if self._turn is None:
            self._turn = _Span(
                kind="turn", name=f"turn {1 + sum(s.kind == 'turn' for s in self.timeline)}", start=at
            )
            self.timeline.append(self._turn)

    def _turn_close(self, at: float, status: str) -> None:
        if self._turn is not None:
            self._turn.end, self._turn.status = at, status
            self._turn = None

    def record(self) -> dict[str, Any]:
        """What was recorded, JSON-ready (times: epoch seconds)."""
        return {
            "prompt": self.prompt,
            "provider": self.provider,
            "model": self.model,
            "scripted": self.scripted,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "session_id": self.session_id,
            "commands": [dict(c) for c in self.commands],
            "declines": [dict(d) for d in self.declines],
            "approvals": self.approvals,
            "followups": [dict(f) for f in self.followups],
            "gates": [dict(g) for g in self.gates],
            "errors": [dict(e) for e in self.errors],
            "diff": self.diff,
            "files_changed": list(self.files),
            "shared_tree": self.shared_tree,
            "timeline": [s.to_dict() for s in self.timeline],
            "messages": [dict(m) for m in self.messages],
        }


def written_paths(name: str, data: dict[str, Any]) -> list[str]:
    """The files a file-change tool use writes: codex's ``apply_patch`` changes (a rename's both ends),
    a Claude Code edit tool's one file."""
    out: list[str] = []
    if name == "apply_patch":
        for change in data.get("changes") or ():
            if isinstance(change, dict):
                ends = (change.get("path"), change.get("move_path"))
                out.extend(p for p in ends if isinstance(p, str) and p)
    elif name in _FILE_TOOLS:
        path = data.get(_FILE_TOOLS[name])
        if isinstance(path, str) and path:
            out.append(path)
    return out


def _about(data: dict[str, Any]) -> str:
    if "command" in data:
        return command_text(data.get("command"))
    kind = data.get("kind") or data.get("type")
    return str(kind) if kind else "approval"
