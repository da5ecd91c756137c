"""``TaskRecorder``: what one task did, gathered from its event stream as it runs.

The recorder sees the same ``TaskEvent`` stream as the transcript (agent, review and runner events, in
order) and keeps what a summary and a report need without re-reading the transcript: the commands with
their exit codes and output tails, declined approvals with the rule that declined them, the model the
session really used, turns / tool calls / approvals / gate runs as intervals on a wall clock, the
follow-up prompts and the turn's last diff snapshot. ``record()`` returns it as a JSON-ready dict; the
summary (``_summary.build_summary``) joins it with the task's ``TaskResult``.
"""

from __future__ import annotations

import contextlib
import shlex
from dataclasses import dataclass, field
from typing import Any, Final

from agent_fleet.events import Error, Result, System, ToolResult, ToolUse
from agent_fleet.runner._lean import diff_of
from agent_fleet.runner._types import TaskEvent

__all__ = ["OUTPUT_TAIL", "TaskRecorder", "command_text", "tail"]

#: Characters of a command's output (and of a gate's output) kept in a record.
OUTPUT_TAIL: Final = 4000
#: Characters of the final diff kept in a record.
DIFF_LIMIT: Final = 200_000


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
            case _:
                diff = diff_of(task_event)
                if diff is not None:
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
            case "runner.finished":
                self.finished_at = at
                self._turn_close(at, "stopped")
                for span in self.timeline:
                    if span.end is None:
                        span.end, span.status = at, span.status or "unfinished"

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
            "timeline": [s.to_dict() for s in self.timeline],
        }


def _about(data: dict[str, Any]) -> str:
    if "command" in data:
        return command_text(data.get("command"))
    kind = data.get("kind") or data.get("type")
    return str(kind) if kind else "approval"
