"""``run``'s live view: the message the agent is streaming, the step, counts, and the question the
terminal asks the person (``--default-approval ask``). What happened is printed above it, line by line
(``Progress``); this part only says what is happening now, so it stays a few lines high."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agent_fleet.runner import Redactor

if TYPE_CHECKING:
    from agent_fleet.cli._view import _Row

__all__ = ["ANSWER_KEYS", "Question", "run_view"]

#: The keys the question offers, and the answer (a ``Decision`` action) each gives.
ANSWER_KEYS = (("y", "allow once", "allow_once"), ("s", "allow for this session", "allow_for_session"))
_STREAM_LINES = 4
_WHAT_LINES = 6


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """A request the approval policy left to the person at the terminal (redacted already)."""

    kind: str
    what: str  # the command, the paths, the host or the tool
    cwd: str | None
    why: str  # the rule that left it undecided, and its reason


def question_panel(question: Question, width: int) -> Panel:
    body = Text(no_wrap=False, overflow="fold")  # wraps, whatever the console's soft_wrap
    lines = question.what.splitlines() or [""]
    shown = lines[:_WHAT_LINES] + (
        [f"… ({len(lines) - _WHAT_LINES} more lines)"] if len(lines) > _WHAT_LINES else []
    )
    label = "$ " if question.kind == "command" else f"{question.kind}: "
    body.append(label + "\n".join(shown), style="bold")
    if question.cwd:
        body.append(f"\nin {question.cwd}", style="dim")
    body.append(f"\nwhy asked: {question.why}", style="dim")
    body.append("\n")
    for key, label, _ in ANSWER_KEYS:
        body.append(f"[{key}]", style="bold green")
        body.append(f" {label}   ")
    body.append("[n]", style="bold red")
    body.append(" decline")
    return Panel(body, title="approve?", title_align="left", border_style="yellow", width=min(width, 120))


def _streaming(text: str, redactor: Redactor) -> Text:
    """The last lines of the message being streamed (redacted whole: a secret may span two deltas)."""
    lines = [line for line in redactor.text(text).splitlines() if line.strip()]
    return Text("\n".join(lines[-_STREAM_LINES:]), overflow="ellipsis")


def run_view(
    rows: Sequence[_Row], question: Question | None, redactor: Redactor, console: Console
) -> RenderableType:
    """The question first (when one is asked), then per task: the streaming message, the step, the
    commands and declines counted, follow-ups, elapsed time and tokens."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for row in rows:
        if row.streaming.strip():
            grid.add_row("agent", _streaming(row.streaming, redactor))
        grid.add_row("step", row.step)
        grid.add_row("commands", str(row.command_count))
        if row.declined:
            grid.add_row("declined", f"{len(row.declined)} (latest: {row.declined[-1]})")
        grid.add_row(
            "progress", f"follow-ups {row.followups}   elapsed {row.elapsed():.1f}s   tokens {row.tokens:,}"
        )
    if question is None:
        return grid
    return Group(question_panel(question, console.size.width), grid)
