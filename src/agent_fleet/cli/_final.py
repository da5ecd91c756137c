"""The batch's final table: one line per task (or, for a big fleet, those that did not succeed)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text

from agent_fleet.runner import BatchResult, Redactor

__all__ = ["FAILED_STATUSES", "GATES_LISTED", "GATE_LINES", "SUMMARY_ROWS", "link", "summary_table"]

FAILED_STATUSES = ("failed", "error", "timeout")

#: the final table lists every task up to this many; beyond, only tasks that ran and did not succeed
SUMMARY_ROWS = 50
#: under the table: the last lines of this many failed gates' output, this many lines each
GATES_LISTED = 10
GATE_LINES = 3


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


def _gate_tails(result: BatchResult) -> dict[str, list[str]]:
    """The last lines of each failed gate's output, by task (from summary.json, else the results)."""
    tails: dict[str, str] = {}
    for t in (result.summary or {}).get("tasks") or []:
        gate = t.get("gate") if isinstance(t, dict) else None
        if isinstance(gate, dict) and gate.get("passed") is False and gate.get("output_tail"):
            tails[str(t.get("task_id"))] = str(gate["output_tail"])
    for entry in result.entries:
        gate = entry.result.gate
        if entry.result.task_id not in tails and gate is not None and not gate.passed:
            tails[entry.result.task_id] = "\n".join(
                c.output for c in gate.checks if not c.passed and c.output
            )
    redactor = Redactor()
    out = {}
    for task_id, text in tails.items():
        lines = [line.rstrip() for line in redactor.text(text).splitlines() if line.strip()]
        if lines:
            out[task_id] = lines[-GATE_LINES:]
    return out


def _totals(result: BatchResult) -> dict[str, str]:
    """The footer: every task counted (listed or not), the batch's wall time, its tokens (and cost)."""
    entries = result.entries
    counts: dict[str, int] = {}
    for e in entries:
        status = "not started" if e.state == "queued" else e.result.status
        counts[status] = counts.get(status, 0) + 1
    order = ["succeeded", *FAILED_STATUSES, "cancelled", "not started"]
    parts = [
        f"{counts[s]:,} {s}"
        for s in sorted(counts, key=lambda s: (s not in order, order.index(s) if s in order else 0, s))
    ]
    cost = (result.summary or {}).get("cost")
    if isinstance(cost, int | float):
        parts.append(f"cost {cost:.4f} {(result.summary or {}).get('currency') or ''}".rstrip())
    ok = counts.get("succeeded", 0)
    return {
        "task": f"total {len(entries):,}",
        "status": f"{ok:,}/{len(entries):,} ok",
        "follow-ups": f"{sum(e.result.followups for e in entries):,}",
        "duration": f"{result.duration:.1f}s",
        "tokens": f"{sum(e.result.tokens for e in entries):,}",
        "branch": "",
        "reason": ", ".join(parts),
    }


def summary_table(result: BatchResult, width: int | None = None) -> RenderableType:
    """The batch's one final table: a row per task (a big fleet: those that did not succeed), a footer of
    totals (every task, the batch's wall time, tokens, cost), then the last lines of each failed gate's
    output. Reasons wrap (the full reason is also in summary.json). With ``width`` (the terminal's), the
    columns that would not fit are left out, so no line is wider than it."""
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
    totals = _totals(result)
    names, widths = _summary_columns([*rows, totals], width)
    table = Table(
        title="agent-fleet batch",
        box=None,
        padding=(0, _SUMMARY_GAP, 0, 0),
        header_style="bold",
        show_footer=True,
        footer_style="bold",
    )
    for name in names:
        table.add_column(
            name, footer=totals[name], overflow="fold", width=widths.get(name), no_wrap=name in ("status",)
        )
    for row in rows:
        table.add_row(*(Text(row[n], style=row["style"]) if n == "status" else row[n] for n in names))
    parts: list[RenderableType] = [table]
    if note is not None:
        parts.append(note)
    tails = _gate_tails(result)
    if tails:
        parts.append(
            Text("failed gates, the last lines of their output (all of it in the report):", style="red")
        )
        for task_id, lines in list(tails.items())[:GATES_LISTED]:
            parts.append(Text(f"  {task_id}:", style="bold"))
            parts.extend(Text(f"    {line}", overflow="fold") for line in lines)
        if len(tails) > GATES_LISTED:
            parts.append(Text(f"  … {len(tails) - GATES_LISTED:,} more failed gates", style="dim"))
    return parts[0] if len(parts) == 1 else Group(*parts)


def link(label: str, path: Path) -> Text:
    """``label`` then ``path``, the path a link to it (OSC 8: a terminal that knows it makes it
    clickable, others show the text; nothing is added when the output is not a terminal)."""
    text = Text(label)
    text.append(str(path), style=Style(link=path.resolve().as_uri()))
    return text
