"""The batch report: one self-contained HTML page rendered from ``summary.json``.

    agent-fleet report OUT_DIR            # writes OUT_DIR/report.html (also written after every batch)

The page needs nothing but itself: styles and a small script are inline, no font, image or script is
fetched, so it works opened from disk (``file://``) and mailed as an attachment. It shows an overview
table (status, duration, tokens, cost, follow-ups, gate, commands, declines and a timeline bar of
turns, tool calls, approvals and gate runs on one time axis shared by every task), a status filter and
a search over ids and prompts, then a section per task: prompt, final message, every command with its
exit code and collapsed output, declined approvals with their rule, the gate's output, the final diff,
follow-ups and retries. Rendering is Jinja2 with autoescaping: every value from a task is text.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import jinja2

from agent_fleet._redact import Redactor
from agent_fleet.errors import UsageError
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.runner._summary import SCHEMA_VERSION

__all__ = ["REPORT_NAME", "load_summary", "render_report", "write_batch_report", "write_report"]

REPORT_NAME: Final = "report.html"
_STATUSES: Final = ("succeeded", "failed", "timeout", "cancelled", "error")
_NONE: Final = "\u2013"  # an en dash: no value

_env = jinja2.Environment(
    loader=jinja2.PackageLoader("agent_fleet.runner", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _fmt_duration(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return _NONE
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def _fmt_int(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else _NONE


def _fmt_cost(value: Any, currency: str | None) -> str:
    if not isinstance(value, int | float):
        return _NONE
    return f"{value:.4f} {currency or ''}".strip()


_env.filters["duration"] = _fmt_duration
_env.filters["int"] = _fmt_int
_env.filters["cost"] = _fmt_cost


def _bars(task: Mapping[str, Any], axis: float) -> list[dict[str, Any]]:
    """The task's timeline spans as percentages of the shared axis (a visible minimum width)."""
    out = []
    for span in task.get("timeline") or []:
        start, end = span.get("start"), span.get("end")
        if not isinstance(start, int | float):
            continue
        end = end if isinstance(end, int | float) else start
        left = max(0.0, min(100.0, 100.0 * start / axis))
        width = max(0.4, min(100.0 - left, 100.0 * (end - start) / axis))
        title = f"{span.get('kind')}: {span.get('name')} ({_fmt_duration(end - start)}"
        title += f", {span['status']})" if span.get("status") else ")"
        out.append(
            {"kind": span.get("kind"), "left": round(left, 3), "width": round(width, 3), "title": title}
        )
    return out


def render_report(summary: Mapping[str, Any], *, prices: PriceTable | None = None) -> str:
    """The HTML page for ``summary`` (a ``summary.json`` document). ``prices`` (re)computes costs."""
    tasks = [dict(t) for t in summary.get("tasks") or []]
    currency = summary.get("currency")
    if prices is not None:
        currency = prices.currency
        for t in tasks:
            t["cost"] = prices.cost(t.get("model"), t.get("tokens"))
    ends = [
        span["end"]
        for t in tasks
        for span in t.get("timeline") or []
        if isinstance(span.get("end"), int | float)
    ]
    axis = max([*ends, summary.get("duration") or 0.0, 0.001])
    for t in tasks:
        t["bars"] = _bars(t, axis)
        t["search"] = f"{t.get('task_id', '')} {t.get('prompt') or ''}".lower()
    statuses = [s for s in _STATUSES if any(t.get("status") == s for t in tasks)]
    statuses += sorted({str(t.get("status")) for t in tasks} - set(statuses))
    show_cost = any(t.get("cost") is not None for t in tasks)
    template = _env.get_template("report.html.j2")
    return template.render(
        summary=summary,
        tasks=tasks,
        statuses=statuses,
        axis=axis,
        show_cost=show_cost,
        currency=currency,
        total_cost=sum(t["cost"] for t in tasks if t.get("cost") is not None) if show_cost else None,
    )


def write_report(
    summary: Mapping[str, Any],
    path: str | os.PathLike[str],
    *,
    prices: PriceTable | None = None,
    redacted: bool = False,
) -> Path:
    """Render ``summary`` to ``path`` (written whole: a reader never sees half a page). The page holds
    no secret: ``summary`` is redacted first, unless ``redacted`` says it was (the summary the batch
    itself just wrote); a summary read from disk may come from anywhere (an older version, a hand)."""
    dest = Path(path)
    if not redacted:
        summary = Redactor().value(summary)
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(render_report(summary, prices=prices), encoding="utf-8")
    tmp.replace(dest)
    return dest


def load_summary(source: str | os.PathLike[str]) -> tuple[dict[str, Any], Path]:
    """Read a batch's ``summary.json`` from its directory (or the file itself). Raises ``UsageError``.

    Returns the summary and the directory it came from."""
    path = Path(source)
    file = path / "summary.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UsageError(f"no batch summary at {str(file)!r} (give a batch's --out directory)") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"cannot read the batch summary {str(file)!r}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise UsageError(f"{str(file)!r} is not an agent-fleet batch summary (no task list)")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise UsageError(
            f"{str(file)!r} has summary schema {data.get('schema_version')!r}, this agent-fleet reads "
            f"{SCHEMA_VERSION} (a summary from an older version has counts only: run the batch again)"
        )
    return data, file.parent


def write_batch_report(
    source: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    prices: PriceTable | None = None,
) -> Path:
    """``agent-fleet report``: the page for a batch directory (or its ``summary.json``), written to
    ``output`` (default: ``report.html`` beside the summary). Raises ``UsageError``."""
    summary, where = load_summary(source)
    dest = Path(output) if output is not None else where / REPORT_NAME
    if dest.is_dir():
        dest = dest / REPORT_NAME
    try:
        return write_report(summary, dest, prices=prices)
    except OSError as exc:
        raise UsageError(f"cannot write the report to {str(dest)!r}: {exc}") from exc
