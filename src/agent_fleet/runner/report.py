"""The batch report: one self-contained HTML page rendered from ``summary.json``.

    agent-fleet report OUT_DIR            # writes OUT_DIR/report.html (also written after every batch)

The page needs nothing but itself: styles, script and data are inline, no font, image or script is
fetched (a Content-Security-Policy says so to the browser too), so it works opened from disk
(``file://``), offline, and mailed as an attachment. It opens on an overview -- one row per task,
failed tasks first: status, duration, tokens, cost, follow-ups, gate, commands, declines, lines
changed, and a timeline bar of turns, tool calls, approvals and gate runs on one time axis with ticks,
shared by every task -- with a status filter and a search over ids and prompts. Opening a task (a
click, or ``#task-ID`` in the address) shows its detail: prompt, the conversation (the agent's
messages and reasoning with its commands, declines, gate runs and follow-ups, in order, collapsed),
final message, every command with its exit code and collapsed output, declined approvals with their
rule, the gate's output, files changed with lines added and removed, the final diff in colour, per
file. A scripted run says so wherever the model is named. Dark mode follows the system's setting.

It stays fast at fleet scale (50,000 tasks open in well under two seconds): the page draws only the
rows on screen, and a task's detail is read from a compressed block of the page when it is opened
(``_report_data``). Every value from a task is text: the data is JSON the page's script puts in the
page as text (never as HTML), and Jinja2 escapes the rest.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, Final

import jinja2
from markupsafe import Markup

from agent_fleet._redact import Redactor
from agent_fleet.errors import UsageError
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.runner._report_data import (
    CHUNK,
    STATUS_ORDER,
    axis_of,
    chunks,
    detail,
    failed_first,
    overview_row,
    pack,
    parse_diff,
    search_text,
    ticks,
)
from agent_fleet.runner._summary import SCHEMA_VERSION

__all__ = ["REPORT_NAME", "load_summary", "render_report", "write_batch_report", "write_report"]

REPORT_NAME: Final = "report.html"
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


def _asset(name: str) -> Markup:
    """The page's own style or script (shipped in the package; never fetched)."""
    text = (resources.files("agent_fleet.runner") / "templates" / name).read_text(encoding="utf-8")
    if "</" in text:  # it is put in a <style> / <script> element whole
        raise AssertionError(f"{name} must not contain '</'")
    return Markup(text)


def _epoch(iso: Any) -> float | None:
    if not isinstance(iso, str):
        return None
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return None


def _base(summary: Mapping[str, Any], tasks: list[Mapping[str, Any]]) -> float | None:
    """When the batch started (epoch seconds): the zero of the timeline's offsets."""
    started = _epoch(summary.get("started_at"))
    if started is not None:
        return started
    starts = [s for s in (_epoch(t.get("started_at")) for t in tasks) if s is not None]
    return min(starts) if starts else None


def render_report(summary: Mapping[str, Any], *, prices: PriceTable | None = None) -> str:
    """The HTML page for ``summary`` (a ``summary.json`` document). ``prices`` (re)computes costs."""
    tasks: list[Mapping[str, Any]] = list(summary.get("tasks") or [])
    currency = summary.get("currency")
    if prices is not None:
        currency = prices.currency
        tasks = [{**t, "cost": prices.cost(t.get("model"), t.get("tokens"))} for t in tasks]
    tasks = failed_first(tasks)
    axis = axis_of(tasks, summary.get("duration"))
    statuses = [s for s in STATUS_ORDER if any(t.get("status") == s for t in tasks)]
    statuses += sorted({str(t.get("status")) for t in tasks} - set(statuses))
    index = {s: n for n, s in enumerate(statuses)}
    show_cost = any(t.get("cost") is not None for t in tasks)
    step, tick_marks = ticks(axis)
    rows, details = [], []
    for t in tasks:
        files = parse_diff(t.get("diff"))
        rows.append(overview_row(t, axis, index, files))
        details.append(detail(t, files))
    overview = {
        "chunk": CHUNK,
        "base": _base(summary, tasks),
        "statuses": statuses,
        "axis": axis,
        "tick": round(100.0 * step / axis, 4),
        "cost": show_cost,
        "all_scripted": bool(tasks) and all(t.get("scripted") for t in tasks),
        "currency": currency,
        "rows": rows,
    }
    template = _env.get_template("report.html.j2")
    return template.render(
        summary=summary,
        tasks=tasks,
        statuses=statuses,
        axis=axis,
        ticks=tick_marks,
        show_cost=show_cost,
        currency=currency,
        total_cost=sum(t["cost"] for t in tasks if t.get("cost") is not None) if show_cost else None,
        scripted=bool(summary.get("scripted")) or any(t.get("scripted") for t in tasks),
        overview=pack(overview),
        search=pack([search_text(t) for t in tasks]),
        chunks=chunks(details),
        style=_asset("report.css"),
        script=_asset("report.js"),
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
