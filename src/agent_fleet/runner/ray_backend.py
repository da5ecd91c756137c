"""``run_batch_ray``: the tasks of a batch across the nodes of a Ray cluster (``run_batch(backend="ray")``).

    from agent_fleet.runner.batch import load_tasks, run_batch

    result = await run_batch(load_tasks("tasks.jsonl"), template=template, out_dir="out", jobs=4,
                             worktrees=True, backend="ray", ray_address="head:6379")

Needs the ``ray`` extra (``pip install 'agent-fleet[ray]'``) on the driver and on every node; without
it a ``ProviderUnavailable`` says so. ``ray`` is imported only when this backend runs.

Theory of operation
-------------------
Connect: to ``ray_address`` (or ``$RAY_ADDRESS``); without one a small local Ray instance is started
(and shut down at the end). A process that already called ``ray.init`` keeps its connection.

Before any work: the tasks are checked as ``run_batch`` checks them (directories, repositories and their
start commit; with ``repo_url``, ``git ls-remote`` gives the start commit), then one ``NodeRunner`` actor
is placed on every alive node (``NodeAffinitySchedulingStrategy``, no CPU reserved) and starts that
node's one provider. A failure there raises (``UsageError``, ``ProviderUnavailable`` and
``AuthenticationError`` naming the node) and nothing was changed.

Scheduling: the driver keeps the queue. A task goes to the least loaded node with a free slot; each
node runs at most ``jobs`` tasks at once (the actor's ``max_concurrency`` leaves room for control
calls). Each attempt is a streaming actor call: event batches come back as the task runs (the driver
writes ``out_dir/<id>.jsonl`` and calls ``on_event``, so transcripts and the live view work as
locally), then the result. Worktrees are made on the node that runs the task (see ``_ray_node``).

Faults: when an actor or its node dies mid-task, the attempt is recorded (a
``runner.attempt_failed`` notice with the reason) and the task goes back to the queue, to another
node when one is alive, at most ``max_retries_per_task`` times; after that it is ``failed``
(``error_code="node_lost"``). A dead actor on a live node is replaced once. A fatal result (credential
refused, app-server died) or ``stop`` stops the batch as ``run_batch`` does: every node is told to stop
(running tasks end ``cancelled``), tasks not started are reported ``cancelled``. Cancelling
``run_batch_ray`` stops the nodes, waits briefly for running tasks to clean up, cancels what is left
(``ray.cancel``) and re-raises. The actors are always shut down and killed; ``summary.json`` is always
written (with ``"backend": "ray"`` and a ``nodes`` list).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent_fleet.codex import CodexOptions
from agent_fleet.errors import AuthenticationError, ProviderUnavailable, UsageError
from agent_fleet.events import System
from agent_fleet.runner import _git
from agent_fleet.runner._ray_local import local_init_kwargs, loopback_only
from agent_fleet.runner._ray_node import BRANCH_PREFIX, Events, Job, NodeConfig, NodeInfo, NodeRunner, Outcome
from agent_fleet.runner._types import EventSink, TaskEvent, notice
from agent_fleet.runner.batch import BatchEntry, BatchResult, BatchTask, check_task_ids
from agent_fleet.runner.task import Task, TaskResult
from agent_fleet.runner.transcript import Redactor, TranscriptWriter

__all__ = ["RAY_EXTRA_HINT", "RayBatchEntry", "RayBatchResult", "RayNode", "import_ray", "run_batch_ray"]

RAY_EXTRA_HINT = "pip install 'agent-fleet[ray]'"
#: Seconds for an actor to come up and start its provider (a new worker process, then the app-server).
DEFAULT_START_TIMEOUT = 180.0
_SHUTDOWN_TIMEOUT = 30.0
_CANCEL_GRACE = 15.0
_CONTROL_SLOTS = 4  # actor concurrency beyond ``jobs``: stop / shutdown calls are never queued behind tasks
_LOCAL_OBJECT_STORE = 100 * 1024 * 1024


def import_ray() -> Any:
    """The ``ray`` module, or ``ProviderUnavailable`` naming the extra to install."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ProviderUnavailable(
            f"the Ray backend needs the ray package, which is not installed here: {RAY_EXTRA_HINT} "
            f"(on the driver and on every node) ({exc})"
        ) from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class RayBatchEntry(BatchEntry):
    """A ``BatchEntry`` plus where it ran: the node of the last attempt, the attempts made, why earlier
    attempts failed, and (repository URL mode) the git bundle of the task's commits in ``out_dir``."""

    node: str | None = None
    node_id: str | None = None
    attempts: int = 0
    failures: tuple[str, ...] = ()
    bundle: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        out = BatchEntry.to_dict(self)  # not super(): slotted dataclasses break its zero-argument form
        out.update(
            node=self.node,
            node_id=self.node_id,
            attempts=self.attempts,
            failures=[Redactor().text(f) for f in self.failures],  # may quote a node's output
            bundle=str(self.bundle) if self.bundle is not None else None,
        )
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RayNode:
    """One actor of the batch: its node, its provider's pid, the tasks placed on it, and why it was lost."""

    node_id: str
    hostname: str
    actor: str
    provider_pid: int | None
    tasks: tuple[str, ...] = ()
    lost: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "hostname": self.hostname,
            "actor": self.actor,
            "provider_pid": self.provider_pid,
            "tasks": list(self.tasks),
            "lost": self.lost,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RayBatchResult(BatchResult):
    """A ``BatchResult`` plus the batch's id (it names the actors and the nodes' work directories,
    ``<tmp>/agent-fleet-ray/<batch_id>``) and its actors."""

    batch_id: str = ""
    nodes: tuple[RayNode, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = BatchResult.to_dict(self)
        out["backend"] = "ray"
        out["batch_id"] = self.batch_id
        out["nodes"] = [n.to_dict() for n in self.nodes]
        return out


async def run_batch_ray(
    tasks: Sequence[BatchTask],
    *,
    template: Task,
    out_dir: str | os.PathLike[str],
    jobs: int = 4,
    worktrees: bool = False,
    provider_name: str = "codex",
    options: CodexOptions | None = None,
    cwd: str | os.PathLike[str] | None = None,
    on_event: EventSink | None = None,
    on_result: Callable[[BatchEntry], None] | None = None,
    stop: asyncio.Event | None = None,
    ray_address: str | None = None,
    repo_url: str | None = None,
    max_retries_per_task: int = 1,
    start_timeout: float = DEFAULT_START_TIMEOUT,
    work_root: str | None = None,
) -> RayBatchResult:
    """Run ``tasks`` on a Ray cluster (see the module docstring); the arguments are ``run_batch``'s, plus:

    - ``jobs``: tasks at a time *per node*.
    - ``ray_address``: the cluster (``host:port`` or ``auto``); default ``$RAY_ADDRESS``, else a local
      instance (started here and shut down at the end).
    - ``repo_url``: a git URL each node clones (once per batch) instead of a path the nodes share;
      tasks then run at the repository's top level in worktrees (``worktrees`` is implied) and their
      commits come back as ``out_dir/<id>.bundle``.
    - ``max_retries_per_task``: how often a task whose actor or node died is run again.
    - ``start_timeout``: seconds for each node's actor and provider to start.
    - ``work_root``: node-local directory for clones and worktrees (default: each node's temp dir).

    Returns a ``RayBatchResult`` (also written to ``out_dir/summary.json``). Raises ``UsageError`` (bad
    arguments or tasks), ``ProviderUnavailable`` (no ray, no cluster, a node's provider cannot start),
    ``AuthenticationError`` (a node has no credential) before any work.
    """
    if jobs < 1:
        raise UsageError(f"-j/--jobs must be >= 1, not {jobs}")
    if max_retries_per_task < 0:
        raise UsageError(f"max_retries_per_task must be >= 0, not {max_retries_per_task}")
    if start_timeout <= 0:
        raise UsageError(f"start_timeout must be positive, not {start_timeout}")
    if not tasks:
        raise UsageError("no tasks")
    check_task_ids(tasks)
    ray = import_ray()
    batch = _RayBatch(
        ray,
        template=template,
        out=Path(out_dir),
        jobs=jobs,
        worktrees=worktrees or repo_url is not None,
        provider_name=provider_name,
        options=options,
        on_event=on_event,
        on_result=on_result,
        repo_url=repo_url,
        max_retries=max_retries_per_task,
        start_timeout=start_timeout,
        work_root=work_root,
    )
    await batch.prepare(tasks, cwd)
    return await batch.run(ray_address, stop)


# -- the driver ----------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class _Worker:
    actor: Any
    name: str
    info: NodeInfo
    slots: int
    running: int = 0
    placed: int = 0
    alive: bool = True
    lost: str | None = None
    tasks: list[str] = field(default_factory=list)


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


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _RayBatch:
    def __init__(
        self,
        ray: Any,
        *,
        template: Task,
        out: Path,
        jobs: int,
        worktrees: bool,
        provider_name: str,
        options: CodexOptions | None,
        on_event: EventSink | None,
        on_result: Callable[[BatchEntry], None] | None,
        repo_url: str | None,
        max_retries: int,
        start_timeout: float,
        work_root: str | None,
    ) -> None:
        self.ray = ray
        self.template = template
        self.out = out
        self.jobs = jobs
        self.worktrees = worktrees
        self.provider_name = provider_name
        self.options = options
        self.on_event = on_event
        self.on_result = on_result
        self.repo_url = repo_url
        self.max_retries = max_retries
        self.start_timeout = start_timeout
        self.work_root = work_root
        self.batch_id = time.strftime("%Y%m%d%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.tasks: list[BatchTask] = []
        self.queue: deque[_Pending] = deque()
        self.workers: list[_Worker] = []
        self.replaced: set[str] = set()
        self.running: dict[asyncio.Task[Outcome | _Lost | _Broken], tuple[_Pending, _Worker]] = {}
        self.starting: set[asyncio.Task[_Worker | None]] = set()
        self.entries: dict[str, BatchEntry] = {}
        self.writers: dict[str, TranscriptWriter] = {}
        self.stopped: str | None = None
        self.fatal = False
        self.owns_ray = False
        self._actor_class: Any = None

    # -- before any work -----------------------------------------------------------------------------

    async def prepare(self, tasks: Sequence[BatchTask], cwd: str | os.PathLike[str] | None) -> None:
        """Check every task and resolve what each attempt needs (``UsageError`` on the first bad one)."""
        self.tasks = list(tasks)
        if self.repo_url is not None:
            if cwd is not None:
                raise UsageError(
                    "--cwd cannot be combined with a repository URL (tasks run at its top level)"
                )
            start = await self._remote_head(self.repo_url)
            for t in tasks:
                if t.cwd is not None:
                    raise UsageError(
                        f"task {t.id!r} (line {t.line}): 'cwd' cannot be used with a repository URL "
                        "(tasks run at the repository's top level)"
                    )
                job = Job(
                    task=self._task(t, "."),
                    repo=self.repo_url,
                    clone=True,
                    start=start,
                    worktree=True,
                    attempt=0,
                )
                self.queue.append(_Pending(task=t, job=job))
        else:
            default_cwd = Path(cwd) if cwd is not None else Path(self.template.spec.cwd or os.getcwd())
            starts: dict[Path, str | None] = {}
            for t in tasks:
                directory = (t.cwd or default_cwd).expanduser()
                if not directory.is_dir():
                    raise UsageError(
                        f"task {t.id!r} (line {t.line}): directory {str(directory)!r} does not exist"
                    )
                directory = directory.resolve()
                top = await _git.toplevel(directory)
                needs_git = (
                    self.worktrees
                    or t.require_commit
                    or (t.require_commit is None and self.template.gate.require_commit)
                )
                if top is None and needs_git:
                    raise UsageError(
                        f"task {t.id!r} (line {t.line}): {str(directory)!r} is not in a git repository"
                    )
                if top is not None and self.worktrees and top not in starts:
                    starts[top] = await _git.head(top)
                    if starts[top] is None:
                        raise UsageError(
                            f"task {t.id!r} (line {t.line}): the repository {str(top)!r} has no commit yet"
                        )
                job = Job(
                    task=self._task(t, str(directory)),
                    repo=str(top) if top is not None else None,
                    clone=False,
                    start=starts.get(top) if top is not None else None,
                    worktree=self.worktrees and top is not None,
                    attempt=0,
                )
                self.queue.append(_Pending(task=t, job=job))
        await asyncio.to_thread(self.out.mkdir, parents=True, exist_ok=True)

    def _task(self, t: BatchTask, directory: str) -> Task:
        template = self.template
        gate = template.gate
        if t.gate_cmd is not None or t.require_commit is not None:
            gate = replace(
                gate,
                command=t.gate_cmd if t.gate_cmd is not None else gate.command,
                require_commit=t.require_commit if t.require_commit is not None else gate.require_commit,
            )
        spec = replace(template.spec, prompt=t.prompt, cwd=directory, model=t.model or template.spec.model)
        return replace(template, id=t.id, spec=spec, gate=gate)

    async def _remote_head(self, url: str) -> str:
        try:
            listing = await _git.git(tempfile.gettempdir(), "ls-remote", url, "HEAD")
        except _git.GitError as exc:
            raise UsageError(f"cannot read the repository {url!r}: {exc}") from exc
        sha = listing.split()[0] if listing.split() else ""
        if not sha:
            raise UsageError(f"the repository {url!r} has no HEAD commit")
        return sha

    async def _connect(self, address: str | None) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        address = address or os.environ.get("RAY_ADDRESS") or None
        # Quiet: Ray's notices (token auth, "SIGTERM handler not set" from this thread) and the actors'
        # output would garble the live view; each node keeps its logs (/tmp/ray/session_latest/logs).
        kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        if address is not None:
            kwargs["address"] = address
            what = f"connect to the Ray cluster at {address!r}"
        else:
            kwargs.update(local_init_kwargs(_LOCAL_OBJECT_STORE))  # listening on 127.0.0.1 only
            what = "start a local Ray instance"
        try:
            with loopback_only() if address is None else contextlib.nullcontext():
                await asyncio.to_thread(ray.init, **kwargs)
        except Exception as exc:
            raise ProviderUnavailable(f"cannot {what}: {_one_line(exc)}") from exc
        self.owns_ray = True

    async def _spawn(self, node_id: str, suffix: str = "") -> _Worker:
        """Place a ``NodeRunner`` on ``node_id`` and start its provider; raise when it cannot."""
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self._actor_class is None:
            self._actor_class = ray.remote(NodeRunner)
        name = f"agent-fleet-{self.batch_id}-{node_id[:8]}{suffix}"
        config = NodeConfig(
            provider_name=self.provider_name,
            options=self.options,
            batch_id=self.batch_id,
            name=name,
            work_root=self.work_root,
        )
        actor = self._actor_class.options(
            name=name,
            num_cpus=0,
            max_concurrency=self.jobs + _CONTROL_SLOTS,
            max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
        ).remote(config)
        worker = _Worker(
            actor=actor,
            name=name,
            info=NodeInfo(node_id=node_id, hostname="?", pid=0),
            slots=self.jobs,
            alive=False,
        )
        self.workers.append(worker)
        try:
            info: NodeInfo = await asyncio.wait_for(actor.start.remote(), self.start_timeout)
        except TimeoutError as exc:
            raise ProviderUnavailable(
                f"Ray node {node_id}: the agent-fleet actor did not start within {self.start_timeout:g}s"
            ) from exc
        except ray.exceptions.RayError as exc:
            raise ProviderUnavailable(
                f"Ray node {node_id}: the agent-fleet actor failed to start: {_one_line(exc)} "
                f"(is agent-fleet installed on every node? {RAY_EXTRA_HINT})"
            ) from exc
        worker.info = info
        where = f"on Ray node {info.hostname} ({node_id[:12]})"
        match info.error_kind:
            case None:
                worker.alive = True
                return worker
            case "auth":
                raise AuthenticationError(f"{info.error} {where}")
            case "usage":
                raise UsageError(f"{info.error} {where}")
            case _:
                raise ProviderUnavailable(f"{info.error} {where}")

    async def _replace(self, lost: _Worker) -> _Worker | None:
        """A new actor on a dead actor's node, when the node is still alive (once per node)."""
        node_id = lost.info.node_id
        with contextlib.suppress(Exception):
            nodes = await asyncio.to_thread(self.ray.nodes)
            if any(n.get("NodeID") == node_id and n.get("Alive") for n in nodes):
                return await self._spawn(node_id, suffix="-r1")
        return None

    # -- the run ---------------------------------------------------------------------------------------

    async def run(self, address: str | None, stop: asyncio.Event | None) -> RayBatchResult:
        started = time.monotonic()
        await self._connect(address)
        try:
            spawns: list[asyncio.Task[_Worker]] = []
            try:
                nodes = [n for n in await asyncio.to_thread(self.ray.nodes) if n.get("Alive")]
                if not nodes:
                    raise ProviderUnavailable("the Ray cluster has no alive node")
                loop = asyncio.get_running_loop()
                spawns = [loop.create_task(self._spawn(str(n["NodeID"]))) for n in nodes]
                await asyncio.gather(*spawns)
            except BaseException:
                for spawn in spawns:
                    spawn.cancel()
                await asyncio.gather(*spawns, return_exceptions=True)
                await self._close()
                raise
            try:
                await self._loop(stop)
            except BaseException:
                await self._abort()
                raise
            finally:
                for writer in self.writers.values():
                    writer.close()
                await self._close()
                result = self._result(time.monotonic() - started)  # summary.json, even when cancelled
        finally:
            if self.owns_ray:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(self.ray.shutdown)
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
                    if not self.starting:
                        self._fail_queue("no Ray node is left to run it")
                        return
                waiting: set[asyncio.Future[Any]] = {*self.running, *self.starting}
                if stop_waiter is not None:
                    waiting.add(stop_waiter)
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    if finished is stop_waiter:
                        stop_waiter = None
                        self._request_stop("stopped by the user")
                    elif finished in self.starting:
                        self.starting.discard(finished)
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

    def _pick(self, pending: _Pending) -> _Worker | None:
        alive = [w for w in self.workers if w.alive]
        allowed = [w for w in alive if w.info.node_id not in pending.avoid] or alive
        free = [w for w in allowed if w.running < w.slots]
        return min(free, key=lambda w: (w.running, w.placed)) if free else None

    def _dispatch(self) -> None:
        for pending in list(self.queue):
            if not any(w.alive and w.running < w.slots for w in self.workers):
                return
            worker = self._pick(pending)
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
                reset_branch=pending.branch_created,
                stale_worktree=pending.stale_worktree,
            )
            attempt = asyncio.get_running_loop().create_task(
                self._attempt(pending, worker, job), name=f"ray:{pending.task.id}:{pending.attempt}"
            )
            self.running[attempt] = (pending, worker)

    async def _attempt(self, pending: _Pending, worker: _Worker, job: Job) -> Outcome | _Lost | _Broken:
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
            return _Broken(f"the task raised on {worker.info.hostname}: {_one_line(exc, 500)}")
        except ray.exceptions.RayError as exc:
            return _Lost(f"{type(exc).__name__}: {_one_line(exc, 500)}")
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
        self._emit(task_event)

    def _settle(self, pending: _Pending, worker: _Worker, outcome: Outcome | _Lost | _Broken) -> None:
        task_id = pending.task.id
        match outcome:
            case Outcome(result=result, branch=branch, worktree_kept=kept, bundle=bundle):
                bundle_path: Path | None = None
                if bundle is not None:
                    bundle_path = self.out / f"{task_id}.bundle"
                    bundle_path.write_bytes(bundle)
                self._finish(
                    pending,
                    worker,
                    replace(result, transcript=self._writer(task_id).path),
                    branch=branch,
                    kept=Path(kept) if kept is not None else None,
                    bundle=bundle_path,
                )
            case _Lost(reason=reason):
                if worker.alive:
                    worker.alive = False
                    worker.lost = reason
                    if self.stopped is None and worker.info.node_id not in self.replaced:
                        self.replaced.add(worker.info.node_id)
                        self.starting.add(asyncio.get_running_loop().create_task(self._replace(worker)))
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
        worker: _Worker,
        result: TaskResult,
        *,
        branch: str | None = None,
        kept: Path | None = None,
        bundle: Path | None = None,
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
        )
        self.entries[task_id] = entry
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
            writer = self.writers.pop(pending.task.id, None)
            if writer is not None:
                writer.close()
            if self.on_result is not None:
                self.on_result(entry)

    def _request_stop(self, reason: str, *, fatal: bool = False) -> None:
        if self.stopped is not None:
            return
        self.stopped = reason
        self.fatal = fatal
        for worker in self.workers:
            if worker.alive:
                with contextlib.suppress(Exception):
                    worker.actor.stop.remote()

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
        for starting in self.starting:
            starting.cancel()

    async def _close(self) -> None:
        """Shut every actor's provider down (bounded), then kill the actors."""
        ray = self.ray
        for starting in self.starting:
            starting.cancel()
        calls = []
        for worker in self.workers:
            if worker.alive:
                with contextlib.suppress(Exception):
                    calls.append(asyncio.ensure_future(worker.actor.shutdown.remote()))
        if calls:
            with contextlib.suppress(BaseException):
                await asyncio.wait(calls, timeout=_SHUTDOWN_TIMEOUT)
            for call in calls:
                call.cancel()
        for worker in self.workers:
            with contextlib.suppress(Exception):
                ray.kill(worker.actor)

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
            for w in self.workers
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
        text = json.dumps(result.to_dict(), indent=2) + "\n"
        (self.out / "summary.json").write_text(text, encoding="utf-8")
        return result


def _finished_data(result: TaskResult) -> dict[str, Any]:
    return {k: v for k, v in result.to_dict().items() if k != "final_text"}
