"""The node side of the Ray backend: ``NodeRunner``, one long-lived actor per node.

A ``NodeRunner`` owns its node's one provider (for codex: one app-server child, many threads on it,
as ``run_batch`` on a single machine) and runs up to ``jobs`` tasks at once on it. It is an async Ray
actor, so its methods are coroutines on one event loop: ``start`` -> ``run`` (many, concurrently) ->
``stop`` (a clean stop of the running tasks) -> ``shutdown``.

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

A task whose branch is to be pushed announces its end (``runner.finished``) after the push, with the
status the push left: a refused push turns a success into a failure (``push_failed``).
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
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent_fleet.contract import Provider
from agent_fleet.errors import AgentFleetError, AuthenticationError, ProviderUnavailable, UsageError
from agent_fleet.events import System
from agent_fleet.runner import _box, _git
from agent_fleet.runner._delta_redact import DeltaCoalescer
from agent_fleet.runner._ray_repo import NodeRepos, PushOutcome, flock
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
    (``run_task(resume_session=...)``). ``push`` (clone only): push the task's branch to the URL after
    the task (never forced; see ``_ray_repo``).
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Events:
    events: tuple[TaskEvent, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """The end of an attempt: the result, the branch, a worktree left in place, a bundle of commits and
    what became of pushing them."""

    result: TaskResult
    branch: str | None = None
    worktree_kept: str | None = None
    bundle: bytes | None = None
    push: PushOutcome | None = None


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
        return replace(info, provider_pid=self.provider.pid)

    async def stop(self) -> None:
        """Stop every running task cleanly (their results say ``cancelled``); later ones stop at once."""
        self.stop_event.set()

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
        pending: list[TaskEvent] = []
        ready = asyncio.Event()
        deltas = DeltaCoalescer(self.redactor)  # a node secret split over deltas is redacted whole

        def on_event(task_event: TaskEvent) -> None:
            for streamed in deltas.events(task_event):
                pending.append(replace(streamed, event=redact_event(streamed.event, self.redactor)))
            ready.set()

        work = asyncio.get_running_loop().create_task(self._execute(job, on_event))
        try:
            while True:
                if not work.done():
                    waiter = asyncio.get_running_loop().create_task(ready.wait())
                    try:
                        await asyncio.wait({work, waiter}, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        waiter.cancel()
                ready.clear()
                if pending:
                    batch = tuple(pending)
                    pending.clear()
                    yield Events(events=batch)
                if work.done():
                    break
                await asyncio.sleep(self.config.flush_interval)  # gather bursts (deltas) into one batch
            yield work.result()
        finally:
            if not work.done():
                work.cancel()
                await asyncio.wait([work])

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
            )
        )

        def failed(reason: str, code: str) -> Outcome:
            result = TaskResult(task_id=task.id, status="failed", reason=reason, error_code=code)
            on_event(notice(task.id, "finished", **_finished_data(result)))
            return Outcome(result=result)

        if self.provider is None:
            return failed(f"the provider on {self.hostname} is not running", "provider_unavailable")
        directory = str(task.spec.cwd or ".")
        repo: Path | None = None
        branch: str | None = None
        worktree: Path | None = None
        run_cwd = Path(directory)
        try:
            if job.repo is not None:
                repo = await self.repos.clone(job.repo, job.start) if job.clone else Path(job.repo)
                if job.clone:
                    run_cwd = repo / directory
            if job.worktree and repo is not None:
                branch = BRANCH_PREFIX + task.id
                worktree = self.root / "worktrees" / task.id
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
                subdir = directory if job.clone else str(Path(directory).relative_to(repo))
                run_cwd = worktree / subdir
                on_event(notice(task.id, "worktree", path=str(worktree), branch=branch, node_id=self.node_id))
        except _git.GitError as exc:
            what = f"the worktree for branch {branch}" if branch else f"the repository {job.repo}"
            hint = " (delete the branch or rename the task)" if branch and not job.reset_branch else ""
            return failed(f"cannot prepare {what} on {self.hostname}: {exc}{hint}", "worktree_failed")
        pushing = job.push and job.clone and branch is not None
        held: list[TaskEvent] = []

        def sink(task_event: TaskEvent) -> None:
            # With a push to come, the task's end is announced after it: the status may change.
            event = task_event.event
            if pushing and isinstance(event, System) and event.subtype == "runner.finished":
                held.append(task_event)
            else:
                on_event(task_event)

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
                    on_event=sink,
                    stop=self.stop_event,
                    resume_session=job.resume_session,
                )
            except UsageError as exc:
                return failed(f"{exc} (on {self.hostname})", "usage")
        finally:
            if worktree is not None and repo is not None:
                kept = await asyncio.shield(self.repos.remove_worktree(repo, worktree))
            if ran is None:
                for task_event in held:
                    on_event(task_event)  # no push after all (raised): the end as it was
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, self.root / "tmp" / task.id, True))
        result = ran
        bundle: bytes | None = None
        pushed: PushOutcome | None = None
        if job.clone and repo is not None and branch is not None and job.start is not None:
            bundle = await self.repos.bundle(repo, branch, job.start)
            if pushing and job.repo is not None and result.status != "cancelled":
                # A stopped run is pushed when it finishes (`--resume`); pushing now would delay the stop.
                pushed = await self.repos.push(repo, job.repo, branch, job.start)
                if pushed is not None:
                    on_event(notice(task.id, "push", **pushed.to_dict()))
                    result = _after_push(result, pushed, bundle is not None)
        if held:
            on_event(notice(task.id, "finished", **_finished_data(result)))
        return Outcome(
            result=result,
            branch=branch,
            worktree_kept=str(kept) if kept is not None else None,
            bundle=bundle,
            push=pushed,
        )


def _finished_data(result: TaskResult) -> dict[str, Any]:
    return {k: v for k, v in result.to_dict().items() if k != "final_text"}


def _after_push(result: TaskResult, pushed: PushOutcome, bundled: bool) -> TaskResult:
    """A task whose branch was to be pushed and was not did not deliver: a success becomes a failure
    (``push_failed``); a failure keeps its own reason (the push's is in the ``runner.push`` notice)."""
    if pushed.pushed or result.status != "succeeded":
        return result
    where = " (its commits are in the task's bundle)" if bundled else ""
    reason = f"the push of {pushed.branch} was refused: {pushed.error}{where}"
    return replace(result, status="failed", reason=reason, error_code="push_failed")


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
