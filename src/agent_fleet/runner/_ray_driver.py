"""The Ray backend's driver: the queue of a batch, attempts on the pool's actors, fencing, retries, results.

``RayBatch`` checks the tasks (``prepare``), then ``run`` connects, starts the ``ActorPool`` and keeps
dispatching queued tasks to free workers until every task has an entry, asking the actors for
heartbeats as it goes. See ``ray_backend``.

Epochs: every attempt gets the next number of the batch's run (``Job.epoch``); the task's current
epoch is its newest attempt's. An attempt's result is accepted only while its epoch is current and its
node was not given up: a lost node's attempts are abandoned at once (``Worker.gone``), recorded with
what they did, and their tasks queued again. What leaves a node is published by the driver for the
accepted attempt only: in a shared repository the task's branch is moved to the attempt's own branch
(``publish_branch``); with ``--push`` a node pushes the accepted commit (``NodeRunner.push``; if that
node is lost meanwhile, another node pushes it from the bundle). An abandoned attempt therefore never
moves the task's branch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from agent_fleet.events import System, ToolUse
from agent_fleet.runner import _git
from agent_fleet.runner._batch_types import entry_from_summary
from agent_fleet.runner._ledger_views import write_records
from agent_fleet.runner._ray_fence import poll_interval
from agent_fleet.runner._ray_jobs import plan_jobs, resumed_job
from agent_fleet.runner._ray_node import BRANCH_PREFIX, Events, Job, Outcome
from agent_fleet.runner._ray_pool import ActorPool, Excluded, Worker, one_line, where
from agent_fleet.runner._ray_repo import PushOutcome, branch_tip, keep_bundle, publish_branch, repo_lock
from agent_fleet.runner._tasks_file import entry_object
from agent_fleet.runner._types import EventSink, TaskEvent, notice
from agent_fleet.runner.batch import BatchEntry, BatchTask
from agent_fleet.runner.ledger import Ledger
from agent_fleet.runner.ray_backend import RayBatchEntry, RayBatchResult, RayNode
from agent_fleet.runner.task import Task, TaskResult
from agent_fleet.runner.transcript import TranscriptWriter

__all__ = ["ATTEMPT_PREFIX", "RayBatch"]

#: Shared-path mode: attempt ``n`` of task ``id`` works on branch ``agent-fleet-attempts/<id>/<run>.<n>``.
ATTEMPT_PREFIX = "agent-fleet-attempts/"

_CANCEL_GRACE = 15.0
_T = TypeVar("_T")


@dataclass(slots=True, eq=False)
class _Pending:
    task: BatchTask
    job: Job
    attempt: int = 0
    epoch: int = 0
    avoid: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    branch_created: bool = False
    stale_worktree: str | None = None
    #: every attempt on the cluster and what it did (see ``_Try``), the current one last
    tries: list[_Try] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class _Try:
    """One attempt as the driver saw it: where, what it did (from its events), how it ended."""

    attempt: int
    epoch: int
    node_id: str
    hostname: str
    actor: str
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    outcome: str = "running"  # accepted | abandoned | lost | provider_failed | error | refused
    reason: str | None = None
    session_id: str | None = None
    turns: int = 0
    commands: int = 0
    events: int = 0
    attempt_branch: str | None = None
    worktree: str | None = None
    commit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "epoch": self.epoch,
            "node_id": self.node_id,
            "hostname": self.hostname,
            "actor": self.actor,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "outcome": self.outcome,
            "reason": self.reason,
            "session_id": self.session_id,
            "turns": self.turns,
            "commands": self.commands,
            "events": self.events,
            "attempt_branch": self.attempt_branch,
            "worktree": self.worktree,
            "commit": self.commit,
        }


@dataclass(frozen=True, slots=True)
class _Lost:
    """The attempt is lost with its node, retried: its actor died (``actor_died``), the driver gave the
    node up while it ran (``abandoned``), or the node fenced itself (``fenced``)."""

    reason: str
    actor_died: bool = False
    abandoned: bool = False
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class _Broken:
    """The node raised (a bug, not an outcome): not retried."""

    reason: str


class _Gone(Exception):
    """The attempt's worker was given up while the driver waited for it."""


_Ending = Outcome | _Lost | _Broken


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
        fence_timeout: float,
        exclude_nodes: Sequence[str] = (),
        meta: Mapping[str, Any] | None = None,
        resume_from: Ledger | None = None,
        complete: Callable[[RayBatchEntry], RayBatchEntry] | None = None,
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
        self.complete = complete
        self.repo_url = repo_url
        self.push = push
        self.max_retries = max_retries
        self.fence_timeout = fence_timeout
        self.batch_id = time.strftime("%Y%m%d%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.pool = ActorPool(
            ray,
            batch_id=self.batch_id,
            jobs=jobs,
            provider_name=provider_name,
            options=options,
            start_timeout=start_timeout,
            work_root=work_root,
            fence_timeout=fence_timeout,
            exclude=exclude_nodes,
        )
        self.tasks: list[BatchTask] = []
        self.planned: dict[str, Job] = {}
        #: attempts an earlier run started in a shared repository and never ended (it died): cleared
        self.stale: list[tuple[str, dict[str, Any]]] = []
        self.queue: deque[_Pending] = deque()
        self.running: dict[asyncio.Task[_Ending], tuple[_Pending, Worker]] = {}
        self.entries: dict[str, RayBatchEntry] = {}
        self.writers: dict[str, TranscriptWriter] = {}
        self.epochs = 0
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
        self.planned = {t.id: job for t, job in zip(self.tasks, jobs, strict=True)}
        pairs = zip(self.tasks, jobs, strict=True)
        if self.resumed is not None:
            self.ledger = self.resumed
            rows = {row.id: row for row in self.ledger.rows(states=("queued", "running", "interrupted"))}
            self.stale = [(task_id, d) for task_id in rows for d in _unended_attempts(self.ledger, task_id)]
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
                excluded = await self.pool.start()
            except BaseException:
                if self.ledger is not None and self.resumed is None:
                    self.ledger.discard()  # nothing ran: leave no record that would refuse a new run
                    self.ledger = None
                elif self.ledger is not None:
                    self.ledger.close()
                    self.ledger = None
                raise
            for node in excluded:
                self._node_notice(node.node_id, node.hostname, node.reason, [])
            try:
                await self._loop(stop)
            except BaseException:
                await self._abort()
                raise
            finally:
                for writer in self.writers.values():
                    writer.close()
                with contextlib.suppress(Exception):
                    await self._settle_abandoned(wait=self.stopped != "cancelled")
                await self.pool.close()
                result = self._result(time.monotonic() - started)  # summary.json, even when cancelled
        finally:
            await self.pool.disconnect()
        return result

    async def _loop(self, stop: asyncio.Event | None) -> None:
        stop_waiter: asyncio.Task[Any] | None = None
        if stop is not None:
            stop_waiter = asyncio.get_running_loop().create_task(stop.wait())
        poll = poll_interval(self.fence_timeout)
        try:
            while True:
                self._check_nodes()
                if self.stopped is None:
                    self._dispatch()
                if not self.running:
                    if not self.queue or self.stopped is not None:
                        self._interrupt_queue()
                        return  # a replacement actor still starting is not waited for
                    if not self.pool.starting and not any(w.alive for w in self.pool.workers):
                        self._request_stop(self._no_node_left(), fatal=True)
                        self._interrupt_queue()
                        return
                waiting: set[asyncio.Future[Any]] = {*self.running, *self.pool.starting}
                if stop_waiter is not None:
                    waiting.add(stop_waiter)
                done, _ = await asyncio.wait(waiting, timeout=poll, return_when=asyncio.FIRST_COMPLETED)
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

    def _check_nodes(self) -> None:
        """Heartbeats: give up every node that fenced itself or was not heard within the bound."""
        for worker, reason, actor_died in self.pool.heartbeat_round():
            self._node_lost(worker, reason, actor_died=actor_died)

    def _node_lost(self, worker: Worker, reason: str, *, actor_died: bool = False) -> None:
        """No more work on ``worker``'s node; its running attempts notice (``gone``) and are abandoned."""
        replace_actor = actor_died and self.stopped is None
        if self.pool.lost(worker, reason, replace=replace_actor):
            running = sorted(p.task.id for p, w in self.running.values() if w is worker)
            self._node_notice(worker.info.node_id, worker.info.hostname, reason, running)

    def _node_notice(self, node_id: str, hostname: str, reason: str, running: list[str]) -> None:
        """A batch-level notice (its ``task_id`` is empty): a node no more work goes to, and why."""
        if self.on_event is not None:
            self.on_event(
                notice(
                    "",
                    "node_excluded",
                    node_id=node_id,
                    hostname=hostname,
                    where=where(node_id, hostname),
                    reason=reason,
                    running=running,
                )
            )

    def _no_node_left(self) -> str:
        lost = [f"{w.where}: {w.lost}" for w in self.pool.workers if w.lost]
        lost += [f"{where(e.node_id, e.hostname)}: {e.reason}" for e in self.pool.excluded]
        return "no Ray node is left to run the batch (" + "; ".join(lost) + ")"

    def _dispatch(self) -> None:
        for pending in list(self.queue):
            if not self.pool.has_free_slot():
                return
            worker = self.pool.pick(pending.avoid)
            if worker is None:
                continue
            self.queue.remove(pending)
            pending.attempt += 1
            self.epochs += 1
            pending.epoch = self.epochs
            worker.running += 1
            worker.placed += 1
            worker.tasks.append(pending.task.id)
            shared = pending.job.worktree and not pending.job.clone
            job = replace(
                pending.job,
                attempt=pending.attempt,
                epoch=pending.epoch,
                reset_branch=pending.branch_created and not pending.job.reuse_branch and not shared,
                stale_worktree=pending.stale_worktree,
                attempt_branch=(
                    f"{ATTEMPT_PREFIX}{pending.task.id}/{self.batch_id}.{pending.attempt}" if shared else None
                ),
            )
            pending.tries.append(
                _Try(
                    attempt=pending.attempt,
                    epoch=pending.epoch,
                    node_id=worker.info.node_id,
                    hostname=worker.info.hostname,
                    actor=worker.name,
                    attempt_branch=job.attempt_branch,
                )
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

    async def _attempt(self, pending: _Pending, worker: Worker, job: Job) -> _Ending:
        """Stream one attempt; its outcome, published (see the module docstring). The attempt is
        abandoned the moment its worker is given up (``_Lost(abandoned=True)``): nothing more of it is
        taken, whatever its node still sends."""
        ray = self.ray
        stream = worker.actor.run.options(num_returns="streaming").remote(job)
        outcome: Outcome | None = None
        try:
            async for item in _stream(stream, worker.gone):
                if isinstance(item, Events):
                    for task_event in item.events:
                        self._deliver(pending, task_event)
                elif isinstance(item, Outcome):
                    outcome = item
        except _Gone:
            with contextlib.suppress(Exception):
                ray.cancel(stream)
            return _Lost(f"its node was given up: {worker.lost}", abandoned=True)
        except ray.exceptions.RayTaskError as exc:
            return _Broken(f"the task raised on {worker.info.hostname}: {one_line(exc, 500)}")
        except ray.exceptions.RayError as exc:
            return _Lost(f"{type(exc).__name__}: {one_line(exc, 500)}", actor_died=True)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                ray.cancel(stream)
            raise
        if outcome is None:
            return _Broken(f"the node {worker.info.hostname} ended the task without a result")
        if outcome.epoch != pending.epoch:
            return _Broken(f"the node {worker.info.hostname} answered for another attempt")
        if outcome.fenced is not None:
            return _Lost(f"the node fenced itself: {outcome.fenced}", fenced=True)
        if outcome.result.fatal:
            return outcome  # the node's provider failed: nothing of it is published (see _settle)
        return await self._publish(pending, worker, job, outcome)

    async def _publish(self, pending: _Pending, worker: Worker, job: Job, outcome: Outcome) -> Outcome:
        """The accepted attempt's work leaves its node: the task's branch moved to it (shared repository),
        its commits pushed (``--push``; not for a stopped run: ``--resume`` pushes it)."""
        result = outcome.result
        task_id = pending.task.id
        if not job.clone and job.repo is not None and outcome.branch is not None and outcome.tip:
            kept = outcome.worktree_kept is not None
            try:
                await publish_branch(
                    Path(job.repo),
                    outcome.branch,
                    outcome.tip,
                    base=outcome.base,
                    attempt_branch=None if kept else outcome.attempt_branch,
                )
            except _git.GitError as exc:
                reason = f"cannot set {outcome.branch} to the attempt's commit {outcome.tip[:12]}: {exc}"
                result = replace(result, status="failed", reason=reason, error_code="worktree_failed")
            return replace(outcome, result=result)
        pushed: PushOutcome | None = None
        if (
            job.push
            and job.repo is not None
            and job.start is not None
            and outcome.branch is not None
            and outcome.tip
            and outcome.bundle is not None  # commits after the start: something to push
            and result.status != "cancelled"
        ):
            pushed = await self._push(worker, job, outcome)
            self._emit(notice(task_id, "push", **pushed.to_dict()))
            result = _after_push(result, pushed, bundled=True)
        return replace(outcome, result=result, push=pushed)

    async def _push(self, first: Worker, job: Job, outcome: Outcome) -> PushOutcome:
        """Have a node push the accepted commit: the node that ran it, else (lost) any live one, which
        takes the commits from the bundle. Pushing a commit the remote already has succeeds, so a push
        tried again after a node was lost mid-push never fails for that."""
        assert job.repo is not None and job.start is not None and outcome.branch and outcome.tip
        tried: list[Worker] = []
        errors: list[str] = []
        worker: Worker | None = first
        while worker is not None:
            tried.append(worker)
            call = worker.actor.push.remote(job.repo, outcome.branch, job.start, outcome.tip, outcome.bundle)
            try:
                pushed: PushOutcome = await _unless_gone(call, worker.gone)
                return pushed
            except _Gone:
                errors.append(f"{worker.where} was lost")
            except self.ray.exceptions.RayError as exc:
                errors.append(f"{worker.where}: {one_line(exc, 200)}")
            worker = self.pool.any_alive(besides=tried)
        error = "no node could push it (" + "; ".join(errors) + ")"
        return PushOutcome(branch=outcome.branch, commit=outcome.tip, pushed=False, error=error)

    def _writer(self, task_id: str) -> TranscriptWriter:
        writer = self.writers.get(task_id)
        if writer is None:
            writer = self.writers[task_id] = TranscriptWriter(self.out / f"{task_id}.jsonl")
        return writer

    def _deliver(self, pending: _Pending, task_event: TaskEvent) -> None:
        event = task_event.event
        current = pending.tries[-1]
        current.events += 1
        if isinstance(event, ToolUse) and event.name == "shell" and not event.synthetic:
            current.commands += 1
        if isinstance(event, System) and event.subtype == "runner.worktree":
            pending.branch_created = True
            pending.stale_worktree = current.worktree = str(event.data.get("path") or "") or None
            if current.attempt_branch is not None and self.ledger is not None:
                # Where the attempt works, as soon as it does: a run that dies leaves it to the next.
                self.ledger.annotate(pending.task.id, "attempt_started", current.to_dict())
        if isinstance(event, System) and task_event.source == "runner" and self.ledger is not None:
            if event.subtype == "runner.session":
                session_id = event.data.get("session_id")
                if isinstance(session_id, str):
                    current.session_id = session_id
                    self.ledger.session(pending.task.id, session_id)
            elif event.subtype in ("runner.started", "runner.retry"):
                current.turns += 1
                self.ledger.attempt(pending.task.id)  # as it starts, as on a local batch
        self._emit(task_event)

    def _settle(self, pending: _Pending, worker: Worker, ending: _Ending) -> None:
        task_id = pending.task.id
        current = pending.tries[-1]
        current.ended_at = time.time()
        match ending:
            case Outcome(result=result) if result.fatal:
                # The node's provider failed (credential refused, app-server died): the node is bad, a
                # lost node; the task goes back to the queue like a lost node's.
                current.outcome, current.reason = "provider_failed", result.reason
                current.commit = ending.tip
                self._node_lost(worker, f"its provider failed: {result.reason}")
                self._retry_or_fail(pending, worker, f"its provider failed: {result.reason}", last=ending)
            case Outcome(result=result, branch=branch, worktree_kept=kept, bundle=bundle, push=push):
                current.outcome, current.commit = "accepted", ending.tip
                if ending.attempt_branch is not None and kept is None:
                    current.attempt_branch = None  # merged into the task's branch and deleted
                bundle_path: Path | None = None
                if bundle is not None:
                    bundle_path = keep_bundle(self.out, task_id, bundle)  # an earlier one is kept aside
                elif pending.job.earlier_bundle is not None:
                    bundle_path = self.out / f"{task_id}.bundle"  # none came back: the earlier one holds all
                self._emit(notice(task_id, "finished", **_finished_data(result)))  # after publishing
                self._finish(
                    pending,
                    worker,
                    replace(result, transcript=self._writer(task_id).path),
                    branch=branch,
                    kept=Path(kept) if kept is not None else None,
                    bundle=bundle_path,
                    push=push,
                    diff=ending.diff,
                )
            case _Lost(reason=reason, actor_died=actor_died, abandoned=abandoned, fenced=fenced):
                current.outcome = "abandoned" if abandoned or fenced else "lost"
                current.reason = reason
                if fenced:
                    self._node_lost(worker, reason)
                elif not abandoned:
                    self._node_lost(worker, f"its actor died: {reason}", actor_died=actor_died)
                self._retry_or_fail(pending, worker, reason)
            case _Broken(reason=reason):
                current.outcome, current.reason = "error", reason
                error = TaskResult(
                    task_id=task_id,
                    status="error",
                    reason=reason,
                    error_code="internal_error",
                    transcript=self._writer(task_id).path,
                )
                self._emit(notice(task_id, "finished", **_finished_data(error)))
                self._finish(pending, worker, error)

    def _retry_or_fail(
        self, pending: _Pending, worker: Worker, why: str, last: Outcome | None = None
    ) -> None:
        """The attempt on ``worker`` is lost (``why``): record it and queue the task again, to another
        node, within the retries; else the task fails (with the last attempt's own result if it had
        one)."""
        task_id = pending.task.id
        message = f"attempt {pending.attempt} on {worker.where}: {why}"
        pending.failures.append(message)
        self._note_attempt(pending)
        retry = self.stopped is None and pending.attempt <= self.max_retries
        self._emit(
            notice(
                task_id,
                "attempt_failed",
                attempt=pending.attempt,
                epoch=pending.epoch,
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
        if last is not None:
            failed = replace(last.result, transcript=self._writer(task_id).path)
        elif self.stopped is not None:
            failed = TaskResult(
                task_id=task_id,
                status="cancelled",
                reason=f"{message} (not run again: {self.stopped})",
                error_code="cancelled",
                transcript=self._writer(task_id).path,
            )
        else:
            failed = TaskResult(
                task_id=task_id,
                status="failed",
                reason=f"{message} (gave up after {pending.attempt} attempt(s))",
                error_code="node_lost",
                transcript=self._writer(task_id).path,
            )
        self._emit(notice(task_id, "finished", **_finished_data(failed)))
        self._finish(pending, worker, failed, recorded=True)

    def _note_attempt(self, pending: _Pending) -> None:
        """An attempt that was not accepted, in the task's ledger history, with what it did."""
        if self.ledger is not None:
            self.ledger.annotate(pending.task.id, "attempt", pending.tries[-1].to_dict())

    def _emit(self, task_event: TaskEvent) -> None:
        self._writer(task_event.task_id).write(task_event)
        if self.on_event is not None:
            self.on_event(task_event)

    def _finish(
        self,
        pending: _Pending,
        worker: Worker | None,
        result: TaskResult,
        *,
        branch: str | None = None,
        kept: Path | None = None,
        bundle: Path | None = None,
        push: PushOutcome | None = None,
        recorded: bool = False,
        diff: str | None = None,
    ) -> None:
        task_id = pending.task.id
        if branch is None and pending.branch_created and pending.job.clone:
            branch = BRANCH_PREFIX + task_id
        if pending.tries and not recorded:
            self._note_attempt(pending)
        last = pending.tries[-1] if pending.tries else None
        resumed = pending.job.resume_session
        entry = RayBatchEntry(
            result=result,
            branch=branch,
            worktree=kept,
            worktree_path=Path(last.worktree) if last is not None and last.worktree else None,
            resumed_from=resumed if resumed is not None and result.session_id == resumed else None,
            node=worker.info.hostname if worker is not None else None,
            node_id=worker.info.node_id if worker is not None else None,
            attempts=pending.attempt,
            failures=tuple(pending.failures),
            bundle=bundle,
            push=push,
            cluster_attempts=tuple(t.to_dict() for t in pending.tries),
        )
        if self.complete is not None:
            entry = self.complete(entry)
        if diff is not None and entry.recorded is not None:
            entry = replace(entry, recorded={**entry.recorded, "diff": diff})  # the final one, as locally
        self.entries[task_id] = entry
        self._record(entry)
        writer = self.writers.pop(task_id, None)
        if writer is not None:
            writer.close()
        if self.on_result is not None:
            self.on_result(entry)

    def _interrupt_queue(self) -> None:
        """The batch stops with tasks queued again after a lost attempt: they end interrupted (a
        ``--resume`` runs them); those never started stay queued."""
        while self.queue:
            pending = self.queue.popleft()
            if pending.attempt == 0:
                continue
            reason = f"not run again: {self.stopped or 'the batch stopped'}"
            if pending.failures:
                reason = f"{pending.failures[-1]} ({reason})"
            result = TaskResult(
                task_id=pending.task.id,
                status="cancelled",
                reason=reason,
                error_code="cancelled",
                session_id=pending.tries[-1].session_id if pending.tries else None,
                transcript=self._writer(pending.task.id).path,
            )
            self._emit(notice(pending.task.id, "finished", **_finished_data(result)))
            self._finish(pending, None, result, recorded=True)

    def _record(self, entry: RayBatchEntry) -> None:
        if self.ledger is not None:
            self.ledger.finish(
                entry.result.task_id,
                result=entry.to_dict(),
                attempts=0,  # each turn was counted as it started (_deliver), as on a local batch
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
                await self._wait(running, _CANCEL_GRACE)
        for attempt in running:
            if not attempt.done():
                attempt.cancel()
        if running:
            with contextlib.suppress(BaseException):
                await self._wait(running, _CANCEL_GRACE)
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
                pending.tries[-1].outcome = "cancelled"
                self._finish(pending, worker, result)
        self._interrupt_queue()
        self.pool.cancel_starting()

    async def _wait(self, futures: set[asyncio.Task[_Ending]], seconds: float) -> None:
        """Wait for ``futures`` (all of them) up to ``seconds``, asking for heartbeats meanwhile: a node
        not asked for long fences itself (see ``_ray_fence``)."""
        deadline = time.monotonic() + seconds
        poll = poll_interval(self.fence_timeout)
        while time.monotonic() < deadline and (not futures or not all(f.done() for f in futures)):
            self.pool.heartbeat_round()
            step = min(poll, max(0.0, deadline - time.monotonic()))
            if futures:
                await asyncio.wait(futures, timeout=step)
            else:
                await asyncio.sleep(step)

    async def _settle_abandoned(self, *, wait: bool) -> None:
        """Shared-path mode, for each attempt that was not accepted, once its node is surely stopped
        (the fencing bound after it was given up; ``wait`` False: only those whose actor is dead):
        its worktree is removed (the task ran again; whether it held uncommitted changes is recorded),
        and its own branch is deleted unless it holds commits (then kept, and recorded with the
        attempt)."""
        found: list[tuple[str, int, Job]] = []
        latest = 0.0
        for task_id, entry in self.entries.items():
            job = self.planned.get(task_id)
            if job is None or job.repo is None or job.clone or not job.worktree:
                continue
            for n, t in enumerate(entry.cluster_attempts):
                if t.get("outcome") != "accepted" and t.get("attempt_branch"):
                    found.append((task_id, n, job))
                    if t.get("outcome") != "lost":  # (lost: its actor died, nothing of it runs)
                        latest = max(latest, float(t.get("ended_at") or 0.0) + self.fence_timeout)
        if not found and not self.stale:
            return
        if time.time() < latest:
            if not wait:
                return
            await self._wait(set(), latest - time.time())
        for task_id, n, job in found:
            entry = self.entries[task_id]
            tries = [dict(t) for t in entry.cluster_attempts]
            t = tries[n]
            name = str(t["attempt_branch"])
            tip, dirty = await _clear_attempt(
                Path(job.repo or "."), job.start, task_id, name, t.get("worktree")
            )
            t["commit"] = tip
            t["attempt_branch"] = name if tip is not None else None
            t["uncommitted"] = dirty
            entry = replace(entry, cluster_attempts=tuple(tries))
            self.entries[task_id] = entry
            if self.ledger is not None:
                self.ledger.replace_record(task_id, entry.to_dict())
        for task_id, started in self.stale:
            job = self.planned.get(task_id)
            if job is None or job.repo is None:
                continue
            name = str(started["attempt_branch"])
            tip, dirty = await _clear_attempt(
                Path(job.repo), job.start, task_id, name, started.get("worktree")
            )
            if self.ledger is not None:
                detail = {**started, "outcome": "interrupted", "commit": tip, "uncommitted": dirty}
                detail["attempt_branch"] = name if tip is not None else None
                self.ledger.annotate(task_id, "attempt", detail)

    def _result(self, duration: float) -> RayBatchResult:
        ordered: list[BatchEntry] = []
        for t in self.tasks:
            found: BatchEntry | None = self.entries.get(t.id)
            if found is None:
                reason = f"not started: {self.stopped or 'the batch stopped'}"
                found = RayBatchEntry(result=TaskResult(task_id=t.id, status="cancelled", reason=reason))
            ordered.append(found)
        nodes = tuple(
            RayNode(
                node_id=w.info.node_id,
                hostname=w.info.hostname,
                actor=w.name,
                pid=w.info.pid or None,
                provider_pid=w.info.provider_pid,
                tasks=tuple(w.tasks),
                lost=w.lost,
            )
            for w in self.pool.workers
            if w.lost is not None or (w.alive and w.info.pid)
        ) + tuple(_excluded_node(e) for e in self.pool.excluded)
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


async def _clear_attempt(
    repo: Path, start: str | None, task_id: str, name: str, worktree: str | None
) -> tuple[str | None, bool]:
    """An attempt that was not accepted, in a shared repository: its worktree removed (it is done with:
    the task ran again), its branch ``name`` deleted unless it holds commits of its own. Returns the
    commit the kept branch holds (None: deleted) and whether the worktree held uncommitted changes."""
    dirty = False
    async with repo_lock(repo):
        if worktree is not None and await asyncio.to_thread(Path(worktree).is_dir):
            dirty = await _dirty(Path(worktree))
            with contextlib.suppress(_git.GitError):
                await _git.git(repo, "worktree", "remove", "--force", worktree)
            await asyncio.to_thread(shutil.rmtree, worktree, True)
            await asyncio.to_thread(_prune_up, Path(worktree), 3)
        with contextlib.suppress(_git.GitError):
            await _git.git(repo, "worktree", "prune")
        tip = await branch_tip(repo, name)
        if tip is not None and await _nothing_new(repo, tip, start, task_id):
            with contextlib.suppress(_git.GitError):
                await _git.git(repo, "branch", "-D", name)
            tip = None
    return tip, dirty


async def _nothing_new(repo: Path, tip: str, start: str | None, task_id: str) -> bool:
    """``tip`` is the start, or already on the task's branch: the attempt committed nothing of its own."""
    if start is not None and tip == start:
        return True
    try:
        await _git.git(repo, "merge-base", "--is-ancestor", tip, f"refs/heads/{BRANCH_PREFIX}{task_id}")
    except _git.GitError:
        return False
    return True


async def _dirty(worktree: Path) -> bool:
    try:
        return await _git.is_dirty(worktree)
    except _git.GitError:
        return False


def _prune_up(path: Path, levels: int) -> None:
    """Remove ``path``'s parents that are left empty, up to ``levels`` of them."""
    for parent in list(path.parents)[:levels]:
        try:
            parent.rmdir()
        except OSError:
            return


def _unended_attempts(ledger: Ledger, task_id: str) -> list[dict[str, Any]]:
    """The attempts of ``task_id`` the ledger saw start (with their own branch) and never end."""
    started: dict[str, dict[str, Any]] = {}
    for what, detail in ledger.history(task_id):
        name = detail.get("attempt_branch")
        if what == "attempt_started" and isinstance(name, str):
            started[name] = detail
        elif what == "attempt" and isinstance(name, str):
            started.pop(name, None)
    return list(started.values())


def _excluded_node(e: Excluded) -> RayNode:
    return RayNode(node_id=e.node_id, hostname=e.hostname, actor="", provider_pid=None, lost=e.reason)


async def _unless_gone(awaitable: Awaitable[_T], gone: asyncio.Event) -> _T:
    """``await awaitable``, unless ``gone`` is set first (then ``_Gone``; the await is cancelled)."""
    if gone.is_set():
        raise _Gone
    future = asyncio.ensure_future(awaitable)
    waiter = asyncio.ensure_future(gone.wait())
    try:
        await asyncio.wait({future, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not future.done():
            future.cancel()
    if gone.is_set():
        if future.done() and not future.cancelled():
            future.exception()  # retrieved: what a given-up node answered is not taken
        raise _Gone
    return future.result()


async def _stream(stream: Any, gone: asyncio.Event) -> AsyncIterator[Any]:
    """The items of a streaming actor call, until it ends or ``gone`` is set (``_Gone``)."""
    items = stream.__aiter__()
    while True:
        try:
            ref = await _unless_gone(items.__anext__(), gone)
        except StopAsyncIteration:
            return
        yield await _unless_gone(ref, gone)


def _after_push(result: TaskResult, pushed: PushOutcome, bundled: bool) -> TaskResult:
    """A task whose branch was to be pushed and was not did not deliver: a success becomes a failure
    (``push_failed``); a failure keeps its own reason (the push's is in the ``runner.push`` notice)."""
    if pushed.pushed or result.status != "succeeded":
        return result
    where = " (its commits are in the task's bundle)" if bundled else ""
    reason = f"the push of {pushed.branch} was refused: {pushed.error}{where}"
    return replace(result, status="failed", reason=reason, error_code="push_failed")


def _finished_data(result: TaskResult) -> dict[str, Any]:
    return {k: v for k, v in result.to_dict().items() if k != "final_text"}
