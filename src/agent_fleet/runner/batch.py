"""``run_batch``: many tasks on ONE provider (one codex app-server child), ``jobs`` at a time.

The tasks file is JSON Lines, one task a line (``agent_fleet.runner._tasks_file`` lists every key)::

    {"id": "fix-1", "prompt": "...", "cwd": "repo", "gate_cmd": "pytest -q", "require_commit": true,
     "model": "gpt-5.5", "timeout": 600, "review": "P1", "env": {"CI": "1"}}

``load_tasks`` raises ``UsageError`` naming the line of the first bad entry.

Theory of operation
-------------------
Before any work: every distinct task directory exists (and is in a git repository with a commit when
``worktrees`` is on; one ``git`` call per distinct directory, run concurrently), ``out_dir`` can be made
and holds no batch yet (unless ``resume``), the providers pass their check and start; a failure there
raises (``UsageError``, ``ProviderUnavailable``, ``AuthenticationError``) and nothing was written.

The batch's record is the ledger in ``out_dir/batch.db`` (``agent_fleet.runner.ledger``): every task's
state is written there as it changes, and ``summary.json`` is derived from it at the end (and by the
CLI when it must leave by force). ``jobs`` workers take the tasks in order; nothing is kept per queued
task beyond its parsed line, so a batch of 10,000 starts at once and stops at once.

Each task runs ``run_task`` on the shared provider, its transcript appended to ``out_dir/<id>.jsonl``.
With ``worktrees`` a task runs in its own ``git worktree`` on a new branch ``agent-fleet/<id>``
created from the repository's HEAD; afterwards the worktree is removed and the branch stays for
review. A worktree with uncommitted changes is kept (its path is in the summary), so no work is lost.

A failed task does not stop the others. A fatal result (provider unavailable, credential refused,
app-server died) or ``stop`` being set stops the batch: workers start nothing more, running turns are
interrupted (their tasks are recorded ``interrupted``, with their session), worktrees are cleaned up as
above and ``summary.json`` is written. Cancelling ``run_batch`` does the same, then re-raises.

``resume=True`` continues the batch recorded in ``out_dir``: succeeded and failed tasks are kept,
interrupted ones (and ones left ``running`` by a process that died) resume their session with a
follow-up saying the run was interrupted, queued ones start; a resumed task reuses its branch and
worktree. ``rerun_failed=True`` also runs the failed ones again, afresh, on their branch.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_fleet.contract import Provider
from agent_fleet.errors import UsageError
from agent_fleet.events import System, TokenUsage
from agent_fleet.runner import _git, _worktrees
from agent_fleet.runner._admit import Locator, Where, admit, make_out, task_of
from agent_fleet.runner._tasks_file import (
    BatchTask,
    build_task,
    iter_tasks,
    load_tasks,
    parse_tasks,
)
from agent_fleet.runner._types import EventSink, TaskEvent
from agent_fleet.runner.ledger import (
    Ledger,
    LedgerRow,
    dump_summary,
    holds_batch,
    summary_payload,
)
from agent_fleet.runner.providers import check_provider, make_provider, provider_entry
from agent_fleet.runner.task import Task, TaskResult, TaskStatus, run_task
from agent_fleet.runner.transcript import TranscriptWriter

__all__ = [
    "BRANCH_PREFIX",
    "BatchEntry",
    "BatchResult",
    "BatchTask",
    "iter_tasks",
    "load_tasks",
    "parse_tasks",
    "run_batch",
]

BRANCH_PREFIX = "agent-fleet/"
_PROVIDER_SHUTDOWN_LIMIT = 10.0  # seconds; a provider that does not stop by then is left to its own kill


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchEntry:
    """A task's outcome in a batch: its result, its branch, and a worktree left in place (if any).

    ``state`` is the ledger's (``queued``, ``running``, ``interrupted``, ``finished``)."""

    result: TaskResult
    branch: str | None = None
    worktree: Path | None = None
    state: str = "finished"
    runs: int = 1

    def to_dict(self) -> dict[str, Any]:
        out = self.result.to_dict()
        out.pop("final_text", None)
        out["branch"] = self.branch
        out["worktree_kept"] = str(self.worktree) if self.worktree is not None else None
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchResult:
    entries: tuple[BatchEntry, ...]
    duration: float
    stopped: str | None = None
    fatal: bool = False
    summary_path: Path | None = None
    provider_pids: tuple[int, ...] = ()
    #: ``summary.json`` as written (derived from the ledger)
    summary: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.stopped is None and all(e.result.ok for e in self.entries)

    def to_dict(self) -> dict[str, Any]:
        if self.summary is not None:
            return dict(self.summary)
        counts: dict[str, int] = {}
        for e in self.entries:
            counts[e.result.status] = counts.get(e.result.status, 0) + 1
        return {
            "tasks": [e.to_dict() for e in self.entries],
            "counts": counts,
            "duration": round(self.duration, 3),
            "stopped": self.stopped,
            "fatal": self.fatal,
            "provider_pids": list(self.provider_pids),
        }


@dataclass(slots=True)
class _State:
    stop: asyncio.Event
    ledger: Ledger | None = None
    stopped: str | None = None
    fatal: bool = False
    pids: set[int] = field(default_factory=set)
    locks: dict[Path, asyncio.Lock] = field(default_factory=dict)

    def lock(self, repo: Path) -> asyncio.Lock:
        return self.locks.setdefault(repo, asyncio.Lock())


class _Providers:
    """The batch's providers by name: the default one and any a task's ``provider`` asks for."""

    def __init__(self, given: Provider | None, default_name: str, options: Any) -> None:
        self.default_name = given.name if given is not None else default_name
        self.options = options
        self.given = given
        self.running: dict[str, Provider] = {}

    async def start(self, names: set[str]) -> None:
        for name in sorted(names):
            if self.given is not None and name == self.default_name:
                await self.given.start()
                self.running[name] = self.given
                continue
            options = options_for(name, self.options)
            check_provider(name, options)
            provider = make_provider(name, options)
            self.running[name] = provider
            await provider.start()

    def get(self, name: str | None) -> Provider:
        return self.running[name or self.default_name]

    async def shutdown(self) -> None:
        for provider in self.running.values():
            if provider is not self.given:
                with contextlib.suppress(Exception, TimeoutError):
                    await asyncio.wait_for(asyncio.shield(provider.shutdown()), _PROVIDER_SHUTDOWN_LIMIT)


def options_for(name: str, options: Any) -> Any:
    """``options`` when they are provider ``name``'s options type, else None (its defaults): a task that
    asks for another provider than the batch's gets that provider's defaults."""
    return options if isinstance(options, provider_entry(name).options_type) else None


async def run_batch(
    tasks: Iterable[BatchTask] | None,
    *,
    template: Task,
    out_dir: str | os.PathLike[str],
    jobs: int = 4,
    worktrees: bool = False,
    provider: Provider | None = None,
    provider_name: str = "codex",
    options: Any = None,
    cwd: str | os.PathLike[str] | None = None,
    on_event: EventSink | None = None,
    on_result: Callable[[BatchEntry], None] | None = None,
    stop: asyncio.Event | None = None,
    backend: str = "local",
    ray_address: str | None = None,
    repo_url: str | None = None,
    resume: bool = False,
    rerun_failed: bool = False,
    meta: Mapping[str, Any] | None = None,
) -> BatchResult:
    """Run ``tasks`` (see the module docstring). ``template`` gives every setting a line does not.

    ``options`` is the options type of ``provider_name``'s registry entry (``runner.providers``).
    ``on_result(entry)`` is called as each task ends. Returns a ``BatchResult`` (also written to
    ``out_dir/summary.json``). ``out_dir`` must not hold a batch already, unless ``resume`` (then
    ``tasks`` is None: the batch's own are run); ``meta`` is kept in the new ledger (the CLI keeps its
    settings there). ``tasks`` may be any iterable (a generator reading a file): it is read once, in
    chunks, and nothing is kept per queued task.

    ``backend="ray"`` runs the tasks on a Ray cluster instead (``jobs`` per node; ``ray_address``,
    ``repo_url``: see ``agent_fleet.runner.ray_backend.run_batch_ray``; ``provider`` cannot be given).
    """
    out = Path(out_dir)
    if rerun_failed and not resume:
        raise UsageError("rerun_failed needs resume (`--rerun failed` goes with `--resume OUT`)")
    if not resume and holds_batch(out):
        Ledger.create(out, [])  # raises the UsageError that says how to continue it
    if (tasks is None) != resume:
        raise UsageError("run_batch: give tasks for a new batch, or tasks=None with resume=True")
    if backend == "ray":
        if provider is not None:
            raise UsageError("backend='ray' starts one provider per node: pass provider_name, not provider")
        from agent_fleet.runner.ray_backend import run_batch_ray

        resumed: Ledger | None = None
        if resume:
            resumed = Ledger.open(out)
            resumed.prepare_resume(rerun_failed=rerun_failed)
            tasks = [task_of(row, out) for row in resumed.rows()]
        assert tasks is not None
        return await run_batch_ray(
            list(tasks),
            template=template,
            out_dir=out_dir,
            jobs=jobs,
            worktrees=worktrees,
            provider_name=provider_name,
            options=options,
            cwd=cwd,
            on_event=on_event,
            on_result=on_result,
            stop=stop,
            ray_address=ray_address,
            repo_url=repo_url,
            meta=meta,
            resume_from=resumed,
        )
    if backend != "local":
        raise UsageError(f"unknown batch backend {backend!r}: choose local or ray")
    if ray_address is not None or repo_url is not None:
        raise UsageError("ray_address and repo_url need backend='ray'")
    if jobs < 1:
        raise UsageError(f"-j/--jobs must be >= 1, not {jobs}")
    default_cwd = Path(cwd) if cwd is not None else Path(template.spec.cwd or os.getcwd())
    locator = Locator(default_cwd, worktrees=worktrees, template_needs_commit=template.gate.require_commit)
    created = make_out(out)
    ledger = Ledger.open(out) if resume else Ledger.create(out, [], meta=meta)
    providers = _Providers(provider, provider_name, options)
    try:
        asked = await admit(
            tasks if not resume else None,
            ledger,
            locator,
            out,
            default_provider=providers.default_name,
            template_review=template.review is not None
            and not (provider is not None and provider.capabilities.supports_review),
        )
        await providers.start({name or providers.default_name for name in asked})
    except BaseException:
        await providers.shutdown()
        if resume:
            ledger.close()
        else:  # nothing ran: leave nothing behind
            ledger.discard()
            if created:
                with contextlib.suppress(OSError):
                    os.rmdir(out)
        raise
    state = _State(stop=asyncio.Event(), ledger=ledger)
    started = time.monotonic()
    wt_root = Path(tempfile.mkdtemp(prefix="agent-fleet-worktrees-")) if worktrees else None
    watcher: asyncio.Task[None] | None = None
    try:
        if resume:
            ledger.prepare_resume(rerun_failed=rerun_failed)
        for p in providers.running.values():
            _note_pid(state, p)
        if stop is not None:
            watcher = asyncio.get_running_loop().create_task(_watch(stop, state))
        # One shared iterator over the ledger's runnable rows (read in pages): each is taken by one worker.
        pending = ledger.rows(states=("queued", "running", "interrupted"))

        async def worker() -> None:
            for row in pending:
                if state.stop.is_set():
                    return
                t = task_of(row, out)
                entry = await _run_one(
                    t, ledger.get(t.id), template, providers, locator.get(t), wt_root, out, state, on_event
                )
                _note_pid(state, providers.get(t.provider))
                if entry.result.fatal and state.stopped is None:
                    state.stopped = f"fatal error in task {t.id}: {entry.result.reason}"
                    state.fatal = True
                    state.stop.set()
                if on_result is not None:
                    on_result(entry)

        workers = [
            asyncio.get_running_loop().create_task(worker(), name=f"batch:worker{i}") for i in range(jobs)
        ]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            state.stopped = state.stopped or "cancelled"
            state.stop.set()
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
    finally:
        if watcher is not None:
            watcher.cancel()
        await providers.shutdown()
        if wt_root is not None:
            with contextlib.suppress(OSError):
                wt_root.rmdir()  # only when every worktree was removed
        result = _result(state, time.monotonic() - started, out)
    return result


def _note_pid(state: _State, provider: Provider) -> None:
    pid = provider.pid
    if pid is not None and pid not in state.pids:
        state.pids.add(pid)
        if state.ledger is not None:
            state.ledger.note_pid(pid)


async def _watch(stop: asyncio.Event, state: _State) -> None:
    await stop.wait()
    if state.stopped is None:
        state.stopped = "stopped by the user"
    state.stop.set()


def _result(state: _State, duration: float, out: Path) -> BatchResult:
    ledger = state.ledger
    if ledger is None:  # stopped before the ledger existed: nothing ran
        return BatchResult(entries=(), duration=duration, stopped=state.stopped, fatal=state.fatal)
    try:
        extra = {
            "duration": round(duration, 3),
            "stopped": state.stopped,
            "fatal": state.fatal,
            "provider_pids": sorted(state.pids),
        }
        payload = summary_payload(ledger, extra)
        path = dump_summary(out, payload)
    finally:
        ledger.close()
    return BatchResult(
        entries=tuple(entry_from_summary(t) for t in payload["tasks"]),
        duration=duration,
        stopped=state.stopped,
        fatal=state.fatal,
        summary_path=path,
        provider_pids=tuple(sorted(state.pids)),
        summary=payload,
    )


def entry_from_summary(t: Mapping[str, Any]) -> BatchEntry:
    """A summary entry back as a ``BatchEntry`` (the gate and review details stay in the summary)."""
    if t.get("state") == "queued" and not t.get("runs"):  # never started: kept cheap for a big fleet
        result = TaskResult(task_id=str(t["task_id"]), status="cancelled", reason=str(t.get("reason") or ""))
        return BatchEntry(result=result, state="queued", runs=0)
    tokens = int(t.get("tokens") or 0)
    status: TaskStatus = t.get("status", "cancelled")
    result = TaskResult(
        task_id=str(t["task_id"]),
        status=status,
        reason=str(t.get("reason") or ""),
        followups=int(t.get("followups") or 0),
        duration=float(t.get("duration") or 0.0),
        usage=TokenUsage(total_tokens=tokens) if tokens else None,
        session_id=t.get("session_id"),
        cwd=t.get("cwd"),
        reviews=int(t.get("reviews") or 0),
        start_head=t.get("start_head"),
        end_head=t.get("end_head"),
        commands=int(t.get("commands") or 0),
        declined=int(t.get("declined") or 0),
        error_code=t.get("error_code"),
        fatal=bool(t.get("fatal")),
        transcript=Path(t["transcript"]) if t.get("transcript") else None,
    )
    kept = t.get("worktree_kept")
    return BatchEntry(
        result=result,
        branch=t.get("branch"),
        worktree=Path(kept) if kept else None,
        state=str(t.get("state") or "finished"),
        runs=int(t.get("runs") or 0),
    )


async def _run_one(
    t: BatchTask,
    row: LedgerRow,
    template: Task,
    providers: _Providers,
    here: Where,
    wt_root: Path | None,
    out: Path,
    state: _State,
    on_event: EventSink | None,
) -> BatchEntry:
    ledger = state.ledger
    assert ledger is not None
    branch: str | None = None
    worktree: Path | None = None
    run_cwd = here.cwd
    repo = here.repo
    if wt_root is not None and repo is not None:
        branch = row.branch or BRANCH_PREFIX + t.id
        previous = row.worktree_kept or row.worktree
        try:
            worktree = await _worktrees.prepare(
                repo,
                branch,
                wt_root / t.id,
                previous=Path(previous) if previous else None,
                reuse=row.runs > 0,
                lock=state.lock(repo),
            )
        except _git.GitError as exc:
            reason = (
                f"cannot create the worktree for branch {branch}: {exc} "
                "(delete the branch or rename the task)"
            )
            failed = TaskResult(task_id=t.id, status="failed", reason=reason, error_code="worktree")
            ledger.start(t.id, branch=None, worktree=None, transcript=str(out / f"{t.id}.jsonl"))
            entry = BatchEntry(result=failed)
            ledger.finish(t.id, result=entry.to_dict(), attempts=0, worktree_kept=None)
            return entry
        run_cwd = worktree / here.cwd.relative_to(repo)
    transcript = out / f"{t.id}.jsonl"
    ledger.start(
        t.id, branch=branch, worktree=str(worktree) if worktree else None, transcript=str(transcript)
    )
    task = build_task(t, template, run_cwd)
    resume_session = row.session_id if row.resumable and not row.fresh else None

    def sink(task_event: TaskEvent) -> None:
        event = task_event.event
        if isinstance(event, System) and event.subtype == "runner.session":
            session_id = event.data.get("session_id")
            if isinstance(session_id, str):
                ledger.session(t.id, session_id)
        if on_event is not None:
            on_event(task_event)

    kept: Path | None = None
    result: TaskResult | None = None
    try:
        with TranscriptWriter(transcript) as writer:
            try:
                result = await run_task(
                    task,
                    provider=providers.get(t.provider),
                    on_event=sink,
                    transcript=writer,
                    stop=state.stop,
                    resume_session=resume_session,
                )
            except UsageError as exc:  # this task's settings cannot run (e.g. a review its provider lacks)
                result = TaskResult(
                    task_id=t.id, status="failed", reason=f"line {t.line}: {exc}", error_code="usage_error"
                )
    finally:
        cancelled_again = False
        if worktree is not None and repo is not None:
            kept, cancelled_again = await _worktrees.settle(repo, worktree, state.lock(repo))
        if result is None:  # cancelled (a forced stop): the run is interrupted, its session kept
            result = TaskResult(
                task_id=t.id,
                status="cancelled",
                reason="cancelled before it finished",
                error_code="cancelled",
                cwd=str(run_cwd),
                transcript=transcript,
            )
        entry = BatchEntry(result=result, branch=branch, worktree=kept, runs=row.runs + 1)
        ledger.finish(
            t.id,
            result=entry.to_dict(),
            attempts=int(getattr(result, "attempts", 1)),
            worktree_kept=str(kept) if kept is not None else None,
        )
        if cancelled_again:
            raise asyncio.CancelledError
    return entry
