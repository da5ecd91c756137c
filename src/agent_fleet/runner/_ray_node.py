"""The node side of the Ray backend: ``NodeRunner``, one long-lived actor per node.

A ``NodeRunner`` owns its node's one provider (for codex: one app-server child, many threads on it,
as ``run_batch`` on a single machine) and runs up to ``jobs`` tasks at once on it. It is an async Ray
actor, so its methods are coroutines on one event loop: ``start`` -> ``run`` (many, concurrently) and
``push`` (the driver's, for an accepted attempt) -> ``stop`` (a clean stop of the running tasks) ->
``shutdown``. ``heartbeat`` answers the driver's heartbeats and ``fence`` is the driver giving the
node up; from ``start`` on the node watches its raylet, the GCS and those heartbeats, and fences
itself (``_ray_fence``): it stops its turns and its provider and ends its own process.

``run(job)`` is a streaming generator: it yields ``Events`` batches (redacted here, with this node's
environment, so a secret of a worker never reaches the driver) while the task runs and ends with one
``Outcome``. The driver writes the transcript and calls ``on_event``; if this actor or its node dies,
the driver's iteration raises ``ray.exceptions.RayActorError`` and it reschedules the task.

Everything here is imported by the Ray workers (the actor class is pickled by reference), so this
module imports neither ``ray`` (only inside the actor's methods) nor anything but agent-fleet.

Repository modes (see ``docs/ray.md``): a path every node shares (``clone=False``: worktrees are
created on the node, in the shared repository, serialised by an ``flock`` on a file in its git
directory so nodes do not race on it) or a git URL (``clone=True``: each node clones it once per
batch into its work directory; commits come back to the driver as a git bundle of the task's branch,
and with ``Job.push`` go to the URL's branch too). The git work is ``_ray_repo.NodeRepos``'s.

A task's end (``runner.finished``) is announced by the driver, after it published the attempt's work,
with the status that left: a refused push turns a success into a failure (``push_failed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import os
import shutil
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent_fleet.contract import Provider
from agent_fleet.errors import AgentFleetError, AuthenticationError, ProviderUnavailable, UsageError
from agent_fleet.events import System
from agent_fleet.runner import _box, _git
from agent_fleet.runner._ray_fence import (
    DEFAULT_FENCE_TIMEOUT,
    Health,
    NodeWatch,
    ask_gcs,
    poll_interval,
    raylet_parent,
)
from agent_fleet.runner._ray_repo import NodeRepos, PushOutcome, branch_tip, flock
from agent_fleet.runner._ray_stream import Outbox
from agent_fleet.runner._types import TaskEvent, notice
from agent_fleet.runner.providers import check_provider, make_provider, provider_state_dir
from agent_fleet.runner.task import Task, TaskResult, run_task
from agent_fleet.runner.transcript import Redactor

__all__ = [
    "BRANCH_PREFIX",
    "Events",
    "Job",
    "NodeConfig",
    "NodeInfo",
    "NodeRunner",
    "Outcome",
    "provider_environ",
    "redact_event",
]

BRANCH_PREFIX = "agent-fleet/"  # the same as batch.BRANCH_PREFIX (not imported: batch imports us lazily)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeConfig:
    """What every ``NodeRunner`` of a batch is built with."""

    provider_name: str
    options: Any
    batch_id: str
    name: str
    #: node-local directory for clones, worktrees and the tasks' temporary directories (default: the
    #: fleet's state directory on the node, ``runner._box``)
    work_root: str | None = None
    flush_interval: float = 0.05  # seconds events are gathered before a batch goes to the driver
    fence_timeout: float = DEFAULT_FENCE_TIMEOUT  # see _ray_fence: a node cut off stops within it


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeInfo:
    """``start()``'s answer. ``error_kind`` (``usage``, ``unavailable``, ``auth``) names a failure."""

    node_id: str
    hostname: str
    pid: int
    provider_pid: int | None = None
    error_kind: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One attempt of one task.

    ``task.spec.cwd`` is the task's directory: an absolute path every node shares, or (``clone``)
    a path relative to the repository's top level. ``repo`` is that top level (or the git URL);
    ``None`` when the task is not in a repository. ``start`` is the commit worktrees start from.
    ``reset_branch``: an earlier attempt created the branch, so it is reset to ``start`` (``-B``) after
    ``stale_worktree`` (that attempt's worktree, if known) is removed.
    ``reuse_branch``: the batch is resumed and an earlier run made the branch: it is checked out as it is
    (its commits kept) in a new worktree; in a clone, from ``earlier_bundle`` (the bundle that run
    brought back; None when it made no commit). ``resume_session``: the session the task continues
    (``run_task(resume_session=...)``). ``push`` (clone only): the driver will have the task's branch
    pushed to the URL once it accepted the attempt (``NodeRunner.push``; never forced).

    ``epoch`` is the driver's number for this attempt (a node acts only for the newest epoch of a task
    it saw). ``attempt_branch`` (shared-path mode): the attempt works on this branch of its own, made
    from the task's branch (``reuse``) or ``start``; the driver moves the task's branch to it once it
    accepted the attempt, so an abandoned attempt never moves the task's branch.
    """

    task: Task
    repo: str | None
    clone: bool
    start: str | None
    worktree: bool
    attempt: int
    reset_branch: bool = False
    stale_worktree: str | None = None
    reuse_branch: bool = False
    resume_session: str | None = None
    earlier_bundle: bytes | None = None
    push: bool = False
    epoch: int = 0
    attempt_branch: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Events:
    events: tuple[TaskEvent, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """The end of an attempt (``epoch``): the result (redacted on the node), the task's branch, a
    worktree left in place, a bundle of commits (clone mode), and the commits the driver publishes once
    it accepts the attempt: the attempt's ``tip`` and the ``base`` it started from (shared-path mode:
    the task's branch then, None when it did not exist; clone mode: the start or earlier bundle).
    The task's ``runner.finished`` notice is not sent: the driver announces the end after publishing
    (a refused push changes the status). ``fenced`` (why) says the node had fenced itself: the
    attempt was stopped or refused by that, and is no outcome of the task. ``diff``: the task's final
    diff (every turn's changes, redacted), as a local batch records it."""

    result: TaskResult
    epoch: int = 0
    branch: str | None = None
    worktree_kept: str | None = None
    bundle: bytes | None = None
    push: PushOutcome | None = None
    tip: str | None = None
    base: str | None = None
    attempt_branch: str | None = None
    fenced: str | None = None
    diff: str | None = None


def provider_environ(options: Any) -> dict[str, str]:
    """The environment this node's provider children get (the node's own, the options' over it): what
    the node's events are redacted with. Codex options build it (``child_env``); others, such as
    ``ClaudeOptions``, carry an ``env`` mapping merged over the process environment."""
    child_env = getattr(options, "child_env", None)
    if callable(child_env):
        return dict(child_env())
    env = getattr(options, "env", None)
    return {**os.environ, **(env if isinstance(env, Mapping) else {})}


def redact_event(value: Any, redactor: Redactor) -> Any:
    """``value`` (an event dataclass, or anything in one) with every string redacted."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: redact_event(getattr(value, f.name), redactor) for f in dataclasses.fields(value)}
        return replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(redact_event(v, redactor) for v in value)
    return redactor.value(value)


class NodeRunner:
    """The Ray actor class (wrapped with ``ray.remote`` by the driver). See the module docstring."""

    def __init__(self, config: NodeConfig) -> None:
        import ray  # only ever constructed inside a Ray worker

        self.config = config
        self.node_id = str(ray.get_runtime_context().get_node_id())
        self.hostname = socket.gethostname()
        self.redactor = Redactor(provider_environ(config.options))
        self.provider: Provider | None = None
        self.stop_event = asyncio.Event()
        # The node's box: private, never under a shared temp dir (worktrees/<id>, tmp/<id>, clones).
        if config.work_root:
            self.top = Path(config.work_root) / "agent-fleet-ray"  # made private from here down
            base = self.top
        else:
            self.top = _box.state_dir()
            base = self.top / "ray"
        self.root = base / config.batch_id / self.node_id[:12]
        self.repos = NodeRepos(self.root, self.redactor)
        self.raylet = raylet_parent()  # read now: once the raylet is gone this process has another parent
        self.watch = NodeWatch(config.fence_timeout, time.monotonic())  # anew once the provider started
        self.works: set[asyncio.Task[Outcome]] = set()
        self.epochs: dict[str, int] = {}  # the newest epoch seen per task
        self._watcher: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> NodeInfo:
        """Check and start this node's provider. Failures are returned (``error_kind``), not raised:
        agent-fleet's exceptions are not made to cross a process boundary."""
        info = NodeInfo(node_id=self.node_id, hostname=self.hostname, pid=os.getpid())
        try:
            await asyncio.to_thread(_box.private_tree, self.top, self.root)
            check_provider(self.config.provider_name, self.config.options)
            provider = make_provider(self.config.provider_name, self.config.options)
            self.provider = provider
            async with _start_lock(provider_state_dir(self.config.provider_name, self.config.options)):
                await provider.start()
        except AuthenticationError as exc:
            return replace(info, error_kind="auth", error=exc.message)
        except ProviderUnavailable as exc:
            return replace(info, error_kind="unavailable", error=str(exc))
        except UsageError as exc:
            return replace(info, error_kind="usage", error=str(exc))
        except AgentFleetError as exc:
            return replace(info, error_kind="unavailable", error=f"{type(exc).__name__}: {exc}")
        self.watch = NodeWatch(self.config.fence_timeout, time.monotonic())  # (the start may be slow)
        self._watcher = asyncio.get_running_loop().create_task(self._watch())
        return replace(info, provider_pid=self.provider.pid)

    async def stop(self) -> None:
        """Stop every running task cleanly (their results say ``cancelled``); later ones stop at once."""
        self.stop_event.set()

    # -- fencing (see _ray_fence) --------------------------------------------------------------------

    async def heartbeat(self) -> Health:
        """This node's health as it sees it: ``fenced`` says why it stopped itself. (The driver asks
        every poll: a node no longer asked stops by itself, see ``NodeWatch``.)"""
        self.watch.heard_from_driver(time.monotonic())
        provider_pid = self.provider.pid if self.provider is not None else None
        return Health(
            node_id=self.node_id, pid=os.getpid(), provider_pid=provider_pid, fenced=self.watch.fenced
        )

    async def fence(self, reason: str) -> None:
        """The driver gave this node up: stop it now (see ``_fence_now``)."""
        self.watch.fence(f"the driver gave this node up: {reason}")
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()
        self._watcher = asyncio.get_running_loop().create_task(self._fence_now())

    async def _watch(self) -> None:
        """Check the raylet and the GCS every poll until one of them is lost, then fence."""
        poll = poll_interval(self.config.fence_timeout)
        asking: asyncio.Future[bool | None] | None = None
        while self.watch.fenced is None:
            await asyncio.sleep(poll)
            gcs: bool | None = None
            if asking is not None and asking.done():
                gcs = None if asking.cancelled() or asking.exception() else asking.result()
                asking = None
            if asking is None:  # one question at a time: a GCS that hangs is not asked again and again
                asking = asyncio.ensure_future(asyncio.to_thread(ask_gcs, poll))
            raylet_alive = self.raylet is None or os.getppid() == self.raylet
            self.watch.observe(raylet_alive=raylet_alive, gcs=gcs, now=time.monotonic())
        await self._fence_now()

    async def _fence_now(self) -> None:
        """Stop the running turns, shut the provider down and end this process, within the bound: a
        quarter of it for the turns to stop (cleanly, so clean worktrees are removed), a quarter for
        the provider, a quarter for this batch's work directory (unless it keeps a worktree with
        uncommitted work); the reaper ends whatever the provider started when this process is gone."""
        grace = self.config.fence_timeout / 4
        self.stop_event.set()
        works = set(self.works)
        if works:
            await asyncio.wait(works, timeout=grace)
            for work in works:
                work.cancel()
            await asyncio.wait(works, timeout=1.0)
        provider, self.provider = self.provider, None
        if provider is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(provider.shutdown(), grace)
        if not self.repos.kept:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.to_thread(shutil.rmtree, self.root, True), grace)
        os._exit(0)  # a fenced node does nothing more for anyone

    async def shutdown(self) -> None:
        """Shut the provider down and remove this batch's clones and work directory (unless a kept
        worktree lives there)."""
        provider, self.provider = self.provider, None
        if provider is not None:
            with contextlib.suppress(Exception):
                await provider.shutdown()
        if not self.repos.kept:
            await asyncio.to_thread(shutil.rmtree, self.root, True)
        await asyncio.to_thread(_prune_empty, self.root.parent)

    # -- one task ----------------------------------------------------------------------------------

    async def run(self, job: Job) -> AsyncIterator[Events | Outcome]:
        """Run one attempt, yielding ``Events`` batches and then one ``Outcome`` (see the module doc).

        Cancelling it (``ray.cancel``) interrupts the task, removes a clean worktree and re-raises."""
        outbox = Outbox(self.redactor, redact_event)
        work = asyncio.get_running_loop().create_task(self._admit(job, outbox.put))
        self.works.add(work)
        work.add_done_callback(self.works.discard)
        try:
            async for batch in outbox.batches(work, self.config.flush_interval):
                yield Events(events=batch)
            yield work.result()
        finally:
            if not work.done():
                work.cancel()
                await asyncio.wait([work])

    async def push(self, url: str, branch: str, start: str, tip: str, bundle: bytes | None) -> PushOutcome:
        """Push an accepted attempt's ``tip`` to ``url``'s ``branch`` (never forced): asked by the
        driver only for the attempt it accepted, on the node that ran it or (that node lost) another
        one, which takes the commits from ``bundle``. See ``NodeRepos.push_tip``."""
        return await self.repos.push_tip(url, branch, start, tip, bundle)

    async def _admit(self, job: Job, on_event: Callable[[TaskEvent], None]) -> Outcome:
        """Run ``job`` unless this node is fenced or a newer attempt of the task came here already."""
        task_id = job.task.id
        refusal: str | None = None
        if self.watch.fenced is not None:
            refusal = f"the node {self.hostname} is fenced: {self.watch.fenced}"
        elif job.epoch < self.epochs.get(task_id, -1):
            refusal = f"attempt {job.attempt} (epoch {job.epoch}) is stale: a newer one came to this node"
        if refusal is not None:
            result = TaskResult(task_id=task_id, status="failed", reason=refusal, error_code="node_lost")
            return Outcome(result=result, epoch=job.epoch, fenced=refusal)
        self.epochs[task_id] = job.epoch

        def sink(task_event: TaskEvent) -> None:
            # The task's end is announced by the driver, after it published the attempt's work.
            event = task_event.event
            if not (isinstance(event, System) and event.subtype == "runner.finished"):
                on_event(task_event)

        outcome = await self._execute(job, sink)
        fenced = self.watch.fenced  # stopped by the fence: not an outcome of the task
        result = redact_event(outcome.result, self.redactor)
        return replace(outcome, result=result, epoch=job.epoch, fenced=fenced)

    async def _execute(self, job: Job, on_event: Callable[[TaskEvent], None]) -> Outcome:
        task = job.task
        on_event(
            notice(
                task.id,
                "placed",
                node_id=self.node_id,
                hostname=self.hostname,
                actor=self.config.name,
                attempt=job.attempt,
                epoch=job.epoch,
            )
        )

        def failed(reason: str, code: str) -> Outcome:
            return Outcome(
                result=TaskResult(task_id=task.id, status="failed", reason=reason, error_code=code)
            )

        if self.provider is None:
            return failed(f"the provider on {self.hostname} is not running", "provider_unavailable")
        directory = str(task.spec.cwd or ".")
        repo: Path | None = None
        branch: str | None = None
        worktree: Path | None = None
        base: str | None = None
        run_cwd = Path(directory)
        try:
            if job.repo is not None:
                repo = await self.repos.clone(job.repo, job.start) if job.clone else Path(job.repo)
                if job.clone:
                    run_cwd = repo / directory
            if job.worktree and repo is not None:
                branch = BRANCH_PREFIX + task.id
                worktree = self.root / "worktrees" / task.id
                if job.clone:
                    await self.repos.add_worktree(
                        repo,
                        worktree,
                        branch,
                        start=job.start,
                        reset=job.reset_branch,
                        reuse=job.reuse_branch,
                        stale=job.stale_worktree,
                        earlier=job.earlier_bundle,
                    )
                else:  # a shared repository: the attempt works on a branch of its own (see Job)
                    base = await self.repos.add_attempt_worktree(
                        repo,
                        worktree,
                        branch,
                        job.attempt_branch or branch,
                        start=job.start or "HEAD",
                        reuse=job.reuse_branch,
                    )
                subdir = directory if job.clone else str(Path(directory).relative_to(repo))
                run_cwd = worktree / subdir
                on_event(
                    notice(
                        task.id,
                        "worktree",
                        path=str(worktree),
                        branch=branch,
                        attempt_branch=job.attempt_branch,
                        node_id=self.node_id,
                    )
                )
        except _git.GitError as exc:
            what = f"the worktree for branch {branch}" if branch else f"the repository {job.repo}"
            hint = " (delete the branch or rename the task)" if branch and not job.reset_branch else ""
            return failed(f"cannot prepare {what} on {self.hostname}: {exc}{hint}", "worktree_failed")
        kept: Path | None = None
        ran: TaskResult | None = None
        try:
            if not run_cwd.is_dir():
                return failed(
                    f"directory {str(run_cwd)!r} does not exist on {self.hostname} (the nodes must share "
                    "the path, or give the repository as a git URL)",
                    "missing_directory",
                )
            try:
                spec = replace(task.spec, cwd=str(run_cwd))
                if spec.temp_dir is None:  # the task's own temporary directory, in this node's box
                    made = await asyncio.to_thread(_box.fresh_private_dir, self.root / "tmp" / task.id)
                    spec = replace(spec, temp_dir=str(made))
                task = replace(task, spec=spec)
                ran = await run_task(
                    task,
                    provider=self.provider,
                    on_event=on_event,
                    stop=self.stop_event,
                    resume_session=job.resume_session,
                )
            except UsageError as exc:
                return failed(f"{exc} (on {self.hostname})", "usage")
            diff: str | None = None
            if ran.start_head is not None:
                # The task's final diff (every turn's changes), read before its worktree is removed.
                with contextlib.suppress(_git.GitError):
                    diff = self.redactor.text(await _git.final_diff(run_cwd, ran.start_head))
        finally:
            if worktree is not None and repo is not None:
                kept = await asyncio.shield(self.repos.remove_worktree(repo, worktree))
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, self.root / "tmp" / task.id, True))
        bundle: bytes | None = None
        tip: str | None = None
        if repo is not None and branch is not None:
            tip = await branch_tip(repo, branch if job.clone else job.attempt_branch or branch)
        if job.clone and repo is not None and branch is not None and job.start is not None:
            bundle = await self.repos.bundle(repo, branch, job.start)
        return Outcome(
            result=ran,
            diff=diff,
            branch=branch,
            worktree_kept=str(kept) if kept is not None else None,
            bundle=bundle,
            tip=tip,
            base=base,
            attempt_branch=None if job.clone else job.attempt_branch,
        )


def _prune_empty(top: Path) -> None:
    """Remove the empty directories under ``top`` and ``top`` itself when empty (what a dead actor on
    this machine left); anything with a file in it stays."""
    for dirpath, _dirs, _files in os.walk(top, topdown=False):  # children before their parents
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)


def _start_lock(state_dir: Path | None) -> contextlib.AbstractAsyncContextManager[None]:
    """Held around the provider's start: app-servers that initialise one ``CODEX_HOME`` (the entry's
    ``state_dir``) at the same moment race on its state database (two Ray nodes on one machine, a
    replacement actor, or a home shared over a network filesystem). The lock file lives in that
    directory (else in the temp dir). No state directory: no lock."""
    if state_dir is None:
        return contextlib.nullcontext()
    if state_dir.is_dir():
        return flock(state_dir / ".agent-fleet-start.lock")
    digest = hashlib.sha256(str(state_dir).encode()).hexdigest()[:16]
    return flock(Path(tempfile.gettempdir()) / f"agent-fleet-start-{digest}.lock")
