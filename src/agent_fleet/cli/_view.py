"""What people see: one line per event, the live view (rich ``Live``), plain lines, JSON Lines."""

from __future__ import annotations

import collections
import contextlib
import json
import shlex
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from agent_fleet.cli._fleet_view import fleet_view
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
from agent_fleet.runner import BatchResult, Redactor, TaskCounters, TaskEvent, TaskResult, event_record
from agent_fleet.runner._delta_redact import DeltaCoalescer

__all__ = ["Progress", "command_text", "consoles", "describe", "first_line", "result_line", "summary_table"]


# -- describing events for people ------------------------------------------------------------------------


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


_BATCH_NOTICES = frozenset({"runner.batch_paused", "runner.batch_resumed"})


def describe(task_event: TaskEvent) -> str | None:
    """One line for a person, or None for events not worth a line (deltas, usage, raw notifications).
    A sub-agent's event (``agent`` set) is marked ``[sub-agent <end of its id>]``."""
    line = _describe(task_event)
    agent = getattr(task_event.event, "agent", None)
    return f"[sub-agent {agent[-8:]}] {line}" if line is not None and agent else line


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
        case System(subtype="stream_retry") if task_event.source == "agent":
            return "the model stream dropped; codex is retrying it"
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


# -- progress output -----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Row:
    task_id: str
    started: float = field(default_factory=time.monotonic)
    step: str = "starting"
    status: str = "running"
    commands: list[str] = field(default_factory=list)  # their text, for the live view
    declined: list[str] = field(default_factory=list)
    counters: TaskCounters = field(default_factory=TaskCounters)  # the runner's own, while it runs
    result: dict[str, Any] | None = None  # the TaskResult summary of ``runner.finished``
    ended: float | None = None

    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def _count(self, key: str, live: int) -> int:
        final = self.result.get(key) if self.result is not None else None
        return final if isinstance(final, int) else live

    @property
    def tokens(self) -> int:
        return self._count("tokens", self.counters.tokens)

    @property
    def followups(self) -> int:
        return self._count("followups", self.counters.followups)

    @property
    def command_count(self) -> int:
        return self._count("commands", self.counters.commands)


class Progress:
    """Shows a task's (or a batch's) events: rich ``Live`` on a terminal, plain lines otherwise, JSON Lines
    with ``--json`` (then people's output goes to stderr)."""

    def __init__(
        self, console: Console, *, json_output: bool, batch: bool, out: IO[str] | None = None
    ) -> None:
        self.console = console
        self.json_output = json_output
        self.batch = batch
        self.out = out or sys.stdout
        self.live_mode = console.is_terminal and not json_output
        self.rows: dict[str, _Row] = {}
        self.redactor = Redactor()
        self.deltas = DeltaCoalescer(self.redactor)
        self.live: Live | None = None
        self.started = time.monotonic()
        self.total = 0
        self.done: dict[str, int] = {}
        # A fleet's finished rows beyond the latest _KEEP_FINISHED (failed ones: _KEEP_FAILED) are folded
        # into counts: memory stays flat, and a render reads only the rows it shows (each deque is in end
        # order, so nothing is sorted); summary.json has every task.
        self._finished: collections.deque[str] = collections.deque()
        self._failed: collections.deque[str] = collections.deque()
        self._folded_tokens = 0
        self._folded_failed = 0  # this run's failures no longer kept as rows
        self._declined: collections.deque[str] = collections.deque(maxlen=8)
        self._want_live = False

    def expect(self, total: int, done: Mapping[str, int] | None = None) -> None:
        """A batch of ``total`` tasks, of which ``done`` (by status) finished in an earlier run."""
        self.total = total
        self.done = dict(done or {})

    def __enter__(self) -> Progress:
        # The live view starts with the first event: what is printed before (the batch's warnings) stays
        # above it, in the scrollback, instead of being drawn over.
        self._want_live = self.live_mode
        return self

    def __exit__(self, *exc: object) -> None:
        self._want_live = False
        if self.live is not None:
            self.live.stop()
            self.live = None

    def _start_live(self) -> None:
        self._want_live = False
        self.live = Live(
            console=self.console, refresh_per_second=4, get_renderable=self.render, transient=False
        )
        self.live.start()

    def row(self, task_id: str) -> _Row:
        if task_id not in self.rows:
            self.rows[task_id] = _Row(task_id)
        return self.rows[task_id]

    def on_event(self, task_event: TaskEvent) -> None:
        if self._want_live:
            self._start_live()
        if self.json_output:
            for streamed in self.deltas.events(task_event):  # deltas held back, redacted as a whole
                record = event_record(streamed, self.redactor)
                self.out.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            self.out.flush()
        if not task_event.task_id:  # a notice about the batch, not a task (a Ray node excluded)
            said = describe(task_event)
            if said is not None and not self.json_output:
                self.console.print(Text(self.redactor.text(said), style="yellow"), highlight=False)
            return
        row = self.row(task_event.task_id)
        event = task_event.event
        line = describe(task_event)
        if line is not None:
            line = self.redactor.text(line)
        row.counters.feed(task_event)
        match event:
            case ToolUse(name="shell", synthetic=False, input=data) if task_event.source == "agent":
                row.commands.append(self.redactor.text(command_text(data.get("command"))))
            case System(subtype="approval_denied"):
                if line:
                    row.declined.append(line.removeprefix("declined: "))
                    self._declined.append(f"[{row.task_id}] {row.declined[-1]}")
            case System(subtype="runner.gate_started"):
                row.step = "gate"
            case System(subtype="runner.review_started"):
                row.step = "review"
            case System(subtype="runner.finished", data=data):
                row.result = data
                row.status = str(data.get("status"))
                row.step = first_line(self.redactor.text(str(data.get("reason"))), 80)
                row.ended = time.monotonic()
                if self.batch:
                    row.commands.clear()  # a fleet's finished rows stay small
                    row.declined.clear()  # (the latest are kept for the view in _declined)
                    self._fold(row.task_id, failed=row.status in _FAILED)
        if line and not line.startswith("  (exit") and row.ended is None:
            row.step = first_line(line, 80)
        if (
            line
            and self.live_mode
            and isinstance(event, System)
            and event.subtype.startswith("runner.batch_")
        ):
            self.console.print(Text(line), highlight=False)  # the whole batch's state: said once, above
        if line and not self.live_mode:
            tag = f"[{task_event.task_id}] " if self.batch else ""
            for part in line.splitlines():
                self.console.print(Text(tag + part), highlight=False, soft_wrap=True)

    def _fold(self, task_id: str, *, failed: bool) -> None:
        kept, limit = (self._failed, _KEEP_FAILED) if failed else (self._finished, _KEEP_FINISHED)
        kept.append(task_id)
        while len(kept) > limit:
            old = self.rows.pop(kept.popleft(), None)
            if old is not None:
                self.done[old.status] = self.done.get(old.status, 0) + 1
                self._folded_tokens += old.tokens
                self._folded_failed += failed

    # -- what the fleet view reads (agent_fleet.cli._fleet_view) ------------------------------------------

    def running_rows(self) -> Iterator[_Row]:
        """Running tasks in start order (rows are made at a task's first event)."""
        return (r for r in self.rows.values() if r.status == "running")

    def failed_rows(self) -> Iterator[_Row]:
        """This run's failed tasks still kept as rows, newest first."""
        return (self.rows[i] for i in reversed(self._failed) if i in self.rows)

    def other_rows(self) -> Iterator[_Row]:
        """The other finished tasks still kept as rows, newest first."""
        return (self.rows[i] for i in reversed(self._finished) if i in self.rows)

    def recent_declined(self, n: int) -> list[str]:
        return list(self._declined)[-n:] if n > 0 else []

    def hidden_counts(self, running_shown: int, failed_shown: int) -> dict[str, int]:
        """Running and failed tasks (this run's, folded ones too) a view showing so many leaves out."""
        running = sum(1 for r in self.rows.values() if r.status == "running")
        failed = len(self._failed) + self._folded_failed
        return {"running": running - running_shown, "failed": failed - failed_shown}

    def counts(self) -> dict[str, int]:
        """Tasks by status: ``running``, ``queued``, and the final statuses (this run's and earlier)."""
        counts = dict(self.done)
        for row in self.rows.values():
            counts[row.status] = counts.get(row.status, 0) + 1
        seen = sum(counts.values())
        counts.setdefault("running", 0)
        counts["queued"] = max(0, self.total - seen) if self.total else 0
        return counts

    def header(self, width: int | None = None) -> Text:
        """The fleet's counts, tokens and elapsed time: one line, or (``width``) as many lines of at most
        ``width`` columns as it takes, never breaking a label from its number."""
        counts = self.counts()
        failed = sum(counts.get(s, 0) for s in _FAILED)
        tokens = self._folded_tokens + sum(r.tokens for r in self.rows.values())
        parts = [
            (f"{label} {n:,}", style)
            for label, n, style in (
                ("running", counts["running"], "cyan"),
                ("queued", counts["queued"], ""),
                ("succeeded", counts.get("succeeded", 0), "green"),
                ("failed", failed, "red" if failed else ""),
                ("cancelled", counts.get("cancelled", 0), "yellow"),
            )
            if n or label != "cancelled"
        ]
        parts += [(f"tokens {tokens:,}", ""), (f"elapsed {time.monotonic() - self.started:.0f}s", "")]
        text = Text(no_wrap=True, overflow="ellipsis")
        used = 0
        for part, style in parts:
            gap = 2 if used else 0
            if width is not None and used and used + gap + len(part) > width:
                text.append("\n")
                used, gap = 0, 0
            text.append(" " * gap)
            text.append(part, style=style)
            used += gap + len(part)
        return text

    def render(self) -> RenderableType:
        if self.batch:
            return fleet_view(self, self.console)
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        for row in self.rows.values():
            grid.add_row("step", row.step)
            recent = row.commands[-5:]
            grid.add_row("commands", f"{row.command_count}" + ("".join(f"\n$ {c}" for c in recent)))
            grid.add_row("declined", "\n".join(row.declined) if row.declined else "none")
            grid.add_row(
                "progress",
                f"follow-ups {row.followups}   elapsed {row.elapsed():.1f}s   tokens {row.tokens:,}",
            )
        return grid

    def summary(self, payload: dict[str, Any]) -> None:
        """The ``--json`` stream's last line (redacted here, as every event line is by ``on_event``)."""
        if self.json_output:
            line = {"type": "summary", **self.redactor.value(payload)}
            self.out.write(json.dumps(line, default=str) + "\n")
            self.out.flush()


_FAILED = ("failed", "error", "timeout")
_KEEP_FINISHED = 200
_KEEP_FAILED = 100

_HINTS = {
    "gate_failed": "fix the gate by hand, or allow more --max-followups",
    "review_failed": "address the findings, or allow more --max-followups / raise --review-threshold",
    "turn_failed": "see the transcript (--transcript FILE) for what the agent did",
    "timeout": "allow more time with --timeout (or --idle-timeout when the agent went silent)",
    "cancelled": "run it again when ready",
    "rate_limited": "the model API kept refusing for rate limits; allow more --retries / --retry-delay",
    "server_error": "the model API kept failing; allow more --retries / --retry-delay, or try later",
    "connection_failed": "the model API could not be reached; check the network, or allow more --retries",
    "context_window_exceeded": "the conversation no longer fits the model; split the task",
    "usage_limit_exceeded": "the account's quota or usage limit is spent; check the plan and billing",
    "model_not_found": "check --model (agent-fleet models lists what this account can use)",
    "bad_request": "the model API refused the request; check -c overrides and the model's options",
}


def result_line(result: TaskResult) -> tuple[str, str]:
    took = f"{result.duration:.1f}s, {result.followups} follow-up(s), {result.tokens:,} tokens"
    reason = Redactor().text(result.reason)
    if result.ok:
        return "green", f"succeeded ({took}): {reason}"
    hint = _HINTS.get(result.error_code or "", "")
    return "red", f"{result.status} ({took}): {reason}" + (f" — {hint}" if hint else "")


def consoles(json_output: bool) -> tuple[Console, Console]:
    """(progress console, message console): with --json people's output goes to stderr."""
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if json_output:
        return err, err
    out = Console(highlight=False, soft_wrap=True)
    return out, out


#: the final table lists every task up to this many; beyond, only tasks that ran and did not succeed
SUMMARY_ROWS = 50


_SUMMARY_GAP = 2  # spaces after each column of the final table
_REASON_MIN = 16


def _summary_columns(rows: list[dict[str, str]], width: int | None) -> tuple[list[str], dict[str, int]]:
    """The final table's columns and widths for a terminal ``width`` columns wide (None: no limit).

    Each column is as wide as its widest cell (the task id at most 24, the branch at most 40); the reason
    gets the rest. While the reason would get fewer than ``_REASON_MIN`` columns, the least needed
    column goes (branch, tokens, duration, follow-ups: all of them are in summary.json), then the task
    id narrows (it folds)."""
    names = ["task", "status", "follow-ups", "duration", "tokens", "branch", "reason"]
    caps = {"task": 24, "branch": 40}
    widths = {n: min(max([len(n), *(len(r[n]) for r in rows)]), caps.get(n, 1 << 30)) for n in names[:-1]}
    if width is None:
        return names, {}

    def rest() -> int:
        return width - sum(widths[n] + _SUMMARY_GAP for n in names[:-1]) - _SUMMARY_GAP

    for optional in ("branch", "tokens", "duration", "follow-ups"):
        if rest() >= _REASON_MIN:
            break
        names.remove(optional)
    if rest() < _REASON_MIN:
        widths["task"] = max(8, widths["task"] - (_REASON_MIN - rest()))
    widths["reason"] = max(8, rest())
    return names, widths


def summary_table(result: BatchResult, width: int | None = None) -> RenderableType:
    """The batch's final table; reasons wrap (the full reason is also in summary.json). With ``width``
    (the terminal's), the columns that would not fit are left out, so no line is wider than it."""
    entries = list(result.entries)
    note: Text | None = None
    if len(entries) > SUMMARY_ROWS:
        ran = [e for e in entries if not e.result.ok and e.state != "queued"]
        succeeded = sum(1 for e in entries if e.result.ok)
        queued = sum(1 for e in entries if e.state == "queued")
        more = len(ran) - SUMMARY_ROWS
        note = Text(
            f"{len(entries):,} tasks: {succeeded:,} succeeded, {queued:,} not started"
            + (f", {more:,} more that did not succeed" if more > 0 else "")
            + " (not listed: every task is in summary.json)",
            style="dim",
        )
        entries = ran[:SUMMARY_ROWS]
    styles = {"succeeded": "green", **{s: "red" for s in _FAILED}}
    redactor = Redactor()
    rows = []
    for entry in entries:
        r = entry.result
        rows.append(
            {
                "task": r.task_id,
                "status": r.status if entry.state != "interrupted" else "interrupted",
                "follow-ups": str(r.followups),
                "duration": f"{r.duration:.1f}s",
                "tokens": f"{r.tokens:,}",
                "branch": entry.branch or "",
                "reason": redactor.text(r.reason).strip()
                + (f" (worktree kept: {entry.worktree})" if entry.worktree else ""),
                "style": styles.get(r.status, "yellow"),
            }
        )
    names, widths = _summary_columns(rows, width)
    table = Table(title="agent-fleet batch", box=None, padding=(0, _SUMMARY_GAP, 0, 0), header_style="bold")
    for name in names:
        table.add_column(name, overflow="fold", width=widths.get(name), no_wrap=name in ("status",))
    for row in rows:
        table.add_row(*(Text(row[n], style=row["style"]) if n == "status" else row[n] for n in names))
    return table if note is None else Group(table, note)
