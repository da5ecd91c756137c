"""``Watch``: the batch's sink in front of ``on_event``, feeding each task's recorder and spans."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agent_fleet.events import TextDelta
from agent_fleet.runner._ledger_views import REPORT_FILE, write_records
from agent_fleet.runner._otel import BatchTelemetry
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.runner._record import TaskRecorder
from agent_fleet.runner._types import EventSink, TaskEvent
from agent_fleet.runner.ledger import Ledger
from agent_fleet.runner.providers import default_model
from agent_fleet.runner.task import Task

if TYPE_CHECKING:
    from agent_fleet.runner.batch import BatchEntry, BatchTask
    from agent_fleet.runner.ray_backend import RayBatchResult

__all__ = ["Watch", "complete_ray", "planned_model"]

_E = TypeVar("_E", bound="BatchEntry")


def planned_model(template: Task, provider_name: str, options: Any) -> str | None:
    """The model a task runs unless its line names one: the template's, else its provider options'."""
    return template.spec.model or default_model(provider_name, options)


class Watch:
    """The sink in front of ``on_event``: per task a ``TaskRecorder`` and its spans (both skip text
    fragments, the bulk of a turn), so the summary and the traces see what the transcript sees."""

    def __init__(self, telemetry: BatchTelemetry, on_event: EventSink | None) -> None:
        self.telemetry = telemetry
        self.on_event = on_event
        self.recorders: dict[str, TaskRecorder] = {}
        self.spans: dict[str, Callable[[TaskEvent], None]] = {}
        #: tasks that share their working tree with others (their records say so)
        self.shared: set[str] = set()

    def recorder(self, task_id: str) -> TaskRecorder:
        recorder = self.recorders.get(task_id)
        if recorder is None:
            recorder = self.recorders[task_id] = TaskRecorder(
                task_id=task_id, shared_tree=task_id in self.shared
            )
            self.spans[task_id] = self.telemetry.task(task_id)
        return recorder

    def __call__(self, task_event: TaskEvent) -> None:
        if task_event.task_id and type(task_event.event) is not TextDelta:  # (no id: a batch's notice)
            self.recorder(task_event.task_id).observe(task_event)
            self.spans[task_event.task_id](task_event)
        if self.on_event is not None:
            self.on_event(task_event)

    def forget(self, task_id: str) -> None:
        """Drop a finished task's recorder and spans (its record is kept elsewhere: a long batch stays
        flat in memory)."""
        self.recorders.pop(task_id, None)
        self.spans.pop(task_id, None)

    def complete(self, entry: _E, task: BatchTask, planned: str | None, provider: str) -> _E:
        """``entry`` with what was recorded and planned for it (and its retries, where attempts count)."""
        recorder = self.recorders.get(task.id)
        attempts = getattr(entry, "attempts", 0)
        return replace(
            entry,
            recorded=recorder.record() if recorder is not None else None,
            prompt=task.prompt,
            model=task.model or planned,
            provider=provider,
            retries=attempts - 1 if isinstance(attempts, int) and attempts > 0 else entry.retries,
        )


def complete_ray(
    result: RayBatchResult, watch: Watch, out: Path, started_at: float, prices: PriceTable | None
) -> RayBatchResult:
    """A Ray batch's ``summary.json`` and ``report.html`` written from its ledger, with the batch's
    start time and prices (each entry was completed with what was recorded for it, and stored so, as
    its task ended: ``run_batch_ray(complete=...)``)."""
    ledger = Ledger.open(out)
    try:
        extra = {k: v for k, v in result.to_dict().items() if k in ("backend", "batch_id", "nodes")}
        path, summary = write_records(
            ledger,
            started_at=started_at,
            duration=result.duration,
            stopped=result.stopped,
            fatal=result.fatal,
            provider_pids=result.provider_pids,
            prices=prices,
            extra=extra,
        )
    finally:
        ledger.close()
    done = replace(result, prices=prices, report_path=out / REPORT_FILE, summary=summary, summary_path=path)
    watch.telemetry.end(summary)
    return done
