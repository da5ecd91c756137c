"""``run_batch``: many tasks on ONE provider (one codex app-server child), ``jobs`` at a time.

Tasks file (JSON Lines, one object a line; blank lines and lines starting with ``#`` are skipped)::

    {"id": "fix-1", "prompt": "...", "cwd": "repo", "gate_cmd": "pytest -q", "require_commit": true,
     "model": "gpt-5.5", "answers": {"Which database?": "sqlite"}}

``id`` and ``prompt`` are required; ``id`` must be unique and made of letters, digits, ``.``, ``_``
and ``-`` (it names the transcript and the branch). A relative ``cwd`` is relative to the tasks file's
directory. ``answers`` are canned answers for the agent's questions (``Spec.answers``; question id,
header or text -> a string or a list of strings). ``load_tasks`` raises ``UsageError`` naming the
line of the first bad entry.

Theory of operation
-------------------
Before any work: every task's directory exists (and is in a git repository with a commit when
``worktrees`` is on), the provider check passes and the provider starts; a failure there raises
(``UsageError``, ``ProviderUnavailable``, ``AuthenticationError``) and nothing was changed.

Each task then runs ``run_task`` on the shared provider, its transcript in ``out_dir/<id>.jsonl``.
With ``worktrees`` a task runs in its own ``git worktree`` on a new branch ``agent-fleet/<id>``
created from the repository's HEAD; afterwards the worktree is removed and the branch stays for
review. A worktree with uncommitted changes is kept (its path is in the summary), so no work is lost.
Worktree creation and removal are serialised per repository (git's own locks are not made for
concurrent ``worktree add``).

A failed task does not stop the others. A fatal result (provider unavailable, credential refused,
app-server died) or ``stop`` being set stops the batch: running turns are interrupted, tasks not yet
started are reported ``cancelled`` ("not started"), worktrees are cleaned up as above and
``summary.json`` is written. Cancelling ``run_batch`` does the same, then re-raises.

Records: every task's events also go to a ``TaskRecorder`` (commands, declines, model, timeline) and to
OpenTelemetry spans (no-ops unless an SDK is configured). At the end ``summary.json`` (see
``_summary``; redacted) and ``report.html`` (``agent_fleet.runner.report``) are written to ``out_dir``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent_fleet.contract import Provider, Spec
from agent_fleet.errors import UsageError
from agent_fleet.runner import _git
from agent_fleet.runner._otel import BatchTelemetry
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.runner._record import TaskRecorder
from agent_fleet.runner._summary import build_summary, task_record
from agent_fleet.runner._types import EventSink
from agent_fleet.runner._watch import Watch, planned_model
from agent_fleet.runner.providers import check_provider, make_provider
from agent_fleet.runner.report import write_report
from agent_fleet.runner.task import Task, TaskResult, run_task
from agent_fleet.runner.transcript import Redactor, TranscriptWriter

__all__ = [
    "BRANCH_PREFIX",
    "BatchEntry",
    "BatchResult",
    "BatchTask",
    "load_tasks",
    "parse_tasks",
    "run_batch",
]

BRANCH_PREFIX = "agent-fleet/"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_KEYS = frozenset({"id", "prompt", "cwd", "gate_cmd", "require_commit", "model", "answers"})


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchTask:
    """One line of a tasks file. ``None`` fields fall back to the batch's template task."""

    id: str
    prompt: str
    cwd: Path | None = None
    gate_cmd: str | None = None
    require_commit: bool | None = None
    model: str | None = None
    answers: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    line: int = 0

    def spec(self, template: Spec, cwd: str) -> Spec:
        """The session's ``Spec``: ``template`` with this task's prompt, directory, model and answers
        (a task's answers win over the template's)."""
        return replace(
            template,
            prompt=self.prompt,
            cwd=cwd,
            model=self.model or template.model,
            answers={**template.answers, **self.answers},
        )


def task_id_problem(task_id: object) -> str | None:
    """Why ``task_id`` cannot name a transcript file and a branch ``agent-fleet/<id>``, or ``None``.

    Letters, digits, ``.``, ``_`` and ``-`` only, starting with a letter or digit (so no ``/``, no
    control character, no trailing newline: ``fullmatch``, not ``match``), and nothing git refuses in a
    ref name (``..``, a trailing ``.`` or ``.lock``).
    """
    if not isinstance(task_id, str) or not task_id:
        return "must be a non-empty string"
    if not _ID.fullmatch(task_id):
        return "may only use letters, digits, '.', '_' and '-', start with a letter or digit (at most 100)"
    if ".." in task_id or task_id.endswith((".", ".lock")):
        return "is not a valid branch name (no '..', no trailing '.' or '.lock')"
    return None


def check_task_ids(tasks: Sequence[BatchTask]) -> None:
    """``UsageError`` for the first task id that is unsafe or used twice, before anything is touched."""
    seen: set[str] = set()
    for t in tasks:
        problem = task_id_problem(t.id)
        if problem is not None:
            raise UsageError(f"task id {t.id!r} {problem}")
        if t.id in seen:
            raise UsageError(f"task id {t.id!r} is used twice")
        seen.add(t.id)


def _field(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if value is not None and not isinstance(value, kind):
        raise UsageError(f"{where}: {key!r} must be a {kind.__name__}, not {type(value).__name__}")
    return value


def _answers(obj: dict[str, Any], where: str) -> dict[str, str | list[str]]:
    value = obj.get("answers")
    if value is None:
        return {}
    good = isinstance(value, dict) and all(
        isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
        for v in value.values()
    )
    if not good:
        raise UsageError(f"{where}: 'answers' must map questions to a string or a list of strings")
    return dict(value)


def parse_tasks(text: str, *, base_dir: Path, source: str = "tasks") -> list[BatchTask]:
    """Parse JSON Lines task entries (see the module docstring). Raises ``UsageError`` with the line."""
    tasks: list[BatchTask] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source} line {number}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{where}: not valid JSON ({exc})") from exc
        if not isinstance(obj, dict):
            raise UsageError(f"{where}: expected a JSON object")
        unknown = sorted(set(obj) - _KEYS)
        if unknown:
            raise UsageError(
                f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_KEYS))}"
            )
        task_id = _field(obj, "id", str, where)
        prompt = _field(obj, "prompt", str, where)
        if not task_id:
            raise UsageError(f"{where}: 'id' is required")
        problem = task_id_problem(task_id)
        if problem is not None:
            raise UsageError(f"{where}: id {task_id!r} {problem}")
        if task_id in seen:
            raise UsageError(f"{where}: id {task_id!r} already used on line {seen[task_id]}")
        if not prompt or not prompt.strip():
            raise UsageError(f"{where}: 'prompt' is required")
        seen[task_id] = number
        cwd = _field(obj, "cwd", str, where)
        tasks.append(
            BatchTask(
                id=task_id,
                prompt=prompt,
                cwd=(base_dir / cwd) if cwd else None,
                gate_cmd=_field(obj, "gate_cmd", str, where),
                require_commit=_field(obj, "require_commit", bool, where),
                model=_field(obj, "model", str, where),
                answers=_answers(obj, where),
                line=number,
            )
        )
    if not tasks:
        raise UsageError(f"{source}: no tasks")
    return tasks


def load_tasks(path: str | os.PathLike[str]) -> list[BatchTask]:
    """Read and parse a tasks file. Raises ``UsageError`` (unreadable file, bad line)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the tasks file {str(p)!r}: {exc}") from exc
    return parse_tasks(text, base_dir=p.resolve().parent, source=p.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchEntry:
    """A task's outcome in a batch: its result, its branch, and a worktree left in place (if any).

    ``worktree_path`` is the worktree the task ran in (kept or removed); ``recorded`` what its
    ``TaskRecorder`` saw; ``prompt``, ``model`` and ``provider`` what was planned for it; ``retries``
    the attempts after the first (None where a backend does not retry)."""

    result: TaskResult
    branch: str | None = None
    worktree: Path | None = None
    worktree_path: Path | None = None
    recorded: dict[str, Any] | None = None
    prompt: str | None = None
    model: str | None = None
    provider: str | None = None
    retries: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The task's record in ``summary.json`` (epoch times; ``build_summary`` normalises them)."""
        where = self.worktree if self.worktree is not None else self.worktree_path
        return task_record(
            self.result,
            recorded=self.recorded,
            prompt=self.prompt,
            model=self.model,
            provider=self.provider,
            branch=self.branch,
            worktree=str(where) if where is not None else None,
            worktree_kept=self.worktree is not None,
            retries=self.retries,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchResult:
    entries: tuple[BatchEntry, ...]
    duration: float
    stopped: str | None = None
    fatal: bool = False
    summary_path: Path | None = None
    provider_pids: tuple[int, ...] = ()
    started_at: float | None = None
    prices: PriceTable | None = None
    report_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.stopped is None and all(e.result.ok for e in self.entries)

    def to_dict(self) -> dict[str, Any]:
        """The summary document (docs/summary.schema.json), redacted: it holds prompts and outputs."""
        summary = build_summary(
            [e.to_dict() for e in self.entries],
            started_at=self.started_at,
            finished_at=self.started_at + self.duration if self.started_at is not None else None,
            duration=self.duration,
            stopped=self.stopped,
            fatal=self.fatal,
            provider_pids=self.provider_pids,
            prices=self.prices,
        )
        redacted: dict[str, Any] = Redactor().value(summary)
        return redacted


@dataclass(slots=True)
class _State:
    stop: asyncio.Event
    stopped: str | None = None
    fatal: bool = False
    pids: set[int] = field(default_factory=set)
    locks: dict[Path, asyncio.Lock] = field(default_factory=dict)
    raw_deltas: bool = False

    def lock(self, repo: Path) -> asyncio.Lock:
        return self.locks.setdefault(repo, asyncio.Lock())


def _resolve(task: BatchTask, default_cwd: Path) -> Path:
    cwd = (task.cwd or default_cwd).expanduser()
    if not cwd.is_dir():
        raise UsageError(f"task {task.id!r} (line {task.line}): directory {str(cwd)!r} does not exist")
    return cwd.resolve()


async def run_batch(
    tasks: Sequence[BatchTask],
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
    prices: PriceTable | None = None,
    raw_deltas: bool = False,
) -> BatchResult:
    """Run ``tasks`` (see the module docstring). ``template`` gives every setting a line does not.

    ``options`` is the options type of ``provider_name``'s registry entry (``runner.providers``).
    ``on_result(entry)`` is called as each task ends. Returns a ``BatchResult`` (also written to
    ``out_dir/summary.json`` and ``out_dir/report.html``). ``prices`` adds a cost per task;
    ``raw_deltas`` writes every streamed fragment to the transcripts (local backend).

    ``backend="ray"`` runs the tasks on a Ray cluster instead (``jobs`` per node; ``ray_address``,
    ``repo_url``: see ``agent_fleet.runner.ray_backend.run_batch_ray``; ``provider`` cannot be given).

    Raises ``UsageError`` up front for a task id that is not a safe file name and branch name (see
    ``task_id_problem``) or is used twice.
    """
    check_task_ids(tasks)
    if backend == "ray":
        if provider is not None:
            raise UsageError("backend='ray' starts one provider per node: pass provider_name, not provider")
        from agent_fleet.runner.ray_backend import run_batch_ray

        watch = Watch(BatchTelemetry(provider=provider_name, jobs=jobs, tasks=len(tasks)), on_event)
        ray_result = await run_batch_ray(
            tasks,
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
        )
        # The ray backend writes its own summary.json: here it gains the records, prices and the page.
        planned = planned_model(template, provider_name, options)
        completed = tuple(
            watch.complete(e, t, planned, provider_name)
            for e, t in zip(ray_result.entries, tasks, strict=True)
        )
        ray_result = replace(
            ray_result, entries=completed, prices=prices, report_path=Path(out_dir) / "report.html"
        )
        _write_records(ray_result, Path(out_dir))
        watch.telemetry.end(ray_result.to_dict())
        return ray_result
    if backend != "local":
        raise UsageError(f"unknown batch backend {backend!r}: choose local or ray")
    if ray_address is not None or repo_url is not None:
        raise UsageError("ray_address and repo_url need backend='ray'")
    if jobs < 1:
        raise UsageError(f"-j/--jobs must be >= 1, not {jobs}")
    default_cwd = Path(cwd) if cwd is not None else Path(template.spec.cwd or os.getcwd())
    resolved = {t.id: _resolve(t, default_cwd) for t in tasks}
    repos: dict[str, Path] = {}
    for t in tasks:
        top = await _git.toplevel(resolved[t.id])
        needs_git = (
            worktrees or t.require_commit or (t.require_commit is None and template.gate.require_commit)
        )
        if top is None and needs_git:
            raise UsageError(
                f"task {t.id!r} (line {t.line}): {str(resolved[t.id])!r} is not in a git repository"
            )
        if top is not None:
            repos[t.id] = top
            if worktrees and await _git.head(top) is None:
                raise UsageError(
                    f"task {t.id!r} (line {t.line}): the repository {str(top)!r} has no commit yet"
                )
    out = Path(out_dir)
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)

    own = provider is None
    if provider is None:
        check_provider(provider_name, options)
        provider = make_provider(provider_name, options)
    try:
        await provider.start()
    except BaseException:
        if own:
            await provider.shutdown()
        raise
    state = _State(stop=asyncio.Event(), raw_deltas=raw_deltas)
    started = time.monotonic()
    started_at = time.time()
    planned = planned_model(template, provider_name, options)
    watch = Watch(BatchTelemetry(provider=provider.name, jobs=jobs, tasks=len(tasks)), on_event)
    entries: dict[str, BatchEntry] = {}
    wt_root = Path(tempfile.mkdtemp(prefix="agent-fleet-worktrees-")) if worktrees else None
    watcher: asyncio.Task[None] | None = None
    try:
        _note_pid(state, provider)
        if stop is not None:
            watcher = asyncio.get_running_loop().create_task(_watch(stop, state))
        semaphore = asyncio.Semaphore(jobs)

        async def one(t: BatchTask) -> None:
            recorder = watch.recorder(t.id)
            async with semaphore:
                entry = await _run_one(
                    t,
                    template,
                    provider,
                    resolved[t.id],
                    repos.get(t.id),
                    wt_root,
                    out,
                    state,
                    watch,
                    recorder,
                )
            entry = watch.complete(entry, t, planned, provider.name)
            entries[t.id] = entry
            _note_pid(state, provider)
            if entry.result.fatal and state.stopped is None:
                state.stopped = f"fatal error in task {t.id}: {entry.result.reason}"
                state.fatal = True
                state.stop.set()
            if on_result is not None:
                on_result(entry)

        runners = [asyncio.get_running_loop().create_task(one(t), name=f"batch:{t.id}") for t in tasks]
        try:
            await asyncio.gather(*runners)
        except BaseException:
            state.stopped = state.stopped or "cancelled"
            state.stop.set()
            for r in runners:
                r.cancel()
            await asyncio.gather(*runners, return_exceptions=True)
            raise
    finally:
        if watcher is not None:
            watcher.cancel()
        if own:
            with contextlib.suppress(Exception):
                await asyncio.shield(provider.shutdown())
        if wt_root is not None:
            with contextlib.suppress(OSError):
                wt_root.rmdir()  # only when every worktree was removed
        result = _result(tasks, entries, state, time.monotonic() - started, out, started_at, prices)
        watch.telemetry.end(result.to_dict())
    return result


def _note_pid(state: _State, provider: Provider) -> None:
    if provider.pid is not None:
        state.pids.add(provider.pid)


async def _watch(stop: asyncio.Event, state: _State) -> None:
    await stop.wait()
    if state.stopped is None:
        state.stopped = "stopped by the user"
    state.stop.set()


def _result(
    tasks: Sequence[BatchTask],
    entries: dict[str, BatchEntry],
    state: _State,
    duration: float,
    out: Path,
    started_at: float,
    prices: PriceTable | None,
) -> BatchResult:
    ordered: list[BatchEntry] = []
    for t in tasks:
        entry = entries.get(t.id)
        if entry is None:
            reason = f"not started: {state.stopped or 'the batch stopped'}"
            entry = BatchEntry(
                result=TaskResult(task_id=t.id, status="cancelled", reason=reason), prompt=t.prompt
            )
        ordered.append(entry)
    result = BatchResult(
        entries=tuple(ordered),
        duration=duration,
        stopped=state.stopped,
        fatal=state.fatal,
        summary_path=out / "summary.json",
        provider_pids=tuple(sorted(state.pids)),
        started_at=started_at,
        prices=prices,
        report_path=out / "report.html",
    )
    _write_records(result, out)
    return result


def _write_records(result: BatchResult, out: Path) -> None:
    """``summary.json`` and ``report.html`` (``to_dict`` redacts)."""
    summary = result.to_dict()
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    write_report(summary, out / "report.html")


async def _run_one(
    t: BatchTask,
    template: Task,
    provider: Provider,
    cwd: Path,
    repo: Path | None,
    wt_root: Path | None,
    out: Path,
    state: _State,
    on_event: EventSink | None,
    recorder: TaskRecorder | None = None,
) -> BatchEntry:
    gate = template.gate
    if t.gate_cmd is not None or t.require_commit is not None:
        gate = replace(
            gate,
            command=t.gate_cmd if t.gate_cmd is not None else gate.command,
            require_commit=t.require_commit if t.require_commit is not None else gate.require_commit,
        )
    if state.stop.is_set():
        reason = f"not started: {state.stopped or 'the batch stopped'}"
        return BatchEntry(result=TaskResult(task_id=t.id, status="cancelled", reason=reason))
    branch: str | None = None
    worktree: Path | None = None
    run_cwd = cwd
    if wt_root is not None and repo is not None:
        branch = BRANCH_PREFIX + t.id
        worktree = wt_root / t.id
        try:
            async with state.lock(repo):
                await _git.git(repo, "worktree", "add", "--quiet", "-b", branch, str(worktree), "HEAD")
        except _git.GitError as exc:
            reason = (
                f"cannot create the worktree for branch {branch}: {exc} "
                "(delete the branch or rename the task)"
            )
            return BatchEntry(result=TaskResult(task_id=t.id, status="failed", reason=reason))
        run_cwd = worktree / cwd.relative_to(repo)
    spec = t.spec(template.spec, str(run_cwd))
    task = replace(template, id=t.id, spec=spec, gate=gate)
    kept: Path | None = None
    try:
        with TranscriptWriter(out / f"{t.id}.jsonl", raw_deltas=state.raw_deltas) as writer:
            result = await run_task(
                task, provider=provider, on_event=on_event, transcript=writer, stop=state.stop
            )
        if recorder is not None and result.start_head is not None:
            # The task's final diff (every turn's changes), read before its worktree is removed.
            with contextlib.suppress(_git.GitError):
                recorder.diff = await _git.final_diff(run_cwd, result.start_head)
    finally:
        if worktree is not None and repo is not None:
            kept = await asyncio.shield(_remove_worktree(repo, worktree, state))
    return BatchEntry(result=result, branch=branch, worktree=kept, worktree_path=worktree)


async def _remove_worktree(repo: Path, worktree: Path, state: _State) -> Path | None:
    """Remove a clean worktree (the branch stays); keep a dirty one and return its path."""
    try:
        if await _git.is_dirty(worktree):
            return worktree
        async with state.lock(repo):
            await _git.git(repo, "worktree", "remove", str(worktree))
    except _git.GitError:
        return worktree
    return None
