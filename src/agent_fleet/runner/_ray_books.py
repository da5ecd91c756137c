"""The driver's record of a Ray batch (``BatchBooks``, which ``RayBatch`` builds on): each task's
transcript, what the ledger learns as its attempts run (their start, session, turns, and every attempt
that was not accepted, with what it did), its entry once it ends, ``summary.json`` at the end, and in a
shared repository what its attempts left there (``adopt_interrupted`` when resuming after a dead run,
``_settle_abandoned`` at the end). See ``_ray_driver``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent_fleet.events import System, ToolUse
from agent_fleet.runner import _git
from agent_fleet.runner._batch_types import entries_from_summary
from agent_fleet.runner._ledger_views import write_records
from agent_fleet.runner._ray_attempts import Ending, Pending
from agent_fleet.runner._ray_node import BRANCH_PREFIX, Job
from agent_fleet.runner._ray_pool import ActorPool, Worker
from agent_fleet.runner._ray_repo import PushOutcome, branch_tip, publish_branch, repo_lock
from agent_fleet.runner._record import FILES_LIMIT
from agent_fleet.runner._types import EventSink, TaskEvent
from agent_fleet.runner.batch import BatchEntry
from agent_fleet.runner.ledger import Ledger
from agent_fleet.runner.ray_backend import RayBatchEntry, RayBatchResult, RayNode
from agent_fleet.runner.task import TaskResult
from agent_fleet.runner.transcript import TranscriptWriter

__all__ = ["BatchBooks", "adopt_interrupted", "cluster_nodes", "unended_attempts"]


class BatchBooks:
    """The record-keeping half of ``RayBatch`` (see the module docstring)."""

    def __init__(
        self,
        *,
        out: Path,
        on_event: EventSink | None,
        on_result: Callable[[BatchEntry], None] | None,
        complete: Callable[[RayBatchEntry], RayBatchEntry] | None,
        fence_timeout: float,
    ) -> None:
        self.out = out
        self.on_event = on_event
        self.on_result = on_result
        self.complete = complete
        self.fence_timeout = fence_timeout
        self.ledger: Ledger | None = None  # the batch's record (see runner.ledger), from ``prepare`` on
        self.planned: dict[str, Job] = {}
        #: attempts an earlier run started in a shared repository and never ended (it died): cleared
        self.stale: list[tuple[str, dict[str, Any]]] = []
        #: of those, the attempt branches whose commits the task's branch took on resuming (-> the tip)
        self.adopted: dict[str, str] = {}
        self.entries: dict[str, RayBatchEntry] = {}
        self.writers: dict[str, TranscriptWriter] = {}

    async def _wait(self, futures: set[asyncio.Task[Ending]], seconds: float) -> None:
        """Wait for ``futures`` up to ``seconds`` (``RayBatch`` asks for heartbeats meanwhile)."""
        raise NotImplementedError

    def _writer(self, task_id: str) -> TranscriptWriter:
        writer = self.writers.get(task_id)
        if writer is None:
            writer = self.writers[task_id] = TranscriptWriter(self.out / f"{task_id}.jsonl")
        return writer

    def _deliver(self, pending: Pending, task_event: TaskEvent) -> None:
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
                    # with the commit the run started from: kept the first time (the base on resume)
                    head = event.data.get("start_head")
                    base_head = head if isinstance(head, str) else None
                    self.ledger.session(pending.task.id, session_id, base_head=base_head)
            elif event.subtype in ("runner.started", "runner.retry"):
                current.turns += 1
                self.ledger.attempt(pending.task.id)  # as it starts, as on a local batch
        self._emit(task_event)

    def _note_attempt(self, pending: Pending) -> None:
        """An attempt that was not accepted, in the task's ledger history, with what it did."""
        if self.ledger is not None:
            self.ledger.annotate(pending.task.id, "attempt", pending.tries[-1].to_dict())

    def _emit(self, task_event: TaskEvent) -> None:
        self._writer(task_event.task_id).write(task_event)
        if self.on_event is not None:
            self.on_event(task_event)

    def _finish(
        self,
        pending: Pending,
        worker: Worker | None,
        result: TaskResult,
        *,
        branch: str | None = None,
        kept: Path | None = None,
        bundle: Path | None = None,
        push: PushOutcome | None = None,
        recorded: bool = False,
        diff: str | None = None,
        files: Sequence[str] = (),
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
        if entry.recorded is not None and not entry.recorded.get("shared_tree"):
            # git's view of the task's own tree, read on its node, as a local batch adds it (in a tree
            # other tasks share, git's view mixes their work: what the session reported stays)
            seen = dict(entry.recorded)
            if diff is not None:
                seen["diff"] = diff
            reported = list(seen.get("files_changed") or [])
            seen["files_changed"] = list(dict.fromkeys([*reported, *files]))[:FILES_LIMIT]
            entry = replace(entry, recorded=seen)
        self.entries[task_id] = entry
        self._record(entry)
        writer = self.writers.pop(task_id, None)
        if writer is not None:
            writer.close()
        if self.on_result is not None:
            self.on_result(entry)

    def _record(self, entry: RayBatchEntry) -> None:
        if self.ledger is not None:
            self.ledger.finish(
                entry.result.task_id,
                result=entry.to_dict(),
                attempts=0,  # each turn was counted as it started (_deliver), as on a local batch
                worktree_kept=str(entry.worktree) if entry.worktree is not None else None,
            )

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
                if name in self.adopted:
                    detail["adopted"] = self.adopted[name]  # its commits went on with the task's branch
                self.ledger.annotate(task_id, "attempt", detail)

    def _summary(self, result: RayBatchResult) -> RayBatchResult:
        """``summary.json`` from the ledger (closed then), and ``result`` with every task's entry: those
        this run ran, the others as the ledger says (a resume keeps what earlier runs finished; those
        never started are the summary's compact list, as on a local batch)."""
        if self.ledger is None:
            text = json.dumps(result.to_dict(), indent=2) + "\n"
            (self.out / "summary.json").write_text(text, encoding="utf-8")
            return result
        extra = {
            "backend": "ray",
            "batch_id": result.batch_id,
            "nodes": [n.to_dict() for n in result.nodes],
        }
        try:
            _, payload = write_records(
                self.ledger,
                started_at=None,
                duration=result.duration,
                stopped=result.stopped,
                fatal=result.fatal,
                provider_pids=result.provider_pids,
                extra=extra,
            )
        finally:
            self.ledger.close()
            self.ledger = None
        return replace(result, entries=entries_from_summary(payload, self.entries), summary=payload)


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


async def adopt_interrupted(
    planned: Mapping[str, Job], stale: Sequence[tuple[str, Mapping[str, Any]]]
) -> dict[str, str]:
    """Resuming after a run that died (its driver killed), in a shared repository: each task's newest
    attempt that run left unended holds the task's work as it stood, as a local batch's branch would.
    When that attempt's own branch continues the task's branch (or the start), the task's branch is
    moved to it, so the resumed session continues that work and its commits count. (That attempt was
    never given up: its run died with it. Its actor died with the driver; a node cut off stops within
    the fencing bound, and a commit it made meanwhile stays on the attempt's own branch.) Returns the
    attempt branches adopted, each with the commit the task's branch was set to."""
    newest: dict[str, Mapping[str, Any]] = {}
    for task_id, started in stale:
        newest[task_id] = started  # (in the ledger's order: the last one started is the newest)
    adopted: dict[str, str] = {}
    for task_id, started in newest.items():
        job = planned.get(task_id)
        name = started.get("attempt_branch")
        if job is None or job.repo is None or job.clone or not job.worktree or not isinstance(name, str):
            continue
        repo, branch = Path(job.repo), BRANCH_PREFIX + task_id
        try:
            tip = await branch_tip(repo, name)
            base = await branch_tip(repo, branch)
            since = base or job.start
            if tip is None or tip == base or since is None:
                continue
            await _git.git(repo, "merge-base", "--is-ancestor", since, tip)  # (raises: it does not)
            await publish_branch(repo, branch, tip, base=base, attempt_branch=None)
        except _git.GitError:
            continue  # it does not continue the task's branch, or that moved meanwhile: left as it is
        adopted[name] = tip
    return adopted


def unended_attempts(ledger: Ledger, task_id: str) -> list[dict[str, Any]]:
    """The attempts of ``task_id`` the ledger saw start (with their own branch) and never end."""
    started: dict[str, dict[str, Any]] = {}
    for what, detail in ledger.history(task_id):
        name = detail.get("attempt_branch")
        if what == "attempt_started" and isinstance(name, str):
            started[name] = detail
        elif what == "attempt" and isinstance(name, str):
            started.pop(name, None)
    return list(started.values())


def cluster_nodes(pool: ActorPool) -> tuple[RayNode, ...]:
    """The batch's nodes as the summary lists them: each actor that ran (or was lost), then each node
    left out (``actor`` empty; ``lost`` says why)."""
    ran = tuple(
        RayNode(
            node_id=w.info.node_id,
            hostname=w.info.hostname,
            actor=w.name,
            pid=w.info.pid or None,
            provider_pid=w.info.provider_pid,
            tasks=tuple(w.tasks),
            lost=w.lost,
        )
        for w in pool.workers
        if w.lost is not None or (w.alive and w.info.pid)
    )
    left_out = tuple(
        RayNode(node_id=e.node_id, hostname=e.hostname, actor="", provider_pid=None, lost=e.reason)
        for e in pool.excluded
    )
    return ran + left_out
