"""The batch's final table: one line per task (or, for a big fleet, those that did not succeed)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from agent_fleet.runner import BatchResult, Redactor

__all__ = ["FAILED_STATUSES", "SUMMARY_ROWS", "summary_table"]

FAILED_STATUSES = ("failed", "error", "timeout")

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
    styles = {"succeeded": "green", **{s: "red" for s in FAILED_STATUSES}}
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
