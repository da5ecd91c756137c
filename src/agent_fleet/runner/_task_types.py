"""The runner's task types: ``Task`` (what to do and when it is done), ``ReviewConfig`` and ``TaskResult``.

Re-exported by ``agent_fleet.runner.task``; kept apart so the run logic has its own room.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_fleet.contract import Spec
from agent_fleet.errors import UsageError
from agent_fleet.events import TokenUsage
from agent_fleet.runner._outage import DEFAULT_MODEL_TIMEOUT
from agent_fleet.runner.gate import GateConfig, GateResult
from agent_fleet.runner.review import ReviewResult
from agent_fleet.runner.transcript import Redactor

__all__ = ["ReviewConfig", "Task", "TaskResult", "TaskStatus"]

TaskStatus = Literal["succeeded", "failed", "timeout", "cancelled", "error"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewConfig:
    """A review (the provider's, see ``Provider.review``) after the gate passes. ``threshold``: 0 (P0)
    .. 3 (P3); findings at or above it (numerically <=) go back to the agent. ``model``: the reviewer's
    model (default: the task's)."""

    threshold: int = 1
    model: str | None = None
    timeout: float | None = 900.0

    def __post_init__(self) -> None:
        if self.threshold not in (0, 1, 2, 3):
            raise UsageError(f"review threshold must be 0..3 (P0..P3), not {self.threshold!r}")
        if self.timeout is not None and not (0 < self.timeout < math.inf):
            raise UsageError(
                f"the review timeout must be a finite number of seconds > 0, not {self.timeout!r}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One task: the session's ``spec`` plus what decides that it is done.

    ``timeout`` bounds the whole task (turns, gates, reviews); ``spec.timeout`` bounds each turn.
    ``max_followups`` bounds the follow-up turns (gate failures and review findings share it).
    ``retries`` bounds the retries of one turn that failed retryably; ``retry_delay`` is the first
    backoff in seconds (doubling, capped at ``retry_max_delay``). When the provider says how long to
    wait (a rate limit's reset), the wait is that long, up to ``retry_hint_max_delay`` seconds, and a
    retry whose wait would end past ``timeout`` is not started (see ``runner._retry``).
    ``model_timeout`` ends a turn with no model progress for that many seconds (a provider's
    reconnecting notices do not count; a running command does not either) with a retryable
    ``connection_failed`` error naming the cause (see ``runner._outage``); None or 0: off.
    """

    spec: Spec
    id: str = "task"
    gate: GateConfig = field(default_factory=GateConfig)
    review: ReviewConfig | None = None
    max_followups: int = 2
    timeout: float | None = None
    retries: int = 2
    retry_delay: float = 5.0
    retry_max_delay: float = 120.0
    retry_hint_max_delay: float = 900.0
    model_timeout: float | None = DEFAULT_MODEL_TIMEOUT

    def __post_init__(self) -> None:
        if self.max_followups < 0:
            raise UsageError(f"max_followups must be >= 0, not {self.max_followups!r}")
        if self.retries < 0:
            raise UsageError(f"retries must be >= 0, not {self.retries!r}")
        for name in ("retry_delay", "retry_max_delay", "retry_hint_max_delay"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise UsageError(f"{name} must be a finite number of seconds >= 0, not {value!r}")
        if self.model_timeout is not None and not (0 <= self.model_timeout < math.inf):
            raise UsageError(f"model_timeout must be >= 0 seconds (0: off), not {self.model_timeout!r}")
        if self.timeout is not None and not (0 < self.timeout < math.inf):  # nan fails `<= 0` too
            raise UsageError(f"the task timeout must be a finite number of seconds > 0, not {self.timeout!r}")
        if not self.id:
            raise UsageError("the task id is empty")


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskResult:
    """What happened. ``reason`` is one line saying why (and, on failure, what to do)."""

    task_id: str
    status: TaskStatus
    reason: str
    followups: int = 0
    retries: int = 0
    duration: float = 0.0
    usage: TokenUsage | None = None
    session_id: str | None = None
    cwd: str | None = None
    gate: GateResult | None = None
    review: ReviewResult | None = None
    reviews: int = 0
    final_text: str = ""
    start_head: str | None = None
    end_head: str | None = None
    commands: int = 0
    declined: int = 0
    error_code: str | None = None
    fatal: bool = False
    transcript: Path | None = None
    #: the files the agent changed with its file-edit tools (relative to ``cwd`` when inside it; what
    #: its shell commands wrote is not among them: ``git status`` in ``cwd`` has that)
    files_changed: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    @property
    def tokens(self) -> int:
        return self.usage.total_tokens if self.usage is not None else 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no event payloads), secrets redacted (reasons, commands, gate output)."""
        out = {
            "task_id": self.task_id,
            "status": self.status,
            "reason": self.reason,
            "followups": self.followups,
            "retries": self.retries,
            "duration": round(self.duration, 3),
            "tokens": self.tokens,
            "session_id": self.session_id,
            "cwd": self.cwd,
            "gate": self.gate.summary if self.gate is not None else None,
            "review": (
                {
                    "findings": [
                        {"title": f.title, "priority": f.priority, "location": f.location}
                        for f in self.review.findings
                    ],
                    "explanation": self.review.explanation,
                }
                if self.review is not None
                else None
            ),
            "reviews": self.reviews,
            "start_head": self.start_head,
            "end_head": self.end_head,
            "commands": self.commands,
            "declined": self.declined,
            "error_code": self.error_code,
            "fatal": self.fatal,
            "transcript": str(self.transcript) if self.transcript is not None else None,
            "files_changed": list(self.files_changed),
            "final_text": self.final_text,
        }
        redacted: dict[str, Any] = Redactor().value(out)
        return redacted
