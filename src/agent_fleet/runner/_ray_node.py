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
batch into its work directory; commits come back to the driver as a git bundle of the task's branch).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
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
from agent_fleet.runner import _git
from agent_fleet.runner._delta_redact import DeltaCoalescer
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
_LOCK_POLL = 0.05


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeConfig:
    """What every ``NodeRunner`` of a batch is built with."""

    provider_name: str
    options: Any
    batch_id: str
    name: str
    work_root: str | None = None  # node-local directory for clones and worktrees (default: the temp dir)
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
    (its commits kept) in a new worktree. ``resume_session``: the session the task continues
    (``run_task(resume_session=...)``).
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Events:
    events: tuple[TaskEvent, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """The end of an attempt: the result, the branch, a worktree left in place and a bundle of commits."""

    result: TaskResult
    branch: str | None = None
    worktree_kept: str | None = None
    bundle: bytes | None = None


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
        base = Path(config.work_root) if config.work_root else Path(tempfile.gettempdir())
        self.root = base / "agent-fleet-ray" / config.batch_id / self.node_id[:12]
        self.kept: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._clones: dict[str, Path] = {}

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> NodeInfo:
        """Check and start this node's provider. Failures are returned (``error_kind``), not raised:
        agent-fleet's exceptions are not made to cross a process boundary."""
        info = NodeInfo(node_id=self.node_id, hostname=self.hostname, pid=os.getpid())
        try:
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
        if not self.kept:
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
            on_event(
                notice(
                    task.id, "finished", **{k: v for k, v in result.to_dict().items() if k != "final_text"}
                )
            )
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
                repo = await self._clone(job.repo, job.start) if job.clone else Path(job.repo)
                if job.clone:
                    run_cwd = repo / directory
            if job.worktree and repo is not None:
                branch = BRANCH_PREFIX + task.id
                worktree = self.root / "worktrees" / task.id
                await self._add_worktree(repo, worktree, branch, job)
                subdir = directory if job.clone else str(Path(directory).relative_to(repo))
                run_cwd = worktree / subdir
                on_event(notice(task.id, "worktree", path=str(worktree), branch=branch, node_id=self.node_id))
        except _git.GitError as exc:
            what = f"the worktree for branch {branch}" if branch else f"the repository {job.repo}"
            hint = " (delete the branch or rename the task)" if branch and not job.reset_branch else ""
            return failed(f"cannot prepare {what} on {self.hostname}: {exc}{hint}", "worktree_failed")
        kept: Path | None = None
        try:
            if not run_cwd.is_dir():
                return failed(
                    f"directory {str(run_cwd)!r} does not exist on {self.hostname} (the nodes must share "
                    "the path, or give the repository as a git URL)",
                    "missing_directory",
                )
            task = replace(task, spec=replace(task.spec, cwd=str(run_cwd)))
            try:
                result = await run_task(
                    task,
                    provider=self.provider,
                    on_event=on_event,
                    stop=self.stop_event,
                    resume_session=job.resume_session,
                )
            except UsageError as exc:
                return failed(f"{exc} (on {self.hostname})", "usage")
        finally:
            if worktree is not None and repo is not None:
                kept = await asyncio.shield(self._remove_worktree(repo, worktree))
        bundle: bytes | None = None
        if job.clone and repo is not None and branch is not None and job.start is not None:
            bundle = await self._bundle(repo, branch, job.start)
        return Outcome(
            result=result, branch=branch, worktree_kept=str(kept) if kept is not None else None, bundle=bundle
        )

    # -- git ---------------------------------------------------------------------------------------

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    @contextlib.asynccontextmanager
    async def _repo_lock(self, repo: Path) -> AsyncIterator[None]:
        """Serialise worktree changes in ``repo``: among this actor's tasks, then across processes and
        nodes (an ``flock`` on a file in the git directory; polled so cancellation never leaks it)."""
        async with self._lock(str(repo)):
            common = Path(await _git.git(repo, "rev-parse", "--git-common-dir"))
            async with _flock((common if common.is_absolute() else repo / common) / "agent-fleet.lock"):
                yield

    async def _clone(self, url: str, start: str | None) -> Path:
        """This node's clone of ``url`` for this batch (bare; made once, then reused)."""
        async with self._lock("clone:" + url):
            if url in self._clones:
                return self._clones[url]
            target = self.root / "repos" / str(len(self._clones))
            if not (target / "HEAD").exists():
                await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
                await _git.git(self.root, "clone", "--quiet", "--bare", url, str(target), time_limit=600)
            if start is not None and not await _has_commit(target, start):
                await _git.git(target, "fetch", "--quiet", url, start, time_limit=600)
            self._clones[url] = target
            return target

    async def _add_worktree(self, repo: Path, worktree: Path, branch: str, job: Job) -> None:
        start = job.start or "HEAD"
        async with self._repo_lock(repo):
            if job.reuse_branch and not job.reset_branch and await _has_commit(repo, f"refs/heads/{branch}"):
                # A resumed batch: the branch as the earlier run left it. `--force`: an earlier worktree
                # (kept for its uncommitted work) may still hold it; that one is left as it is.
                await _git.git(repo, "worktree", "prune")
                await asyncio.to_thread(shutil.rmtree, worktree, True)
                await asyncio.to_thread(worktree.parent.mkdir, parents=True, exist_ok=True)
                await _git.git(repo, "worktree", "add", "--quiet", "--force", str(worktree), branch)
                return
            if job.reset_branch:
                # An earlier attempt died holding the branch in its worktree: drop that worktree (on this
                # node it still exists; on another node's disk it is gone and `prune` forgets it).
                for stale in {job.stale_worktree, str(worktree)} - {None}:
                    with contextlib.suppress(_git.GitError):
                        await _git.git(repo, "worktree", "remove", "--force", str(stale))
                await _git.git(repo, "worktree", "prune")
                await asyncio.to_thread(shutil.rmtree, worktree, True)
            await asyncio.to_thread(worktree.parent.mkdir, parents=True, exist_ok=True)
            flag = "-B" if job.reset_branch else "-b"
            await _git.git(repo, "worktree", "add", "--quiet", flag, branch, str(worktree), start)

    async def _remove_worktree(self, repo: Path, worktree: Path) -> Path | None:
        """Remove a clean worktree (the branch stays); keep a dirty one and return its path."""
        try:
            if await _git.is_dirty(worktree):
                self.kept.add(str(worktree))
                return worktree
            async with self._repo_lock(repo):
                await _git.git(repo, "worktree", "remove", str(worktree))
        except _git.GitError:
            self.kept.add(str(worktree))
            return worktree
        return None

    async def _bundle(self, repo: Path, branch: str, start: str) -> bytes | None:
        """A git bundle of ``branch``'s commits after ``start`` (None when there are none)."""
        try:
            if int(await _git.git(repo, "rev-list", "--count", f"{start}..{branch}") or 0) == 0:
                return None
            path = self.root / "bundles" / (branch.replace("/", "_") + ".bundle")
            await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
            await _git.git(repo, "bundle", "create", "--quiet", str(path), branch, f"^{start}")
            data = await asyncio.to_thread(path.read_bytes)
            await asyncio.to_thread(path.unlink)
            return data
        except (_git.GitError, OSError):
            self.kept.add(str(repo))  # the commits stay in this node's clone: keep it
            return None


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
        return _flock(state_dir / ".agent-fleet-start.lock")
    digest = hashlib.sha256(str(state_dir).encode()).hexdigest()[:16]
    return _flock(Path(tempfile.gettempdir()) / f"agent-fleet-start-{digest}.lock")


@contextlib.asynccontextmanager
async def _flock(path: Path) -> AsyncIterator[None]:
    """An exclusive ``flock`` on ``path``, polled so a cancelled waiter never holds it."""
    with path.open("a") as handle:
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                await asyncio.sleep(_LOCK_POLL)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


async def _has_commit(repo: Path, sha: str) -> bool:
    try:
        await _git.git(repo, "cat-file", "-e", f"{sha}^{{commit}}")
    except _git.GitError:
        return False
    return True
