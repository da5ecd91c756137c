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

Model outages: the driver keeps the batch's one ``ModelOutage``, fed by what each attempt's task
reports in its stream (``_ray_outage``): when every running task lost the model the batch pauses (no
attempt is placed) and stops, resumable, once the model stayed away for ``outage_timeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent_fleet.runner._outage import DEFAULT_OUTAGE_TIMEOUT, ModelOutage
from agent_fleet.runner._ray_attempts import (
    Broken,
    Ending,
    Gone,
    Lost,
    Pending,
    Try,
    finished_data,
    publish,
    stream,
)
from agent_fleet.runner._ray_books import BatchBooks, adopt_interrupted, cluster_nodes, unended_attempts
from agent_fleet.runner._ray_fence import poll_interval
from agent_fleet.runner._ray_jobs import plan_jobs, resumed_job
from agent_fleet.runner._ray_node import BRANCH_PREFIX, Events, Job, Outcome
from agent_fleet.runner._ray_outage import OutageSignal
from agent_fleet.runner._ray_pool import ActorPool, Worker, one_line, where
from agent_fleet.runner._ray_repo import keep_bundle
from agent_fleet.runner._tasks_file import entry_object
from agent_fleet.runner._types import EventSink, TaskEvent, notice
from agent_fleet.runner.batch import BatchEntry, BatchTask
from agent_fleet.runner.ledger import Ledger
from agent_fleet.runner.ray_backend import RayBatchEntry, RayBatchResult
from agent_fleet.runner.task import Task, TaskResult

__all__ = ["ATTEMPT_PREFIX", "RayBatch"]

#: Shared-path mode: attempt ``n`` of task ``id`` works on branch ``agent-fleet-attempts/<id>/<run>.<n>``.
ATTEMPT_PREFIX = "agent-fleet-attempts/"

_CANCEL_GRACE = 15.0


class RayBatch(BatchBooks):
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
        outage_timeout: float | None = DEFAULT_OUTAGE_TIMEOUT,
    ) -> None:
        super().__init__(
            out=out, on_event=on_event, on_result=on_result, complete=complete, fence_timeout=fence_timeout
        )
        self.ray = ray
        self.meta = meta
        self.resumed = resume_from
        self.template = template
        self.worktrees = worktrees
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
            fence_timeout=fence_timeout,
            exclude=exclude_nodes,
        )
        self.tasks: list[BatchTask] = []
        self.queue: deque[Pending] = deque()
        self.running: dict[asyncio.Task[Ending], tuple[Pending, Worker]] = {}
        self.epochs = 0
        self.stopped: str | None = None
        self.fatal = False
        self.outage = ModelOutage(
            limit=outage_timeout, notify=self._outage_notice, on_give_up=self._request_stop
        )

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
            self.stale = [(task_id, d) for task_id in rows for d in unended_attempts(self.ledger, task_id)]
            self.adopted = await adopt_interrupted(self.planned, self.stale)
            self.queue = deque(
                Pending(task=t, job=resumed_job(job, rows[t.id], self.out))
                for t, job in pairs
                if t.id in rows
            )
        else:
            self.queue = deque(Pending(task=t, job=job) for t, job in pairs)
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
                if self.stopped is None and not self.outage.paused:  # (paused: the model is away)
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
        if self.pool.lost(worker, reason, replace=replace_actor, died=actor_died):
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
                Try(
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

    async def _attempt(self, pending: Pending, worker: Worker, job: Job) -> Ending:
        """Stream one attempt; its outcome, published (see the module docstring). The attempt is
        abandoned the moment its worker is given up (``Lost(abandoned=True)``): nothing more of it is
        taken, whatever its node still sends."""
        ray = self.ray
        items = worker.actor.run.options(num_returns="streaming").remote(job)
        outcome: Outcome | None = None
        try:
            async for item in stream(items, worker.gone):
                if isinstance(item, Events):
                    for task_event in item.events:
                        if isinstance(task_event, OutageSignal):
                            self._outage_signal(pending, worker, task_event)
                        else:
                            self._deliver(pending, task_event)
                elif isinstance(item, Outcome):
                    outcome = item
        except Gone:
            with contextlib.suppress(Exception):
                ray.cancel(items)
            if worker.died:  # (a heartbeat saw its actor dead before this stream did: lost with it)
                return Lost(str(worker.lost), actor_died=True)
            return Lost(f"its node was given up: {worker.lost}", abandoned=True)
        except ray.exceptions.RayTaskError as exc:
            return Broken(f"the task raised on {worker.info.hostname}: {one_line(exc, 500)}")
        except ray.exceptions.RayError as exc:
            return Lost(f"{type(exc).__name__}: {one_line(exc, 500)}", actor_died=True)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                ray.cancel(items)
            raise
        if outcome is None:
            return Broken(f"the node {worker.info.hostname} ended the task without a result")
        if outcome.epoch != pending.epoch:
            return Broken(f"the node {worker.info.hostname} answered for another attempt")
        if outcome.fenced is not None:
            return Lost(f"the node fenced itself: {outcome.fenced}", fenced=True)
        if outcome.result.fatal:
            return outcome  # the node's provider failed: nothing of it is published (see _settle)
        return await publish(self.pool, worker, job, outcome, self._emit)

    def _outage_signal(self, pending: Pending, worker: Worker, signal: OutageSignal) -> None:
        """What the attempt's task reported about the model, into the batch's ``ModelOutage``."""
        task_id = pending.task.id
        match signal.kind:
            case "enter":
                self.outage.enter(task_id)
            case "leave":
                self.outage.leave(task_id)
            case "progress":
                self.outage.progress(task_id)
            case "hit":
                answer = asyncio.get_running_loop().create_task(
                    self._answer_hit(pending, worker, signal), name=f"ray:outage:{task_id}"
                )
                pending.hits.add(answer)
                answer.add_done_callback(pending.hits.discard)

    async def _answer_hit(self, pending: Pending, worker: Worker, signal: OutageSignal) -> None:
        """The batch's answer to a turn that lost the model, sent to the attempt that asked."""
        epoch = pending.epoch
        again = await self.outage.hit(pending.task.id, signal.cause, settle=signal.settle)
        if worker.alive and pending.epoch == epoch:
            self.pool.tell(worker, "outage_answer", pending.task.id, epoch, signal.seq, again)

    def _attempt_ended(self, pending: Pending) -> None:
        """The attempt runs no more (whatever ended it): the batch's ``ModelOutage`` forgets it."""
        for answer in pending.hits:
            answer.cancel()
        self.outage.leave(pending.task.id)

    def _outage_notice(self, task_event: TaskEvent) -> None:
        """``runner.batch_paused`` / ``runner.batch_resumed``: to the live view, as on a local batch."""
        if self.on_event is not None:
            self.on_event(task_event)

    def _settle(self, pending: Pending, worker: Worker, ending: Ending) -> None:
        task_id = pending.task.id
        current = pending.tries[-1]
        current.ended_at = time.time()
        self._attempt_ended(pending)
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
                self._emit(notice(task_id, "finished", **finished_data(result)))  # after publishing
                self._finish(
                    pending,
                    worker,
                    replace(result, transcript=self._writer(task_id).path),
                    branch=branch,
                    kept=Path(kept) if kept is not None else None,
                    bundle=bundle_path,
                    push=push,
                    diff=ending.diff,
                    files=ending.files,
                )
            case Lost(reason=reason, actor_died=actor_died, abandoned=abandoned, fenced=fenced):
                current.outcome = "abandoned" if abandoned or fenced else "lost"
                current.reason = reason
                if fenced:
                    self._node_lost(worker, reason)
                elif not abandoned:
                    self._node_lost(worker, f"its actor died: {reason}", actor_died=actor_died)
                self._retry_or_fail(pending, worker, reason)
            case Broken(reason=reason):
                current.outcome, current.reason = "error", reason
                error = TaskResult(
                    task_id=task_id,
                    status="error",
                    reason=reason,
                    error_code="internal_error",
                    transcript=self._writer(task_id).path,
                )
                self._emit(notice(task_id, "finished", **finished_data(error)))
                self._finish(pending, worker, error)

    def _retry_or_fail(self, pending: Pending, worker: Worker, why: str, last: Outcome | None = None) -> None:
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
        self._emit(notice(task_id, "finished", **finished_data(failed)))
        self._finish(pending, worker, failed, recorded=True)

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
            self._emit(notice(pending.task.id, "finished", **finished_data(result)))
            self._finish(pending, None, result, recorded=True)

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
                self._attempt_ended(pending)
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

    async def _wait(self, futures: set[asyncio.Task[Ending]], seconds: float) -> None:
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

    def _result(self, duration: float) -> RayBatchResult:
        ordered: list[BatchEntry] = []
        for t in self.tasks:
            found: BatchEntry | None = self.entries.get(t.id)
            if found is None:
                reason = f"not started: {self.stopped or 'the batch stopped'}"
                found = RayBatchEntry(result=TaskResult(task_id=t.id, status="cancelled", reason=reason))
            ordered.append(found)
        nodes = cluster_nodes(self.pool)
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
        return self._summary(result)
