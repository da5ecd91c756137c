"""``run_batch``: many tasks on ONE provider (one codex app-server child), ``jobs`` at a time.

The tasks file is JSON Lines, one task a line (``agent_fleet.runner._tasks_file`` lists every key)::

    {"id": "fix-1", "prompt": "...", "cwd": "repo", "gate_cmd": "pytest -q", "require_commit": true}

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

Records: every task's events also go to a ``TaskRecorder`` (commands, declines, model, timeline) and to
OpenTelemetry spans (no-ops unless an SDK is configured); a task's completed record is what the ledger
keeps. At the end ``summary.json`` (``build_summary`` over the ledger's records; redacted) and
``report.html`` (``agent_fleet.runner.report``) are written to ``out_dir``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_fleet.contract import Provider
from agent_fleet.errors import StorageError, UsageError
from agent_fleet.events import System
from agent_fleet.runner import _box, _git, _worktrees
from agent_fleet.runner._admit import (
    Locator,
    Where,
    admit,
    admit_ray,
    make_out,
    shared_tree_warning,
    task_of,
    warn,
)
from agent_fleet.runner._batch_providers import Providers as _Providers
from agent_fleet.runner._batch_types import BatchEntry, BatchResult, entries_from_summary
from agent_fleet.runner._ledger_views import REPORT_FILE, ledger_size, write_records
from agent_fleet.runner._otel import BatchTelemetry
from agent_fleet.runner._outage import DEFAULT_OUTAGE_TIMEOUT, ModelOutage
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.runner._tasks_file import (
    BatchTask,
    build_task,
    check_task_ids,
    iter_tasks,
    load_tasks,
    parse_tasks,
    task_id_problem,
)
from agent_fleet.runner._types import EventSink, TaskEvent, notice
from agent_fleet.runner._watch import Watch, complete_ray, planned_model
from agent_fleet.runner.ledger import Ledger, LedgerRow, holds_batch
from agent_fleet.runner.task import Task, TaskResult, run_task
from agent_fleet.runner.transcript import TranscriptWriter

if TYPE_CHECKING:
    from agent_fleet.runner.ray_backend import RayBatchEntry

__all__ = [
    "BRANCH_PREFIX",
    "BatchEntry",
    "BatchResult",
    "BatchTask",
    "check_task_ids",
    "iter_tasks",
    "load_tasks",
    "parse_tasks",
    "run_batch",
    "task_id_problem",
]

BRANCH_PREFIX = "agent-fleet/"


@dataclass(slots=True)
class _State:
    stop: asyncio.Event
    ledger: Ledger | None = None
    stopped: str | None = None
    fatal: bool = False
    pids: set[int] = field(default_factory=set)
    locks: dict[Path, asyncio.Lock] = field(default_factory=dict)
    raw_deltas: bool = False
    outage: ModelOutage | None = None

    def lock(self, repo: Path) -> asyncio.Lock:
        return self.locks.setdefault(repo, asyncio.Lock())

    def halt(self, why: str) -> None:
        """Stop the batch, resumable (the first reason is the one reported)."""
        self.stopped = self.stopped or why
        self.stop.set()


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
    push: bool = False,
    exclude_nodes: Sequence[str] = (),
    fence_timeout: float | None = None,
    resume: bool = False,
    rerun_failed: bool = False,
    meta: Mapping[str, Any] | None = None,
    prices: PriceTable | None = None,
    raw_deltas: bool = False,
    box_dir: str | os.PathLike[str] | None = None,
    on_warning: Callable[[str], None] | None = None,
    outage_timeout: float | None = DEFAULT_OUTAGE_TIMEOUT,
) -> BatchResult:
    """Run ``tasks`` (see the module docstring). ``template`` gives every setting a line does not.

    ``options`` is the options type of ``provider_name``'s registry entry (``runner.providers``).
    ``on_result(entry)`` is called as each task ends. Returns a ``BatchResult`` (also written to
    ``out_dir/summary.json`` and ``out_dir/report.html``). ``prices`` adds a cost per task;
    ``raw_deltas`` writes every streamed fragment to the transcripts (local backend). ``out_dir`` must
    not hold a batch already, unless ``resume`` (then ``tasks`` is None: the batch's own are run);
    ``meta`` is kept in the new ledger (the CLI keeps its settings there). ``tasks`` may be any
    iterable (a generator reading a file): it is read once, in chunks, and nothing is kept per queued
    task. When every running task lost the model (``Task.model_timeout``), the batch pauses until it
    answers again, and stops (resumable) once it stayed unreachable for ``outage_timeout`` seconds
    (None: never; see ``runner._outage``).

    ``backend="ray"`` runs the tasks on a Ray cluster instead (``jobs`` per node; ``ray_address``,
    ``repo_url``, ``push``, ``exclude_nodes``, ``fence_timeout``: see
    ``agent_fleet.runner.ray_backend.run_batch_ray``; ``provider`` cannot be given).

    ``box_dir``: where the batch's box is made (its worktrees and the tasks' temporary directories;
    default: where ``provider`` says (its ``box_dir`` once started: a ``RemoteProvider``'s is the
    daemon's boxes directory), else ``<state>/boxes``, see ``agent_fleet.runner._box``).
    ``on_warning(text)`` is called before any task starts for what the caller should know (tasks
    sharing a working tree without ``worktrees``); without it the warning is logged.

    Raises ``UsageError`` up front for a task id that is not a safe file name and branch name (see
    ``task_id_problem``) or is used twice, and for a new batch whose ``out_dir`` is inside a git
    working tree a task works in (unless git ignores it: the agents' commits would take the record).
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
        task_list = list(tasks)
        watch = Watch(BatchTelemetry(provider=provider_name, jobs=jobs, tasks=len(task_list)), on_event)
        if repo_url is None:  # tasks in a path the nodes share
            default = Path(cwd) if cwd is not None else Path(template.spec.cwd or os.getcwd())
            watch.shared = await admit_ray(task_list, default, out, resume, worktrees, on_warning)
        started_at = time.time()
        planned = planned_model(template, provider_name, options)
        by_id = {t.id: t for t in task_list}

        def complete_entry(entry: RayBatchEntry) -> RayBatchEntry:
            # As each task ends, so the ledger holds its whole record even if the driver dies later.
            return watch.complete(entry, by_id[entry.result.task_id], planned, provider_name)

        ray_extra: dict[str, Any] = {}
        if fence_timeout is not None:
            ray_extra["fence_timeout"] = fence_timeout
        ray_result = await run_batch_ray(
            task_list,
            template=template,
            out_dir=out_dir,
            jobs=jobs,
            worktrees=worktrees,
            provider_name=provider_name,
            options=options,
            cwd=cwd,
            on_event=watch,
            on_result=on_result,
            stop=stop,
            ray_address=ray_address,
            repo_url=repo_url,
            push=push,
            exclude_nodes=exclude_nodes,
            meta=meta,
            resume_from=resumed,
            complete=complete_entry,
            outage_timeout=outage_timeout,
            **ray_extra,
        )
        return complete_ray(ray_result, watch, out, started_at, prices)
    if backend != "local":
        raise UsageError(f"unknown batch backend {backend!r}: choose local or ray")
    if ray_address is not None or repo_url is not None or push or exclude_nodes or fence_timeout is not None:
        raise UsageError("ray_address, repo_url, push, exclude_nodes and fence_timeout need backend='ray'")
    if jobs < 1:
        raise UsageError(f"-j/--jobs must be >= 1, not {jobs}")
    default_cwd = Path(cwd) if cwd is not None else Path(template.spec.cwd or os.getcwd())
    locator = Locator(default_cwd, worktrees=worktrees, template_needs_commit=template.gate.require_commit)
    if not resume and default_cwd.is_dir():  # before anything is written
        top = await _git.toplevel(default_cwd)
        if top is not None:
            await _box.check_record_place(out, [top])
    created = make_out(out)
    ledger = Ledger.open(out) if resume else Ledger.create(out, [], meta=meta)
    providers = _Providers(provider, provider_name, options)
    box: _box.Box | None = None
    try:
        asked = await admit(
            tasks if not resume else None,
            ledger,
            locator,
            out,
            default_provider=providers.default_name,
            template_review=template.review is not None
            and not (provider is not None and provider.capabilities.supports_review),
            rerun_failed=rerun_failed,
        )
        repos = {w.repo for w in locator.where.values() if w.repo is not None}
        if not resume:
            await _box.check_record_place(out, repos)
        await providers.start({name or providers.default_name for name in asked})
        if box_dir is None:  # a provider running its sessions elsewhere names where their boxes go
            box_dir = getattr(provider, "box_dir", None)
        box = _box.open_batch_box(ledger, out, box_dir)
        _box.check_outside(box.root, repos, "the batch's box")
    except BaseException:
        if box is not None:
            box.close()
        await providers.shutdown()
        if resume:
            ledger.close()
        else:  # nothing ran: leave nothing behind
            ledger.discard()
            if created:
                with contextlib.suppress(OSError):
                    os.rmdir(out)
        raise
    state = _State(stop=asyncio.Event(), ledger=ledger, raw_deltas=raw_deltas)
    started = time.monotonic()
    started_at = time.time()
    ledger.set_meta("run_started_at", started_at)
    planned = planned_model(template, provider_name, options)
    watch = Watch(
        BatchTelemetry(provider=providers.default_name, jobs=jobs, tasks=ledger_size(ledger)), on_event
    )
    state.outage = ModelOutage(
        limit=outage_timeout,
        notify=watch,
        on_give_up=state.halt,
    )

    def complete(entry: BatchEntry, t: BatchTask) -> BatchEntry:
        done = watch.complete(entry, t, planned, t.provider or providers.default_name)
        watch.forget(t.id)  # the record is in the ledger: nothing is kept per finished task
        return done

    shared = locator.shared()
    for tree, count in sorted(shared.items()):
        warn(on_warning, shared_tree_warning(tree, count))
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
                if state.outage is not None and state.outage.paused:
                    await _unless_stopped(state.outage.open(), state.stop)  # the model is unreachable
                if state.stop.is_set():
                    return
                try:
                    t = task_of(row, out)
                except UsageError as exc:  # a ledger entry that no longer reads as a task: it fails alone
                    spec = row.spec
                    prompt = spec.get("prompt") if isinstance(spec, dict) else None
                    t = BatchTask(id=row.id, prompt=prompt if isinstance(prompt, str) else "", line=row.line)
                    entry = _refused(t, str(exc), "usage_error", ledger, out, complete)
                    if on_result is not None:
                        on_result(entry)
                    continue
                try:
                    entry = await _run_one(
                        t,
                        ledger.get(t.id),
                        template,
                        providers,
                        locator.get(t),
                        _box.BatchBox(box, worktrees, shared),
                        out,
                        state,
                        watch,
                        complete,
                    )
                    _note_pid(state, providers.get(t.provider))
                except StorageError as exc:  # the record cannot be written (a full disk): stop, resumable
                    state.halt(str(exc))
                    return
                if entry.result.error_code == "storage_error":
                    state.halt(entry.result.reason.removeprefix("stopped: "))
                if entry.result.fatal and state.stopped is None:
                    if entry.result.error_code == "app_server_crashed":  # resumable: its tasks interrupted
                        state.stopped = f"the provider process died (task {t.id}): {entry.result.reason}"
                    else:
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
        box.close()  # what is empty: a kept worktree keeps its box
        result = _result(state, time.monotonic() - started, out, started_at, prices)
        watch.telemetry.end(result.to_dict())
    return result


async def _unless_stopped(wait: Coroutine[Any, Any, None], stop: asyncio.Event) -> None:
    waiting = [asyncio.ensure_future(wait), asyncio.ensure_future(stop.wait())]
    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    for task in waiting:
        task.cancel()


def _boxed_here(provider: Provider) -> bool:
    """The box holds the sessions' temporary directories: they run here or on a daemon that named its
    boxes directory (its floor takes them there; one that names none makes its sessions' own)."""
    from agent_fleet.remote import RemoteProvider

    return not isinstance(provider, RemoteProvider) or getattr(provider, "box_dir", None) is not None


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


def _result(
    state: _State, duration: float, out: Path, started_at: float, prices: PriceTable | None
) -> BatchResult:
    ledger = state.ledger
    if ledger is None:  # stopped before the ledger existed: nothing ran
        return BatchResult(entries=(), duration=duration, stopped=state.stopped, fatal=state.fatal)
    try:
        path, summary = write_records(
            ledger,
            started_at=started_at,
            duration=duration,
            stopped=state.stopped,
            fatal=state.fatal,
            provider_pids=sorted(state.pids),
            prices=prices,
        )
    except StorageError as exc:  # the summary or report cannot be written: the ledger is the record
        state.halt(str(exc))
        return BatchResult(entries=(), duration=duration, stopped=state.stopped, fatal=state.fatal)
    finally:
        ledger.close()
    return BatchResult(
        entries=entries_from_summary(summary),
        duration=duration,
        stopped=state.stopped,
        fatal=state.fatal,
        summary_path=path,
        provider_pids=tuple(sorted(state.pids)),
        started_at=started_at,
        prices=prices,
        report_path=out / REPORT_FILE,
        summary=summary,
    )


def _refused(
    t: BatchTask,
    reason: str,
    code: str,
    ledger: Ledger,
    out: Path,
    complete: Callable[[BatchEntry, BatchTask], BatchEntry],
) -> BatchEntry:
    """Record that task ``t`` failed before it could start (its worktree, its entry): it alone fails."""
    failed = TaskResult(task_id=t.id, status="failed", reason=reason, error_code=code)
    ledger.start(t.id, branch=None, worktree=None, transcript=str(out / f"{t.id}.jsonl"))
    entry = complete(BatchEntry(result=failed), t)
    ledger.finish(t.id, result=entry.to_dict(), attempts=0, worktree_kept=None)
    return entry


async def _run_one(
    t: BatchTask,
    row: LedgerRow,
    template: Task,
    providers: _Providers,
    here: Where,
    boxed: _box.BatchBox,
    out: Path,
    state: _State,
    watch: Watch,
    complete: Callable[[BatchEntry, BatchTask], BatchEntry],
) -> BatchEntry:
    """Run one task and record it; ``complete`` adds what the batch recorded and planned for it."""
    ledger = state.ledger
    assert ledger is not None
    branch: str | None = None
    worktree: Path | None = None
    run_cwd = here.cwd
    repo = here.repo
    if boxed.worktrees and repo is not None:
        branch = row.branch or BRANCH_PREFIX + t.id
        previous = row.worktree_kept or row.worktree
        try:
            worktree = await _worktrees.prepare(
                repo,
                branch,
                boxed.box.worktree(t.id),
                previous=Path(previous) if previous else None,
                reuse=row.runs > 0,
                lock=state.lock(repo),
            )
        except _git.GitError as exc:
            reason = (
                f"cannot create the worktree for branch {branch}: {exc} "
                "(delete the branch or rename the task)"
            )
            return _refused(t, reason, "worktree", ledger, out, complete)
        run_cwd = worktree / here.cwd.relative_to(repo)
    transcript = out / f"{t.id}.jsonl"
    ledger.start(
        t.id, branch=branch, worktree=str(worktree) if worktree else None, transcript=str(transcript)
    )
    task: Task | None = None
    build_error: str | None = None
    try:
        task = build_task(t, template, run_cwd)
        if task.spec.temp_dir is None and _boxed_here(providers.get(t.provider)):  # its own, in its box
            task = replace(task, spec=replace(task.spec, temp_dir=str(boxed.box.temp_dir(t.id))))
    except Exception as exc:  # whatever a library caller's BatchTask raises here, that task alone fails
        build_error = f"line {t.line}: the task's settings cannot run: {exc}"
    sharers = 0 if worktree is not None else boxed.shared.get(here.tree, 0)
    resume_session = row.session_id if row.resumable and not row.fresh else None
    base_head = row.base_head if row.resumable and not row.fresh else None  # where its first run began

    def sink(task_event: TaskEvent) -> None:
        event = task_event.event
        if isinstance(event, System) and task_event.source == "runner":
            if event.subtype == "runner.session":
                session_id = event.data.get("session_id")
                if isinstance(session_id, str):
                    ledger.session(t.id, session_id, base_head=event.data.get("start_head"))
            elif event.subtype in ("runner.started", "runner.retry"):
                ledger.attempt(t.id)  # as it starts: a kill -9 mid-retry leaves a true count
        watch(task_event)

    recorder = watch.recorder(t.id)
    recorder.root = str(worktree if worktree is not None else here.tree)
    kept: Path | None = None
    result: TaskResult | None = None
    try:
        with TranscriptWriter(transcript, raw_deltas=state.raw_deltas) as writer:
            if sharers:  # its files changed are then only what its session reported
                shared_notice = notice(t.id, "shared_tree", tree=str(here.tree), tasks=sharers)
                writer.write(shared_notice)
                sink(shared_notice)
            try:
                if task is None:
                    raise UsageError(build_error)
                result = await run_task(
                    task,
                    provider=providers.get(t.provider),
                    on_event=sink,
                    transcript=writer,
                    stop=state.stop,
                    outage=state.outage,
                    resume_session=resume_session,
                    start_head=base_head,
                )
            except UsageError as exc:  # this task's settings cannot run (e.g. a review its provider lacks)
                reason = build_error or f"line {t.line}: {exc}"
                result = TaskResult(task_id=t.id, status="failed", reason=reason, error_code="usage_error")
        if result.start_head is not None and not sharers:
            # The task's final diff (every turn's changes), read before its worktree is removed. In a
            # tree other tasks share, git's view mixes their work: the session's own diffs stay.
            with contextlib.suppress(_git.GitError):
                recorder.diff = await _git.final_diff(run_cwd, result.start_head)
                recorder.add_files(await _git.changed_files(run_cwd, result.start_head))
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
        entry = BatchEntry(
            result=result,
            branch=branch,
            worktree=kept,
            worktree_path=worktree,
            resumed_from=resume_session if result.session_id == resume_session else None,
            runs=row.runs + 1,
        )
        entry = complete(entry, t)
        ledger.finish(
            t.id,
            result=entry.to_dict(),
            attempts=0,  # each was counted as it started (sink)
            worktree_kept=str(kept) if kept is not None else None,
        )
        try:  # its temporary directory goes with it (off the loop: it may be big)
            await asyncio.shield(asyncio.to_thread(boxed.box.drop_temp, t.id))
        except asyncio.CancelledError:
            cancelled_again = True  # (the removal goes on in its thread)
        if cancelled_again:
            raise asyncio.CancelledError
    return entry
