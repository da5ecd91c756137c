"""``TaskCounters``: the one place a task's counters are derived from its events.

``run_task`` feeds every event it emits and builds ``TaskResult`` (``commands``, ``declined``,
``followups``, ``retries``, ``usage``, ``files_changed``) from it; a live view feeds the same events
(local or from Ray nodes) to show the same numbers while the task runs, and takes the final ones from
the ``TaskResult`` itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from agent_fleet.events import System, TokenUsage, ToolResult, ToolUse
from agent_fleet.runner._record import FILES_LIMIT, written_paths
from agent_fleet.runner._types import TaskEvent

__all__ = ["TaskCounters", "add_usage"]


def add_usage(a: TokenUsage | None, b: TokenUsage | None) -> TokenUsage | None:
    if a is None or b is None:
        return a or b
    return TokenUsage(
        input_tokens=a.input_tokens + b.input_tokens,
        cached_input_tokens=a.cached_input_tokens + b.cached_input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        reasoning_output_tokens=a.reasoning_output_tokens + b.reasoning_output_tokens,
        total_tokens=a.total_tokens + b.total_tokens,
        cache_write_input_tokens=a.cache_write_input_tokens + b.cache_write_input_tokens,
    )


@dataclass(slots=True)
class TaskCounters:
    """Counters of one task. ``TokenUsage`` events are session totals: the agent's latest counts; each
    review's latest is added to ``review_usage`` when its ``runner.review`` notice arrives."""

    commands: int = 0
    declined: int = 0
    followups: int = 0
    retries: int = 0
    agent_usage: TokenUsage | None = None
    review_usage: TokenUsage | None = None
    #: the files the agent's session changed with its file-change tools (codex's ``apply_patch``, Claude
    #: Code's ``Edit``/``Write``...) that completed, in order
    files: dict[str, None] = field(default_factory=dict)
    _review_running: TokenUsage | None = None
    _writing: dict[str, list[str]] = field(default_factory=dict)

    def feed(self, task_event: TaskEvent) -> None:
        event = task_event.event
        match task_event.source, event:
            case "agent", ToolUse(name="shell", synthetic=False):
                self.commands += 1
            case "agent", System(subtype="approval_denied"):
                self.declined += 1
            case "agent", TokenUsage():
                self.agent_usage = event
            case "review", TokenUsage():
                self._review_running = event
            case "runner", System(subtype="runner.review"):
                self.review_usage = add_usage(self.review_usage, self._review_running)
                self._review_running = None
            case "runner", System(subtype="runner.followup", data=data):
                self.followups = int(data.get("number") or 0)
            case "runner", System(subtype="runner.retry"):
                self.retries += 1
            case "agent", ToolUse(synthetic=False, name=name, input=data, id=tool_id):
                paths = written_paths(name, data)
                if paths:
                    self._writing[tool_id] = paths
            case "agent", ToolResult(id=result_id, is_error=failed, status=status):
                written = self._writing.pop(result_id, None)
                if written and not failed and status not in ("declined", "failed"):
                    self._add(written)

    def _add(self, paths: Iterable[str]) -> None:
        for path in paths:
            if len(self.files) < FILES_LIMIT:
                self.files.setdefault(path, None)

    @property
    def usage(self) -> TokenUsage | None:
        """The agent's and the finished reviews' usage."""
        return add_usage(self.agent_usage, self.review_usage)

    @property
    def tokens(self) -> int:
        """Tokens so far, including a review still running."""
        usage = add_usage(self.usage, self._review_running)
        return usage.total_tokens if usage is not None else 0
