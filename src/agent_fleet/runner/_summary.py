"""``summary.json``: a batch's record that answers questions by itself (schema: docs/summary.schema.json).

Two pure steps, so any source of per-task records (the live batch today, a ledger later) gives the
same summary:

- ``task_record(result, ...)``: one task's record from its ``TaskResult``, what the batch knows about
  it (branch, worktree, the planned prompt and model) and what its ``TaskRecorder`` saw (times are
  epoch seconds here);
- ``build_summary(records, ...)``: the summary document: per task the normalised record (ISO
  timestamps, timeline offsets in seconds from the batch start, cost from a price table), then the
  counts and totals.

Secrets: the caller redacts the document before writing it (prompts, outputs and diffs are in it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from agent_fleet._scripted import scripted_label
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.runner._record import tail
from agent_fleet.runner.task import TaskResult

__all__ = ["SCHEMA_VERSION", "build_summary", "iso", "task_record"]

SCHEMA_VERSION: Final = 1
_TOKEN_KINDS: Final = ("input", "cached_input", "output", "reasoning_output", "total")


def iso(epoch: float | None) -> str | None:
    """Epoch seconds as ISO 8601 UTC with milliseconds (None stays None)."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def task_record(
    result: TaskResult,
    *,
    recorded: Mapping[str, Any] | None = None,
    prompt: str | None = None,
    model: str | None = None,
    provider: str | None = None,
    branch: str | None = None,
    worktree: str | None = None,
    worktree_kept: bool = False,
    retries: int | None = None,
    resumed_from: str | None = None,
) -> dict[str, Any]:
    """One task's record (epoch times). ``recorded`` is ``TaskRecorder.record()``, when it ran;
    ``prompt``, ``model`` and ``provider`` are what was planned (used when nothing was recorded)."""
    rec = dict(recorded or {})
    usage = result.usage
    tokens = (
        {
            "input": usage.input_tokens,
            "cached_input": usage.cached_input_tokens,
            "output": usage.output_tokens,
            "reasoning_output": usage.reasoning_output_tokens,
            "total": usage.total_tokens,
        }
        if usage is not None
        else None
    )
    gate = None
    if result.gate is not None:
        output = "\n".join(c.output for c in result.gate.checks if c.output)
        gate = {
            "passed": result.gate.passed,
            "summary": result.gate.summary,
            "runs": len(rec.get("gates") or []) or 1,
            "output_tail": tail(output),
            "checks": [
                {"name": c.name, "passed": c.passed, "detail": c.detail, "exit_code": c.exit_code}
                for c in result.gate.checks
            ],
        }
    transcript = str(Path(result.transcript).resolve()) if result.transcript is not None else None
    followups = rec.get("followups") or []
    model_name = rec.get("model") or model
    scripted = bool(rec.get("scripted"))
    return {
        "task_id": result.task_id,
        "status": result.status,
        "reason": result.reason,
        "error_code": result.error_code,
        "fatal": result.fatal,
        "prompt": rec.get("prompt") or prompt,
        "final_message": result.final_text,
        "provider": rec.get("provider") or provider,
        "model": model_name,
        "scripted": scripted,
        "model_label": scripted_label(model_name) if scripted else model_name,
        "session_id": result.session_id or rec.get("session_id"),
        "started_at": rec.get("started_at"),
        "finished_at": rec.get("finished_at"),
        "duration": round(result.duration, 3),
        "tokens": tokens,
        "followups": result.followups,
        "followup_prompts": [{"number": f.get("number"), "prompt": f.get("prompt")} for f in followups],
        "commands": rec.get("commands") or [],
        "declines": rec.get("declines") or [],
        "approvals": rec.get("approvals", 0),
        "command_count": result.commands,
        "declined_count": result.declined,
        "gate": gate,
        "reviews": result.reviews,
        "review": (
            {
                "findings": [
                    {"title": f.title, "priority": f.priority, "location": f.location}
                    for f in result.review.findings
                ],
                "explanation": result.review.explanation,
            }
            if result.review is not None
            else None
        ),
        "errors": rec.get("errors") or [],
        "branch": branch,
        "worktree": {"path": worktree, "kept": worktree_kept} if worktree is not None else None,
        "cwd": result.cwd,
        "start_head": result.start_head,
        "end_head": result.end_head,
        "diff": rec.get("diff"),
        "files_changed": list(rec.get("files_changed") or []),
        "shared_tree": bool(rec.get("shared_tree")),
        "transcript": transcript,
        "retries": retries,
        "resumed_from": resumed_from,
        "timeline": rec.get("timeline") or [],
        "messages": rec.get("messages") or [],
    }


def build_summary(
    records: Sequence[Mapping[str, Any]],
    *,
    started_at: float | None,
    finished_at: float | None,
    duration: float,
    stopped: str | None = None,
    fatal: bool = False,
    provider_pids: Sequence[int] = (),
    prices: PriceTable | None = None,
) -> dict[str, Any]:
    """The summary document from per-task records (``task_record``'s shape)."""
    base = started_at
    if base is None:
        starts = [r["started_at"] for r in records if r.get("started_at") is not None]
        base = min(starts) if starts else None
    tasks = [_task(r, base, prices) for r in records]
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t["status"]] = counts.get(t["status"], 0) + 1
    tokens = {kind: sum((t["tokens"] or {}).get(kind, 0) for t in tasks) for kind in _TOKEN_KINDS}
    costs = [t["cost"] for t in tasks if t["cost"] is not None]
    return {
        "schema_version": SCHEMA_VERSION,
        "started_at": iso(started_at),
        "finished_at": iso(finished_at),
        "duration": round(duration, 3),
        "stopped": stopped,
        "fatal": fatal,
        "counts": counts,
        "tokens": tokens,
        "cost": round(sum(costs), 6) if prices is not None and costs else None,
        "currency": prices.currency if prices is not None else None,
        "provider_pids": list(provider_pids),
        "scripted": any(t.get("scripted") for t in tasks),
        "tasks": tasks,
    }


def _task(record: Mapping[str, Any], base: float | None, prices: PriceTable | None) -> dict[str, Any]:
    out = dict(record)

    def offset(at: Any) -> float | None:
        return round(at - base, 3) if isinstance(at, int | float) and base is not None else None

    out["started_at"] = iso(record.get("started_at"))
    out["finished_at"] = iso(record.get("finished_at"))
    out["commands"] = [
        {
            "command": c.get("command"),
            "cwd": c.get("cwd"),
            "exit_code": c.get("exit_code"),
            "status": c.get("status"),
            "started_at": iso(c.get("started_at")),
            "duration": (
                round(c["finished_at"] - c["started_at"], 3)
                if c.get("finished_at") is not None and c.get("started_at") is not None
                else None
            ),
            "output_tail": c.get("output_tail") or "",
            **({"agent": c["agent"]} if c.get("agent") else {}),
        }
        for c in record.get("commands") or []
    ]
    out["declines"] = [
        {
            "rule": d.get("rule"),
            "reason": d.get("reason"),
            "command": d.get("command"),
            "at": iso(d.get("at")),
        }
        for d in record.get("declines") or []
    ]
    out["errors"] = [
        {"code": e.get("code"), "message": e.get("message"), "at": iso(e.get("at"))}
        for e in record.get("errors") or []
    ]
    out["messages"] = [{**m, "at": iso(m.get("at"))} for m in record.get("messages") or []]
    out["timeline"] = [
        {**span, "start": offset(span.get("start")), "end": offset(span.get("end"))}
        for span in record.get("timeline") or []
    ]
    out["cost"] = prices.cost(record.get("model"), record.get("tokens")) if prices is not None else None
    return out
