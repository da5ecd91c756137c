"""One task's attempts on a Ray cluster, as the driver sees them: what each attempt is (``Pending``,
``Try``), how it ended when it did not end with an ``Outcome`` (``Lost``, ``Broken``), waiting on a
node that may be given up meanwhile (``unless_gone``, ``stream``), and publishing the work of the
attempt the driver accepted (``publish``: the task's branch moved to it in a shared repository, its
commit pushed with ``--push``). See ``_ray_driver``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from agent_fleet.runner import _git
from agent_fleet.runner._ray_node import Job, Outcome
from agent_fleet.runner._ray_pool import ActorPool, Worker, one_line
from agent_fleet.runner._ray_repo import PushOutcome, publish_branch
from agent_fleet.runner._tasks_file import BatchTask
from agent_fleet.runner._types import TaskEvent, notice
from agent_fleet.runner.task import TaskResult

__all__ = [
    "Broken",
    "Ending",
    "Gone",
    "Lost",
    "Pending",
    "Try",
    "finished_data",
    "publish",
    "stream",
    "unless_gone",
]

_T = TypeVar("_T")


@dataclass(slots=True, eq=False)
class Pending:
    """A task the driver has not finished: its job, its attempts so far, where not to place it again."""

    task: BatchTask
    job: Job
    attempt: int = 0
    epoch: int = 0
    avoid: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    branch_created: bool = False
    stale_worktree: str | None = None
    #: every attempt on the cluster and what it did (see ``Try``), the current one last
    tries: list[Try] = field(default_factory=list)
    #: the current attempt's turns that lost the model, waiting for the batch's ``ModelOutage``
    hits: set[asyncio.Task[None]] = field(default_factory=set)


@dataclass(slots=True, eq=False)
class Try:
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
class Lost:
    """The attempt is lost with its node, retried: its actor died (``actor_died``), the driver gave the
    node up while it ran (``abandoned``), or the node fenced itself (``fenced``)."""

    reason: str
    actor_died: bool = False
    abandoned: bool = False
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class Broken:
    """The node raised (a bug, not an outcome): not retried."""

    reason: str


class Gone(Exception):
    """The attempt's worker was given up while the driver waited for it."""


Ending = Outcome | Lost | Broken


async def unless_gone(awaitable: Awaitable[_T], gone: asyncio.Event) -> _T:
    """``await awaitable``, unless ``gone`` is set first (then ``Gone``; the await is cancelled)."""
    if gone.is_set():
        raise Gone
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
        raise Gone
    return future.result()


async def stream(items: Any, gone: asyncio.Event) -> AsyncIterator[Any]:
    """The items of a streaming actor call, until it ends or ``gone`` is set (``Gone``)."""
    iterator = items.__aiter__()
    while True:
        try:
            ref = await unless_gone(iterator.__anext__(), gone)
        except StopAsyncIteration:
            return
        yield await unless_gone(ref, gone)


def finished_data(result: TaskResult) -> dict[str, Any]:
    """A ``runner.finished`` notice's data for ``result``."""
    return {k: v for k, v in result.to_dict().items() if k != "final_text"}


async def publish(
    pool: ActorPool, worker: Worker, job: Job, outcome: Outcome, emit: Callable[[TaskEvent], None]
) -> Outcome:
    """The accepted attempt's work leaves its node: the task's branch moved to it (shared repository),
    its commits pushed (``--push``; not for a stopped run: ``--resume`` pushes it; a ``runner.push``
    notice goes to ``emit``)."""
    result = outcome.result
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
        pushed = await _push(pool, worker, job, outcome)
        emit(notice(job.task.id, "push", **pushed.to_dict()))
        result = _after_push(result, pushed, bundled=True)
    return replace(outcome, result=result, push=pushed)


async def _push(pool: ActorPool, first: Worker, job: Job, outcome: Outcome) -> PushOutcome:
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
            pushed: PushOutcome = await unless_gone(call, worker.gone)
            return pushed
        except Gone:
            errors.append(f"{worker.where} was lost")
        except pool.ray.exceptions.RayError as exc:
            errors.append(f"{worker.where}: {one_line(exc, 200)}")
        worker = pool.any_alive(besides=tried)
    error = "no node could push it (" + "; ".join(errors) + ")"
    return PushOutcome(branch=outcome.branch, commit=outcome.tip, pushed=False, error=error)


def _after_push(result: TaskResult, pushed: PushOutcome, bundled: bool) -> TaskResult:
    """A task whose branch was to be pushed and was not did not deliver: a success becomes a failure
    (``push_failed``); a failure keeps its own reason (the push's is in the ``runner.push`` notice)."""
    if pushed.pushed or result.status != "succeeded":
        return result
    where = " (its commits are in the task's bundle)" if bundled else ""
    reason = f"the push of {pushed.branch} was refused: {pushed.error}{where}"
    return replace(result, status="failed", reason=reason, error_code="push_failed")
