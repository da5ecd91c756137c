"""The report page's data, built from a summary document: the overview (one small row per task, failed
tasks first) and each task's detail, compressed in blocks the page opens when a task is opened.

Why so: a page of 50,000 tasks must open at once. The overview is one JSON array of short rows (id,
status, numbers, timeline bars as percentages, a search text) that the page draws a screenful at a
time; the details (prompt, conversation, commands and their output, declines, gate, diff...) come
``CHUNK`` tasks to a block. Each is JSON, deflated and base64 (``pack``) in a
``<script type="application/octet-stream">`` element the browser neither runs nor parses: the page
inflates the overview as it starts and a block when one of its tasks is opened
(``DecompressionStream``), and the blocks come after the page's script, so the overview is drawn
before they are even read. A 50,000-task page is about a sixth of its JSON's size. Everything stays
in the one file, so it still works from ``file://`` and mailed.
"""

from __future__ import annotations

import base64
import json
import math
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

__all__ = [
    "CHUNK",
    "STATUS_ORDER",
    "axis_of",
    "chunks",
    "detail",
    "failed_first",
    "overview_row",
    "pack",
    "parse_diff",
    "search_text",
    "ticks",
]

#: Tasks per compressed block of details.
CHUNK: Final = 128
#: The overview's order: what needs a look first.
STATUS_ORDER: Final = ("failed", "error", "timeout", "cancelled", "succeeded")
#: Bars a row of the overview draws at most (the detail has the whole timeline).
_BARS: Final = 40
#: Characters of a prompt the overview's search looks at (the id is searched too).
_SEARCHED: Final = 200
_KINDS: Final = ("turn", "tool", "approval", "gate", "review")
_DIFF_FILE: Final = re.compile(r"^diff --git a/(.*?) b/(.*)$")


def failed_first(tasks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``tasks`` with those that failed first, then timed out, cancelled, succeeded (each group in its
    own order; a status this version does not know goes with the failed ones)."""
    rank = {s: n for n, s in enumerate(STATUS_ORDER)}
    return sorted(tasks, key=lambda t: rank.get(str(t.get("status")), 0))


def ticks(axis: float) -> tuple[float, list[tuple[float, str]]]:
    """A round step for the time axis (1, 2 or 5 times a power of ten seconds, or whole minutes and
    hours) giving 4 to 10 ticks over ``axis`` seconds, and the ticks as (percent, label)."""
    axis = max(axis, 0.001)
    raw = axis / 6
    seconds = [m * 10**e for e in range(-3, 2) for m in (1, 2, 5) if m * 10**e < 60]
    steps = [
        *seconds,
        *(60 * m for m in (1, 2, 5, 10, 15, 30)),
        *(3600 * m for m in (1, 2, 3, 6, 12, 24, 48)),
    ]
    step = min((s for s in steps if s >= raw), default=raw)
    out = []
    n = 0
    while n * step <= axis * 1.0001:
        out.append((round(100.0 * n * step / axis, 4), _tick_label(n * step)))
        n += 1
    return step, out


def _tick_label(seconds: float) -> str:
    if seconds >= 3600:
        hours, rest = divmod(round(seconds), 3600)
        return f"{hours}h" + (f"{rest // 60:02d}m" if rest else "")
    if seconds >= 60:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes}m" + (f"{rest:02d}s" if rest else "")
    return f"{seconds:g}s"


def parse_diff(diff: str | None) -> list[dict[str, Any]]:
    """A unified diff (``git diff``'s) per file: path, lines added and removed, and the file's text."""
    files: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    lines: list[str] = []
    for line in (diff or "").splitlines():
        header = _DIFF_FILE.match(line)
        if header is not None:
            if current is not None:
                current["text"] = "\n".join(lines)
            current = {"path": header.group(2), "added": 0, "removed": 0}
            files.append(current)
            lines = []
        elif current is None:
            if not line.strip():
                continue
            current = {"path": "", "added": 0, "removed": 0}  # a diff without git's headers
            files.append(current)
        if current is not None:
            lines.append(line)
            if line.startswith("+") and not line.startswith("+++ "):
                current["added"] += 1
            elif line.startswith("-") and not line.startswith("--- "):
                current["removed"] += 1
    if current is not None:
        current["text"] = "\n".join(lines)
    return files


def _num(value: Any) -> float | int | None:
    """A number JSON and the page can take (not a bool, not NaN or infinite), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def _round(value: Any) -> float | None:
    number = _num(value)
    return round(number, 1) if number is not None else None


def _bars(task: Mapping[str, Any], axis: float) -> list[float]:
    """The timeline as flat triples (kind index, left %, width %), at most ``_BARS`` of them: the
    turns and gate runs first, then as many tool calls and approvals as fit."""
    spans = [
        s for s in task.get("timeline") or [] if isinstance(s, Mapping) and _num(s.get("start")) is not None
    ]
    if len(spans) > _BARS:
        major = [s for s in spans if s.get("kind") in ("turn", "gate", "review")]
        spans = (major + [s for s in spans if s.get("kind") not in ("turn", "gate", "review")])[:_BARS]
    out: list[float] = []
    for span in spans:
        start = float(span["start"])
        end = _num(span.get("end"))
        end = float(end) if end is not None else start
        left = max(0.0, min(100.0, 100.0 * start / axis))
        width = max(0.3, min(100.0 - left, 100.0 * (end - start) / axis))
        kind = _KINDS.index(span["kind"]) if span.get("kind") in _KINDS else 1
        out += [kind, round(left, 1), round(width, 1)]
    return out


def search_text(task: Mapping[str, Any]) -> str:
    """What the overview's search looks at besides the id: the prompt's start, in lower case (kept
    apart from the rows, so the page draws before it reads them)."""
    return str(task.get("prompt") or "")[:_SEARCHED].lower()


def _diffstat(files: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    return sum(f["added"] for f in files), sum(f["removed"] for f in files)


def overview_row(
    task: Mapping[str, Any], axis: float, statuses: Mapping[str, int], files: Sequence[Mapping[str, Any]]
) -> list[Any]:
    """One row of the overview: [id, status index, duration, tokens in, out, cached, cost, follow-ups,
    gate (1 passed, 0 failed, null none), commands, declines, lines added, removed, bars, scripted (1 or
    0)]. ``files``: its diff per file (``parse_diff``). What is searched is ``search_text``'s."""
    tokens = task.get("tokens") or {}
    gate = task.get("gate")
    added, removed = _diffstat(files)
    return [
        str(task.get("task_id", "")),
        statuses[str(task.get("status"))],
        _round(task.get("duration")),
        _num(tokens.get("input")),
        _num(tokens.get("output")),
        _num(tokens.get("cached_input")),
        _num(task.get("cost")),
        _num(task.get("followups")) or 0,
        (1 if gate.get("passed") else 0) if isinstance(gate, Mapping) else None,
        len(task.get("commands") or []),
        len(task.get("declines") or []),
        added,
        removed,
        _bars(task, axis),
        1 if task.get("scripted") else 0,
    ]


_DETAIL_KEYS: Final = (
    "task_id",
    "status",
    "reason",
    "error_code",
    "prompt",
    "final_message",
    "provider",
    "model",
    "model_label",
    "scripted",
    "session_id",
    "started_at",
    "finished_at",
    "duration",
    "branch",
    "worktree",
    "transcript",
    "retries",
    "resumed_from",
    "followups",
    "followup_prompts",
    "commands",
    "declines",
    "gate",
    "reviews",
    "review",
    "errors",
    "files_changed",
    "shared_tree",
    "messages",
    "timeline",
    "cost",
)


def detail(task: Mapping[str, Any], files: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the page shows of an opened task: its record, with the diff split per file (``files``:
    ``parse_diff``'s, with lines added and removed)."""
    out = {k: task.get(k) for k in _DETAIL_KEYS if task.get(k) not in (None, [], "")}
    if files:
        out["diff_files"] = files
    return out


def _blocks(details: Sequence[Mapping[str, Any]]) -> Iterator[Sequence[Mapping[str, Any]]]:
    for start in range(0, len(details), CHUNK):
        yield details[start : start + CHUNK]


_ENCODE: Final = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False
).encode


def pack(value: Any, level: int = 6) -> str:
    """``value`` as JSON, deflated (zlib: ``DecompressionStream("deflate")``), base64: text that cannot
    end the element it is in, whatever the value holds."""
    return base64.b64encode(zlib.compress(_ENCODE(value).encode("utf-8"), level)).decode("ascii")


def chunks(details: Sequence[Mapping[str, Any]]) -> list[str]:
    """The details ``CHUNK`` at a time, each ``pack``ed."""
    return [pack(list(block)) for block in _blocks(details)]


def axis_of(tasks: Sequence[Mapping[str, Any]], duration: Any) -> float:
    """The shared time axis, in seconds: the latest end of any span, or the batch's duration."""
    ends = [
        float(span["end"])
        for t in tasks
        for span in t.get("timeline") or []
        if isinstance(span, Mapping) and _num(span.get("end")) is not None
    ]
    longest = max([*ends, float(_num(duration) or 0.0), 0.001])
    return longest if math.isfinite(longest) else 0.001
