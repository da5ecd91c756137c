"""What people see: one line per event, the live view (rich ``Live``), plain lines, JSON Lines."""

from __future__ import annotations

import collections
import json
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from rich.console import Console, RenderableType
from rich.live import Live
from rich.text import Text

from agent_fleet._scripted import scripted_label
from agent_fleet.cli._describe import (
    BATCH_NOTICES,
    BRIEF,
    MESSAGES,
    VERBOSE,
    command_text,
    describe,
    first_line,
)
from agent_fleet.cli._final import FAILED_STATUSES, summary_table
from agent_fleet.cli._fleet_view import fleet_view
from agent_fleet.cli._run_view import Question, run_view
from agent_fleet.events import AssistantMessage, Error, Result, System, TextDelta, ToolUse
from agent_fleet.runner import Redactor, TaskCounters, TaskEvent, TaskResult, event_record
from agent_fleet.runner._delta_redact import DeltaCoalescer

__all__ = ["Progress", "command_text", "consoles", "describe", "first_line", "result_line", "summary_table"]


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
    streaming: str = ""  # the agent's message while it streams (``run``'s live view)
    gate_tail: str = ""  # the last line of the latest failed gate's output
    scripted: bool = False  # agent_fleet.testing's scripted model answers, not a real one

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
    with ``--json`` (then people's output goes to stderr).

    ``run`` prints the agent's messages and reasoning in full, each command, decline and gate as lines
    (above the live view on a terminal, where the message being streamed shows as it comes); a batch
    prints first lines, tagged with the task (on a terminal only the fleet view, unless ``verbosity``
    is 1). ``verbosity`` -1 (``-q``) shows nothing but what ``ask`` needs; 1 (``-v``) adds every
    command's exit code and its output's last lines."""

    def __init__(
        self,
        console: Console,
        *,
        json_output: bool,
        batch: bool,
        out: IO[str] | None = None,
        verbosity: int = 0,
    ) -> None:
        self.console = console
        self.json_output = json_output
        self.batch = batch
        self.out = out or sys.stdout
        self.verbosity = verbosity
        self.live_mode = console.is_terminal and not json_output and verbosity >= 0
        self.detail = VERBOSE if verbosity > 0 else BRIEF if batch or verbosity < 0 else MESSAGES
        self.question: Question | None = None  # what the terminal asks the person (``_ask``)
        # A batch's queued tasks in the order they start (the view shows the next few).
        self._queued: collections.deque[str] = collections.deque()
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
        self._gates: collections.deque[str] = collections.deque(maxlen=8)  # failed gates' last lines
        self._want_live = False
        self._scripted = False  # a task was answered by the scripted model: the header says so

    def expect(self, total: int, done: Mapping[str, int] | None = None, queued: Iterable[str] = ()) -> None:
        """A batch of ``total`` tasks, of which ``done`` (by status) finished in an earlier run;
        ``queued``: the ids of those it will start, in order."""
        self.total = total
        self.done = dict(done or {})
        self._queued = collections.deque(queued)

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
        # A batch's view gives way to the final table (one table, not two); run's stays on the screen.
        self.live = Live(
            console=self.console, refresh_per_second=4, get_renderable=self.render, transient=self.batch
        )
        self.live.start()

    def refresh(self) -> None:
        """Draw the live view now (a question appeared or was answered)."""
        if self._want_live:
            self._start_live()
        if self.live is not None:
            self.live.refresh()

    def say(self, text: str | Text) -> None:
        """A line for the person, above the live view (or as a plain line)."""
        if self._want_live:
            self._start_live()
        self.console.print(text, highlight=False, soft_wrap=True)

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
                self.say(Text(self.redactor.text(said), style="yellow"))
            return
        row = self.row(task_event.task_id)
        event = task_event.event
        line = describe(task_event, self.detail)
        if line is not None:
            line = self.redactor.text(line)
        row.counters.feed(task_event)
        match event:
            case System(subtype="runner.started", data=data):
                row.scripted = bool(data.get("scripted"))
                self._scripted = self._scripted or row.scripted
            case System(subtype="session", data=data) if line and row.scripted:
                model = scripted_label(str(data.get("model")))
                line = f"model: {model}: agent-fleet's scripted model answers, no real model"
            case TextDelta(text=text) if task_event.source == "agent" and not self.batch:
                row.streaming = (row.streaming + text)[-_STREAM_KEPT:]
            case AssistantMessage() | Result() | Error() | System(subtype="stream_retry"):
                row.streaming = ""  # shown in full as a line (or streamed again after a retry)
            case System(subtype="runner.gate", data=data) if not data.get("passed"):
                out = [x for x in str(data.get("output_tail") or "").splitlines() if x.strip()]
                row.gate_tail = first_line(self.redactor.text(out[-1]), 200) if out else ""
                if row.gate_tail:
                    self._gates.append(f"[{row.task_id}] {row.gate_tail}")
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
        if line and self.verbosity >= 0 and (not self.live_mode or not self.batch or self.verbosity > 0):
            self._print(task_event.task_id, line)
        elif line and self.live_mode and isinstance(event, System) and event.subtype in BATCH_NOTICES:
            self.say(Text(line))  # the whole batch's state: said once, above the view

    def _print(self, task_id: str, line: str) -> None:
        """``line`` as people read it: a fleet's tagged with its task, the agent's words set apart (the
        lines after a message's first are indented under it)."""
        tag = f"[{task_id}] " if self.batch else ""
        style = next((s for prefix, s in _LINE_STYLES if line.startswith(prefix)), "")
        for n, part in enumerate(line.splitlines()):
            text = Text(tag, style="dim") if tag else Text()
            text.append(part if n == 0 or part.startswith("  ") else "  " + part, style=style)
            self.console.print(text, highlight=False, soft_wrap=True)

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

    def recent_gates(self, n: int) -> list[str]:
        """The last line of the latest failed gates' output, ``[task] line``, oldest first."""
        return list(self._gates)[-n:] if n > 0 else []

    def queued_row(self, task_id: str) -> _Row:
        """A row for a task that has not started (not kept)."""
        return _Row(task_id, step="waiting for a slot", status="queued")

    def queued_ids(self, n: int) -> list[str]:
        """The next ``n`` tasks to start (those that started already are dropped on the way)."""
        out: list[str] = []
        while self._queued and self._queued[0] in self.rows:
            self._queued.popleft()
        for task_id in self._queued:
            if len(out) >= n:
                break
            if task_id not in self.rows:
                out.append(task_id)
        return out

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
        if self._scripted:  # (last: the counts keep their place at the start of the view)
            parts.append(("SCRIPTED model", "bold magenta"))
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
        return run_view(list(self.rows.values()), self.question, self.redactor, self.console)

    def summary(self, payload: dict[str, Any]) -> None:
        """The ``--json`` stream's last line (redacted here, as every event line is by ``on_event``)."""
        if self.json_output:
            line = {"type": "summary", **self.redactor.value(payload)}
            self.out.write(json.dumps(line, default=str) + "\n")
            self.out.flush()


_FAILED = FAILED_STATUSES
_STREAM_KEPT = 4000  # characters of a streaming message kept for the live view (it shows the last lines)
_LINE_STYLES = (
    ("agent: ", "bold"),
    ("thinking: ", "dim italic"),
    ("declined: ", "yellow"),
    ("gate FAILED", "red"),
    ("turn ended", "red"),
    ("model stream dropped", "yellow"),
)
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
