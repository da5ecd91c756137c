"""A batch's outcome types: ``BatchEntry`` (one task), ``BatchResult`` (the batch), and an entry read
back from a summary record (``entry_from_summary``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_fleet._provider.fastnew import positional_new
from agent_fleet.events import TokenUsage
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.runner._summary import build_summary, task_record
from agent_fleet.runner.task import TaskResult, TaskStatus
from agent_fleet.runner.transcript import Redactor

__all__ = ["BatchEntry", "BatchResult", "entries_from_summary", "entry_from_summary"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchEntry:
    """A task's outcome in a batch: its result, its branch, and a worktree left in place (if any).

    ``worktree_path`` is the worktree the task ran in (kept or removed); ``recorded`` what its
    ``TaskRecorder`` saw; ``prompt``, ``model`` and ``provider`` what was planned for it; ``retries``
    the attempts after the first (None where a backend does not retry); ``resumed_from`` the session
    this run continued. ``state`` and ``runs`` are the ledger's (``queued``, ``running``,
    ``interrupted``, ``finished``; how many times the batch started the task)."""

    result: TaskResult
    branch: str | None = None
    worktree: Path | None = None
    worktree_path: Path | None = None
    recorded: dict[str, Any] | None = None
    prompt: str | None = None
    model: str | None = None
    provider: str | None = None
    retries: int | None = None
    resumed_from: str | None = None
    state: str = "finished"
    runs: int = 1

    def to_dict(self) -> dict[str, Any]:
        """The task's record in ``summary.json`` (epoch times; ``build_summary`` normalises them)."""
        where = self.worktree if self.worktree is not None else self.worktree_path
        return task_record(
            self.result,
            recorded=self.recorded,
            prompt=self.prompt,
            model=self.model,
            provider=self.provider,
            branch=self.branch,
            worktree=str(where) if where is not None else None,
            worktree_kept=self.worktree is not None,
            retries=self.retries,
            resumed_from=self.resumed_from,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchResult:
    entries: tuple[BatchEntry, ...]
    duration: float
    stopped: str | None = None
    fatal: bool = False
    summary_path: Path | None = None
    provider_pids: tuple[int, ...] = ()
    started_at: float | None = None
    prices: PriceTable | None = None
    report_path: Path | None = None
    #: ``summary.json`` as written (built from the ledger's records; redacted)
    summary: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.stopped is None and all(e.result.ok for e in self.entries)

    def to_dict(self) -> dict[str, Any]:
        """The summary document (docs/summary.schema.json), redacted: it holds prompts and outputs."""
        if self.summary is not None:
            return dict(self.summary)
        summary = build_summary(
            [e.to_dict() for e in self.entries],
            started_at=self.started_at,
            finished_at=self.started_at + self.duration if self.started_at is not None else None,
            duration=self.duration,
            stopped=self.stopped,
            fatal=self.fatal,
            provider_pids=self.provider_pids,
            prices=self.prices,
        )
        redacted: dict[str, Any] = Redactor().value(summary)
        return redacted


def entries_from_summary(summary: Mapping[str, Any]) -> tuple[BatchEntry, ...]:
    """Every task of a summary as a ``BatchEntry``: those that ran (``tasks``), then those never started
    (``not_started``, listed by id)."""
    entries = [entry_from_summary(t) for t in summary.get("tasks") or []]
    not_started = summary.get("not_started") or {}
    reason = str(not_started.get("reason") or "not started")
    # Tens of thousands at a stop: built without the frozen __init__ (3x cheaper, see _fastnew).
    result_rest, entry_rest = _RESULT_DEFAULTS, _ENTRY_DEFAULTS
    entries += [
        _new_entry(_new_result(str(task_id), "cancelled", reason, *result_rest), *entry_rest)
        for task_id in not_started.get("task_ids") or []
    ]
    return tuple(entries)


def _defaults(cls: type[Any], after: int, **given: Any) -> tuple[Any, ...]:
    """The defaults of ``cls``'s fields after the first ``after``, in order (``given`` replaces some)."""
    out = []
    for f in dataclasses.fields(cls)[after:]:
        factory: Any = f.default_factory
        out.append(given.get(f.name, f.default if f.default is not dataclasses.MISSING else factory()))
    return tuple(out)


_new_result = positional_new(TaskResult)
_new_entry = positional_new(BatchEntry)
_RESULT_DEFAULTS = _defaults(TaskResult, 3)
_ENTRY_DEFAULTS = _defaults(BatchEntry, 1, state="queued", runs=0)


def entry_from_summary(t: Mapping[str, Any]) -> BatchEntry:
    """A summary task back as a ``BatchEntry`` (its full record stays in the summary and the ledger)."""
    if t.get("state") == "queued" and not t.get("runs"):  # never started: kept cheap for a big fleet
        result = TaskResult(task_id=str(t["task_id"]), status="cancelled", reason=str(t.get("reason") or ""))
        return BatchEntry(result=result, state="queued", runs=0, prompt=t.get("prompt"))
    tokens = t.get("tokens") or {}
    status: TaskStatus = t.get("status", "cancelled")
    result = TaskResult(
        task_id=str(t["task_id"]),
        status=status,
        reason=str(t.get("reason") or ""),
        followups=int(t.get("followups") or 0),
        duration=float(t.get("duration") or 0.0),
        usage=TokenUsage(
            input_tokens=int(tokens.get("input") or 0),
            cached_input_tokens=int(tokens.get("cached_input") or 0),
            output_tokens=int(tokens.get("output") or 0),
            reasoning_output_tokens=int(tokens.get("reasoning_output") or 0),
            total_tokens=int(tokens.get("total") or 0),
        )
        if tokens
        else None,
        session_id=t.get("session_id"),
        cwd=t.get("cwd"),
        reviews=int(t.get("reviews") or 0),
        final_text=str(t.get("final_message") or ""),
        start_head=t.get("start_head"),
        end_head=t.get("end_head"),
        commands=int(t.get("command_count") or 0),
        declined=int(t.get("declined_count") or 0),
        error_code=t.get("error_code"),
        fatal=bool(t.get("fatal")),
        transcript=Path(t["transcript"]) if t.get("transcript") else None,
    )
    worktree = t.get("worktree") or {}
    path = Path(worktree["path"]) if worktree.get("path") else None
    return BatchEntry(
        result=result,
        branch=t.get("branch"),
        worktree=path if worktree.get("kept") else None,
        worktree_path=path,
        prompt=t.get("prompt"),
        model=t.get("model"),
        provider=t.get("provider"),
        retries=t.get("retries"),
        resumed_from=t.get("resumed_from"),
        state=str(t.get("state") or "finished"),
        runs=int(t.get("runs") or 0),
    )
