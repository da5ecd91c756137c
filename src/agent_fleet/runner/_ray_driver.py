"""The Ray backend's driver: the queue of a batch, attempts on the pool's actors, retries, results.

``RayBatch`` checks the tasks (``prepare``), then ``run`` connects, starts the ``ActorPool`` and keeps
dispatching queued tasks to free workers until every task has an entry. See ``ray_backend``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent_fleet.events import System
from agent_fleet.runner._batch_types import entry_from_summary
from agent_fleet.runner._ledger_views import write_records
from agent_fleet.runner._ray_jobs import plan_jobs, resumed_job
from agent_fleet.runner._ray_node import BRANCH_PREFIX, Events, Job, Outcome
from agent_fleet.runner._ray_pool import ActorPool, Worker, one_line
from agent_fleet.runner._ray_repo import PushOutcome, keep_bundle
from agent_fleet.runner._tasks_file import entry_object
from agent_fleet.runner._types import EventSink, TaskEvent, notice
from agent_fleet.runner.batch import BatchEntry, BatchTask
from agent_fleet.runner.ledger import Ledger
from agent_fleet.runner.ray_backend import RayBatchEntry, RayBatchResult, RayNode
from agent_fleet.runner.task import Task, TaskResult
from agent_fleet.runner.transcript import TranscriptWriter

__all__ = ["RayBatch"]

_CANCEL_GRACE = 15.0


@dataclass(slots=True, eq=False)
class _Pending:
    task: BatchTask
    job: Job
    attempt: int = 0
    avoid: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    branch_created: bool = False
    stale_worktree: str | None = None


@dataclass(frozen=True, slots=True)
class _Lost:
    """The attempt's actor or node died (or became unreachable): retried."""

    reason: str


@dataclass(frozen=True, slots=True)
class _Broken:
    """The node raised (a bug, not an outcome): not retried."""

    reason: str


class RayBatch:
    """One batch on a Ray cluster: ``prepare`` then ``run`` (see ``ray_backend.run_batch_ray``)."""

    def __init__(
        self,
        ray: Any,
        *,
        template: Task,
        out: Path,
        jobs: int,
        worktrees: bool,
        provider_name: str,
        options: Any,
        on_event: EventSink | None,
        on_result: Callable[[BatchEntry], None] | None,
        repo_url: str | None,
        push: bool,
        max_retries: int,
        start_timeout: float,
        work_root: str | None,
        meta: Mapping[str, Any] | None = None,
        resume_from: Ledger | None = None,
    ) -> None:
        self.ray = ray
        self.meta = meta
        self.resumed = resume_from
        self.ledger: Ledger | None = None  # the batch's record (see runner.ledger), from ``prepare`` on
        self.template = template
        self.out = out
        self.worktrees = worktrees
        self.on_event = on_event
        self.on_result = on_result
        self.repo_url = repo_url
        self.push = push
        self.max_retries = max_retries
        self.batch_id = time.strftime("%Y%m%d%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.pool = ActorPool(
            ray,
            batch_id=self.batch_id,
            jobs=jobs,
            provider_name=provider_name,
            options=options,
            start_timeout=start_timeout,
            work_root=work_root,
        )
        self.tasks: list[BatchTask] = []
        self.queue: deque[_Pending] = deque()
        self.running: dict[asyncio.Task[Outcome | _Lost | _Broken], tuple[_Pending, Worker]] = {}
        self.entries: dict[str, BatchEntry] = {}
        self.writers: dict[str, TranscriptWriter] = {}
        self.stopped: str | None = None
        self.fatal = False

    # -- before any work -----------------------------------------------------------------------------

    async def prepare(self, tasks: Sequence[BatchTask], cwd: str | os.PathLike[str] | None) -> None:
        """Check every task and resolve what each attempt needs (``UsageError`` on the first bad one).

        Resuming (``resume_from``): ``tasks`` are the ledger's; only those it has not finished are queued,
        interrupted ones with their session and the branch an earlier run made."""
        try:
            self.tasks = list(tasks)
            jobs = await plan_jobs(
                self.tasks,
                template=self.template,
                cwd=cwd,
                worktrees=self.worktrees,
                repo_url=self.repo_url,
                push=self.push,
                provider_name=self.pool.provider_name,
            )
            await asyncio.to_thread(self.out.mkdir, parents=True, exist_ok=True)
        except BaseException:
            if self.resumed is not None:
                self.resumed.close()
            raise
        pairs = zip(self.tasks, jobs, strict=True)
        if self.resumed is not None:
            self.ledger = self.resumed
            rows = {row.id: row for row in self.ledger.rows(states=("queued", "running", "interrupted"))}
            self.queue = deque(
                _Pending(task=t, job=resumed_job(job, rows[t.id], self.out))
                for t, job in pairs
                if t.id in rows
            )
        else:
            self.queue = deque(_Pending(task=t, job=job) for t, job in pairs)
            entries = [(t.id, t.line, entry_object(t)) for t in tasks]
            self.ledger = Ledger.create(self.out, entries, meta=self.meta)

    # -- the run ---------------------------------------------------------------------------------------

    async def run(self, address: str | None, stop: asyncio.Event | None) -> RayBatchResult:
        started = time.monotonic()
        await self.pool.connect(address)
        try:
            try:
                await self.pool.start()
            except BaseException:
                if self.ledger is not None and self.resumed is None:
                    self.ledger.discard()  # nothing ran: leave no record that would refuse a new run
                    self.ledger = None
                elif self.ledger is not None:
                    self.ledger.close()
                    self.ledger = None
                raise
            try:
                await self._loop(stop)
            except BaseException:
                await self._abort()
                raise
            finally:
                for writer in self.writers.values():
                    writer.close()
                await self.pool.close()
                result = self._result(time.monotonic() - started)  # summary.json, even when cancelled
        finally:
            await self.pool.disconnect()
        return result

    async def _loop(self, stop: asyncio.Event | None) -> None:
        stop_waiter: asyncio.Task[Any] | None = None
        if stop is not None:
            stop_waiter = asyncio.get_running_loop().create_task(stop.wait())
        try:
            while True:
                if self.stopped is None:
                    self._dispatch()
                if not self.running:
                    if not self.queue or self.stopped is not None:
                        return  # a replacement actor still starting is not waited for
                    if not self.pool.starting:
                        self._fail_queue("no Ray node is left to run it")
                        return
                waiting: set[asyncio.Future[Any]] = {*self.running, *self.pool.starting}
                if stop_waiter is not None:
                    waiting.add(stop_waiter)
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    if finished is stop_waiter:
                        stop_waiter = None
                        self._request_stop("stopped by the user")
                    elif finished in self.pool.starting:
                        self.pool.starting.discard(finished)
                        worker = None if finished.cancelled() or finished.exception() else finished.result()
                        if worker is not None and self.stopped is not None:
                            worker.actor.stop.remote()  # it came up after the batch was told to stop
                    else:
                        pending, worker = self.running.pop(finished)  # type: ignore[call-overload]
                        worker.running -= 1
                        self._settle(pending, worker, finished.result())
        finally:
            if stop_waiter is not None:
                stop_waiter.cancel()

    def _dispatch(self) -> None:
        for pending in list(self.queue):
            if not self.pool.has_free_slot():
                return
            worker = self.pool.pick(pending.avoid)
            if worker is None:
                continue
            self.queue.remove(pending)
            pending.attempt += 1
            worker.running += 1
            worker.placed += 1
            worker.tasks.append(pending.task.id)
            job = replace(
                pending.job,
                attempt=pending.attempt,
                reset_branch=pending.branch_created and not pending.job.reuse_branch,
                stale_worktree=pending.stale_worktree,
            )
            if self.ledger is not None:
                self.ledger.start(
                    pending.task.id,
                    branch=BRANCH_PREFIX + pending.task.id if job.worktree else None,
                    worktree=None,  # on the node: its runner.worktree notice says where
                    transcript=str(self._writer(pending.task.id).path),
                )
            attempt = asyncio.get_running_loop().create_task(
                self._attempt(pending, worker, job), name=f"ray:{pending.task.id}:{pending.attempt}"
            )
            self.running[attempt] = (pending, worker)

    async def _attempt(self, pending: _Pending, worker: Worker, job: Job) -> Outcome | _Lost | _Broken:
        ray = self.ray
        stream = worker.actor.run.options(num_returns="streaming").remote(job)
        outcome: Outcome | None = None
        try:
            async for ref in stream:
                item = await ref
                if isinstance(item, Events):
                    for task_event in item.events:
                        self._deliver(pending, task_event)
                elif isinstance(item, Outcome):
                    outcome = item
        except ray.exceptions.RayTaskError as exc:
            return _Broken(f"the task raised on {worker.info.hostname}: {one_line(exc, 500)}")
        except ray.exceptions.RayError as exc:
            return _Lost(f"{type(exc).__name__}: {one_line(exc, 500)}")
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                ray.cancel(stream)
            raise
        if outcome is None:
            return _Broken(f"the node {worker.info.hostname} ended the task without a result")
        return outcome

    def _writer(self, task_id: str) -> TranscriptWriter:
        writer = self.writers.get(task_id)
        if writer is None:
            writer = self.writers[task_id] = TranscriptWriter(self.out / f"{task_id}.jsonl")
        return writer

    def _deliver(self, pending: _Pending, task_event: TaskEvent) -> None:
        event = task_event.event
        if isinstance(event, System) and event.subtype == "runner.worktree":
            pending.branch_created = True
            pending.stale_worktree = str(event.data.get("path") or "") or None
        if isinstance(event, System) and event.subtype == "runner.session" and self.ledger is not None:
            session_id = event.data.get("session_id")
            if isinstance(session_id, str):
                self.ledger.session(pending.task.id, session_id)
        self._emit(task_event)

    def _settle(self, pending: _Pending, worker: Worker, outcome: Outcome | _Lost | _Broken) -> None:
        task_id = pending.task.id
        match outcome:
            case Outcome(result=result, branch=branch, worktree_kept=kept, bundle=bundle, push=push):
                bundle_path: Path | None = None
                if bundle is not None:
                    bundle_path = keep_bundle(self.out, task_id, bundle)  # an earlier one is kept aside
                elif pending.job.earlier_bundle is not None:
                    bundle_path = self.out / f"{task_id}.bundle"  # none came back: the earlier one holds all
                self._finish(
                    pending,
                    worker,
                    replace(result, transcript=self._writer(task_id).path),
                    branch=branch,
                    kept=Path(kept) if kept is not None else None,
                    bundle=bundle_path,
                    push=push,
                )
            case _Lost(reason=reason):
                self.pool.lost(worker, reason, replace=self.stopped is None)
                where = f"{worker.info.hostname} ({worker.info.node_id[:12]})"
                message = f"attempt {pending.attempt} on {where}: the Ray actor died mid-task: {reason}"
                pending.failures.append(message)
                retry = self.stopped is None and pending.attempt <= self.max_retries
                self._emit(
                    notice(
                        task_id,
                        "attempt_failed",
                        attempt=pending.attempt,
                        node_id=worker.info.node_id,
                        hostname=worker.info.hostname,
                        reason=message,
                        retry=retry,
                    )
                )
                if retry:
                    pending.avoid.add(worker.info.node_id)
                    self.queue.appendleft(pending)
                    return
                tries = f"{pending.attempt} attempt(s)"
                failed = TaskResult(
                    task_id=task_id,
                    status="failed",
                    reason=f"{message} (gave up after {tries})",
                    error_code="node_lost",
                    transcript=self._writer(task_id).path,
                )
                self._emit(notice(task_id, "finished", **_finished_data(failed)))
                self._finish(pending, worker, failed)
            case _Broken(reason=reason):
                error = TaskResult(
                    task_id=task_id,
                    status="error",
                    reason=reason,
                    error_code="internal_error",
                    transcript=self._writer(task_id).path,
                )
                self._emit(notice(task_id, "finished", **_finished_data(error)))
                self._finish(pending, worker, error)

    def _emit(self, task_event: TaskEvent) -> None:
        self._writer(task_event.task_id).write(task_event)
        if self.on_event is not None:
            self.on_event(task_event)

    def _finish(
        self,
        pending: _Pending,
        worker: Worker,
        result: TaskResult,
        *,
        branch: str | None = None,
        kept: Path | None = None,
        bundle: Path | None = None,
        push: PushOutcome | None = None,
    ) -> None:
        task_id = pending.task.id
        if branch is None and pending.branch_created:
            branch = BRANCH_PREFIX + task_id
        entry = RayBatchEntry(
            result=result,
            branch=branch,
            worktree=kept,
            node=worker.info.hostname,
            node_id=worker.info.node_id,
            attempts=pending.attempt,
            failures=tuple(pending.failures),
            bundle=bundle,
            push=push,
        )
        self.entries[task_id] = entry
        self._record(entry)
        writer = self.writers.pop(task_id, None)
        if writer is not None:
            writer.close()
        if result.fatal and self.stopped is None:
            self._request_stop(f"fatal error in task {task_id}: {result.reason}", fatal=True)
        if self.on_result is not None:
            self.on_result(entry)

    def _fail_queue(self, why: str) -> None:
        while self.queue:
            pending = self.queue.popleft()
            reason = "; ".join([*pending.failures, why]) if pending.failures else why
            result = TaskResult(
                task_id=pending.task.id,
                status="failed",
                reason=reason,
                error_code="node_lost",
                transcript=self.writers[pending.task.id].path if pending.task.id in self.writers else None,
            )
            entry = RayBatchEntry(result=result, attempts=pending.attempt, failures=tuple(pending.failures))
            self.entries[pending.task.id] = entry
            self._record(entry)
            writer = self.writers.pop(pending.task.id, None)
            if writer is not None:
                writer.close()
            if self.on_result is not None:
                self.on_result(entry)

    def _record(self, entry: RayBatchEntry) -> None:
        if self.ledger is not None:
            self.ledger.finish(
                entry.result.task_id,
                result=entry.to_dict(),
                # The turns tried, as on a local batch: every attempt on the cluster (one that died tried
                # its first turn) plus the turn-level retries of the last.
                attempts=entry.attempts + entry.result.retries,
                worktree_kept=str(entry.worktree) if entry.worktree is not None else None,
            )

    def _request_stop(self, reason: str, *, fatal: bool = False) -> None:
        if self.stopped is not None:
            return
        self.stopped = reason
        self.fatal = fatal
        self.pool.stop_all()

    # -- the end ---------------------------------------------------------------------------------------

    async def _abort(self) -> None:
        """Cancelled: stop the nodes, give running tasks a moment to clean up, then cancel them."""
        self._request_stop("cancelled")
        running = set(self.running)
        if running:
            with contextlib.suppress(BaseException):
                await asyncio.wait(running, timeout=_CANCEL_GRACE)
        for attempt in running:
            if not attempt.done():
                attempt.cancel()
        if running:
            with contextlib.suppress(BaseException):
                await asyncio.wait(running, timeout=_CANCEL_GRACE)
        for attempt in running:
            pending, worker = self.running.pop(attempt)
            worker.running -= 1
            if attempt.done() and not attempt.cancelled() and attempt.exception() is None:
                self._settle(pending, worker, attempt.result())
            else:
                result = TaskResult(
                    task_id=pending.task.id,
                    status="cancelled",
                    reason="cancelled before it finished (the batch was cancelled)",
                    error_code="cancelled",
                    transcript=self._writer(pending.task.id).path,
                )
                self._finish(pending, worker, result)
        self.pool.cancel_starting()

    def _result(self, duration: float) -> RayBatchResult:
        ordered: list[BatchEntry] = []
        for t in self.tasks:
            entry = self.entries.get(t.id)
            if entry is None:
                reason = f"not started: {self.stopped or 'the batch stopped'}"
                entry = RayBatchEntry(result=TaskResult(task_id=t.id, status="cancelled", reason=reason))
            ordered.append(entry)
        nodes = tuple(
            RayNode(
                node_id=w.info.node_id,
                hostname=w.info.hostname,
                actor=w.name,
                provider_pid=w.info.provider_pid,
                tasks=tuple(w.tasks),
                lost=w.lost,
            )
            for w in self.pool.workers
            if w.info.pid
        )
        result = RayBatchResult(
            entries=tuple(ordered),
            duration=duration,
            stopped=self.stopped,
            fatal=self.fatal,
            summary_path=self.out / "summary.json",
            provider_pids=tuple(sorted({n.provider_pid for n in nodes if n.provider_pid is not None})),
            batch_id=self.batch_id,
            nodes=nodes,
        )
        if self.ledger is None:
            text = json.dumps(result.to_dict(), indent=2) + "\n"
            (self.out / "summary.json").write_text(text, encoding="utf-8")
            return result
        extra = {"backend": "ray", "batch_id": self.batch_id, "nodes": [n.to_dict() for n in nodes]}
        try:
            _, payload = write_records(
                self.ledger,
                started_at=None,
                duration=duration,
                stopped=self.stopped,
                fatal=self.fatal,
                provider_pids=result.provider_pids,
                extra=extra,
            )
        finally:
            self.ledger.close()
            self.ledger = None
        # Tasks this run did not run (a resume keeps what earlier runs finished) are as the ledger says.
        entries = tuple(self.entries.get(t["task_id"]) or entry_from_summary(t) for t in payload["tasks"])
        return replace(result, entries=entries, summary=payload)


def _finished_data(result: TaskResult) -> dict[str, Any]:
    return {k: v for k, v in result.to_dict().items() if k != "final_text"}
