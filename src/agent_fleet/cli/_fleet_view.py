"""The batch's live view: a header of counts, then running and failed tasks pinned, then the next
queued ones and the latest others; then the latest declines and failed gates' last output lines; it
fits the terminal, whatever its height and width.

Every part is laid out in whole lines it can count: the header is packed into lines of the terminal's
width (never breaking a label from its number; counted before the table gets the rest), each table
row and each note is one line (cells never wrap; they end with an ellipsis), and the columns that do
not fit are left out, least useful first (follow-ups, elapsed, tokens), rather than squeezing the
step to nothing or cutting numbers.
Whatever is computed, the whole is cropped to the terminal's height as a last guard. A render reads
no more rows than fit: running rows in start order, then failures newest first, then up to
``QUEUED_SHOWN`` queued tasks in the order they will start, then the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from agent_fleet.cli._view import _Row

__all__ = ["FleetState", "fleet_view"]

#: The step column never gets narrower than this while it is shown with any other optional column.
STEP_MIN = 12
#: Queued tasks shown (the next to start) when there is room; the header counts them all.
QUEUED_SHOWN = 5
_GAP = 2  # between two columns (a cell's padding of 1 on each side)
_DECLINED_SHOWN = 3
_GATES_SHOWN = 3
_STYLES = {
    "running": "cyan",
    "succeeded": "green",
    "failed": "red",
    "error": "red",
    "timeout": "red",
    "queued": "dim",
}


class FleetState(Protocol):
    """What the view reads from ``Progress``."""

    def header(self, width: int | None = None) -> Text: ...

    def running_rows(self) -> Iterator[_Row]: ...

    def failed_rows(self) -> Iterator[_Row]: ...

    def other_rows(self) -> Iterator[_Row]: ...

    def recent_declined(self, n: int) -> list[str]: ...

    def recent_gates(self, n: int) -> list[str]: ...

    def queued_ids(self, n: int) -> list[str]: ...

    def queued_row(self, task_id: str) -> _Row: ...

    def hidden_counts(self, running_shown: int, failed_shown: int) -> dict[str, int]: ...


@dataclass(slots=True)
class _Cropped:
    """``renderable`` cut to its first ``lines`` lines (the last guard against overflowing)."""

    renderable: RenderableType
    lines: int

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rendered = console.render_lines(self.renderable, options, pad=False)
        for n, line in enumerate(rendered[: self.lines]):
            if n:
                yield Segment.line()
            yield from line


def _take(rows: Iterable[_Row], n: int) -> list[_Row]:
    out: list[_Row] = []
    if n <= 0:
        return out
    for row in rows:
        out.append(row)
        if len(out) == n:
            break
    return out


def _line(text: str, style: str = "") -> Text:
    return Text(text, style=style, no_wrap=True, overflow="ellipsis")


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    width: int


def _columns(rows: Sequence[_Row], width: int) -> tuple[list[_Column], int]:
    """The columns that fit ``width`` (task, status and step always; then tokens, elapsed and
    follow-ups while the step keeps ``STEP_MIN``), and the task column's width."""
    task_w = min(32, max([4, *(len(r.task_id) for r in rows)]))
    status_w = max([6, *(len(r.status) for r in rows)])
    optional = [
        _Column("tokens", max([6, *(len(f"{r.tokens:,}") for r in rows)])),
        _Column("elapsed", max([7, *(len(f"{r.elapsed():.0f}s") for r in rows)])),
        _Column("follow-ups", 10),
    ]
    used = task_w + _GAP + status_w + _GAP + STEP_MIN
    if used > width:  # a narrow terminal: the task id gives way first, then the step
        task_w = max(4, task_w - (used - width))
        return [], task_w
    chosen: list[_Column] = []
    for column in optional:
        if used + _GAP + column.width <= width:
            chosen.append(column)
            used += _GAP + column.width
    order = {"follow-ups": 0, "elapsed": 1, "tokens": 2}
    return sorted(chosen, key=lambda c: order[c.name]), task_w


def _table(rows: Sequence[_Row], width: int) -> Table:
    columns, task_w = _columns(rows, width)
    table = Table(box=None, pad_edge=False, expand=True, show_edge=False, padding=(0, 1))
    table.add_column("task", no_wrap=True, overflow="ellipsis", width=task_w, min_width=task_w)
    status_w = max([6, *(len(r.status) for r in rows)])
    table.add_column("status", no_wrap=True, overflow="ellipsis", width=status_w, min_width=status_w)
    table.add_column("step", no_wrap=True, overflow="ellipsis", ratio=1)  # the one that gives way
    for column in columns:
        table.add_column(
            column.name, no_wrap=True, justify="right", width=column.width, min_width=column.width
        )
    for row in rows:
        cells: list[str | Text] = [row.task_id, Text(row.status, style=_STYLES.get(row.status, "yellow"))]
        cells.append(row.step)
        for column in columns:
            if row.status == "queued":  # nothing to count yet
                cells.append("")
                continue
            match column.name:
                case "follow-ups":
                    cells.append(str(row.followups))
                case "elapsed":
                    cells.append(f"{row.elapsed():.0f}s")
                case "tokens":
                    cells.append(f"{row.tokens:,}")
        table.add_row(*cells)
    return table


def fleet_view(state: FleetState, console: Console) -> RenderableType:
    """The view for a terminal of ``console.size`` (see the module docstring)."""
    width, height = console.size
    budget = max(1, height - 1)  # the line the cursor rests on stays free
    header = state.header(width)
    header_lines = len(header.wrap(console, width))  # (one per packed line: none is wider)
    declined = state.recent_declined(_DECLINED_SHOWN)
    gates = state.recent_gates(_GATES_SHOWN)
    room = budget - header_lines - 1  # the column names
    notes = (1 + len(declined) if declined else 0) + (1 + len(gates) if gates else 0)
    if room - notes < 2:  # a short terminal: the tasks matter more than the notes
        declined, gates, notes = [], [], 0
    room -= notes
    parts: list[RenderableType] = [header]
    if room >= 1:
        running = _take(state.running_rows(), room)
        failed = _take(state.failed_rows(), room - len(running))
        pinned = running + failed
        hidden = state.hidden_counts(len(running), len(failed))
        if any(hidden.values()) and room >= 2:
            # the last line says what is left out
            pinned = pinned[: room - 1]
            hidden = state.hidden_counts(
                sum(1 for r in pinned if r.status == "running"),
                sum(1 for r in pinned if r.status != "running"),
            )
            shown = pinned
        else:
            queued = [state.queued_row(i) for i in state.queued_ids(min(QUEUED_SHOWN, room - len(pinned)))]
            shown = pinned + queued + _take(state.other_rows(), room - len(pinned) - len(queued))
            hidden = {}
        parts.append(_table(shown, width))
        if hidden:
            more = ", ".join(f"{n:,} more {label}" for label, n in hidden.items() if n)
            parts.append(_line(f"… {more} (the terminal is too small to show them)", "dim"))
    if declined:
        parts.append(_line("declined:", "yellow"))
        parts.extend(_line(d, "yellow") for d in declined)
    if gates:
        parts.append(_line("failed gates (last line of their output):", "red"))
        parts.extend(_line(g) for g in gates)
    return _Cropped(Group(*parts), budget)
