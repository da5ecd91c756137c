"""``agent-fleet batch`` settings: from the flags, or from the ledger of the batch being resumed.

A new batch records its settings (every flag but ``-c``, which may carry secrets, and ``--json``, which
is about display) in the ledger's ``meta``; ``--resume OUT`` reads them back, and a flag given on the
command line of the resume overrides the recorded one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from agent_fleet.cli._options import Common, pop_common
from agent_fleet.errors import UsageError
from agent_fleet.runner import BatchResult, EventSink, TaskEvent
from agent_fleet.runner._box import default_record_dir
from agent_fleet.runner._ledger_views import record_forced_stop
from agent_fleet.runner.batch import BatchTask, iter_tasks
from agent_fleet.runner.ledger import Ledger

if TYPE_CHECKING:  # the client is imported only for --server
    from agent_fleet.remote import RemoteBatch, RemoteProvider

__all__ = ["BatchSettings", "Shown", "force_stop", "settings_for", "shown_on"]

#: every other flag of the batch command is recorded with the batch
_NOT_RECORDED = frozenset({"config", "json_output", "out_dir", "quiet", "verbose"})
_TUPLES = frozenset({"allow", "deny", "exclude_nodes"})


@dataclass(slots=True, kw_only=True)
class BatchSettings:
    #: a new batch's tasks (read from the file as the batch takes them); None to resume a recorded one
    tasks: Iterable[BatchTask] | None
    total: int
    #: the providers the tasks ask for besides the default
    providers: set[str]
    common: Common
    out: Path
    jobs: int
    worktrees: bool
    cwd: Path | None
    backend: str
    ray_address: str | None
    repo_url: str | None
    push: bool = False
    exclude_nodes: tuple[str, ...] = ()
    fence_timeout: float | None = None
    resume: bool = False
    rerun_failed: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    #: tasks a resumed batch will not run again, by status (for the live view's counts)
    done: dict[str, int] = field(default_factory=dict)
    #: the ids of the tasks this run will start, in order (the live view shows the next few)
    queued: list[str] = field(default_factory=list)


def _recorded(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    flags = {k: v for k, v in kwargs.items() if k not in _NOT_RECORDED}
    return {
        k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
        for k, v in flags.items()
    }


def _restore(ctx: click.Context, kwargs: dict[str, Any], recorded: Mapping[str, Any]) -> None:
    """Recorded flags replace the defaults; flags given on this command line win."""
    for name, value in recorded.items():
        if name not in kwargs or ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            continue
        if name in _TUPLES and isinstance(value, list):
            value = tuple(value)
        elif name == "cwd" and value is not None:
            value = Path(value)
        kwargs[name] = value


def _recorded_batch(out: Path, rerun_failed: bool) -> tuple[dict[str, Any], int, dict[str, int], list[str]]:
    """The recorded batch's meta, its number of tasks, those a resume will not run (by status), and the
    ids of those it will."""
    ledger = Ledger.open(out)
    try:
        meta, counts = ledger.meta(), ledger.counts()
        queued = [row.id for row in ledger.to_run(rerun_failed=rerun_failed)]
    finally:
        ledger.close()
    total = sum(n for k, n in counts.items() if ":" not in k)
    done = {k.removeprefix("finished:"): n for k, n in counts.items() if k.startswith("finished:")}
    if rerun_failed:
        done = {k: n for k, n in done.items() if k == "succeeded"}
    return meta, total, done, queued


def _scan(tasks_file: Path) -> tuple[list[str], set[str]]:
    """Check the whole tasks file before anything starts; keep only its ids and the providers named."""
    ids: list[str] = []
    providers: set[str] = set()
    for t in iter_tasks(tasks_file):
        ids.append(t.id)
        if t.provider is not None:
            providers.add(t.provider)
    return ids, providers


def settings_for(
    ctx: click.Context,
    tasks_file: Path | None,
    resume_dir: Path | None,
    rerun: str | None,
    kwargs: dict[str, Any],
) -> BatchSettings:
    """The batch to run: a new one from TASKS.jsonl, or the one recorded in ``--resume OUT``.

    Raises ``UsageError`` for a bad combination of flags, a bad tasks file or ledger."""
    meta: dict[str, Any] = {}
    done: dict[str, int] = {}
    if resume_dir is not None:
        if tasks_file is not None:
            raise UsageError("give TASKS.jsonl for a new batch or --resume OUT to continue one, not both")
        out_dir = kwargs.get("out_dir")
        if out_dir is not None and Path(out_dir).resolve() != resume_dir.resolve():
            raise UsageError("--resume OUT continues the batch in OUT: leave out --out (or give the same)")
        recorded_meta, total, done, queued = _recorded_batch(resume_dir, rerun == "failed")
        recorded = recorded_meta.get("cli")
        if isinstance(recorded, dict):
            _restore(ctx, kwargs, recorded)
        out = resume_dir
        tasks: Iterable[BatchTask] | None = None
        providers: set[str] = set()
    else:
        if tasks_file is None:
            raise UsageError("missing TASKS.jsonl (or --resume OUT to continue a batch)")
        if rerun is not None:
            raise UsageError("--rerun goes with --resume OUT (it re-runs tasks of a recorded batch)")
        queued, providers = _scan(tasks_file)
        total = len(queued)
        tasks = iter_tasks(tasks_file)
        meta = {"cli": _recorded(kwargs), "tasks_file": str(tasks_file.resolve())}
        # The record's default place is the fleet's state directory: never a tree the agents commit.
        out = kwargs.get("out_dir") or default_record_dir()
    kwargs.pop("out_dir", None)
    common = pop_common(kwargs)
    cwd: Path | None = kwargs["cwd"]
    if cwd is not None and not cwd.is_dir():
        raise UsageError(f"--cwd {str(cwd)!r} does not exist or is not a directory")
    backend: str = kwargs["backend"]
    if backend != "ray" and (kwargs["ray_address"] is not None or kwargs["repo_url"] is not None):
        raise UsageError("--ray-address and --repo-url need --backend ray")
    if kwargs["push"] and (backend != "ray" or kwargs["repo_url"] is None):
        raise UsageError("--push needs --backend ray and --repo-url (it pushes to that repository)")
    if backend != "ray" and (kwargs["exclude_nodes"] or kwargs["fence_timeout"] is not None):
        raise UsageError("--exclude-node and --fence-timeout need --backend ray")
    return BatchSettings(
        tasks=tasks,
        total=total,
        providers=providers,
        common=common,
        out=Path(out),
        jobs=int(kwargs["jobs"]),
        worktrees=bool(kwargs["worktrees"]),
        cwd=cwd,
        backend=backend,
        ray_address=kwargs["ray_address"],
        repo_url=kwargs["repo_url"],
        push=bool(kwargs["push"]),
        exclude_nodes=tuple(kwargs["exclude_nodes"]),
        fence_timeout=kwargs["fence_timeout"],
        resume=resume_dir is not None,
        rerun_failed=rerun == "failed",
        meta=meta,
        done=done,
        queued=queued,
    )


def force_stop(out: Path) -> None:
    """The batch did not stop in time after a second Ctrl-C: write its summary from the ledger and end
    the provider processes this process started (their process groups: the commands they run too)."""
    try:
        pids = record_forced_stop(out, "stopped by force (Ctrl-C twice)")
    except Exception:  # no ledger yet (nothing ran), or it cannot be read: nothing to record
        return
    for pid in pids:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


class Shown:
    """A batch run with ``--server``, as the daemon's dashboard shows it (see ``shown_on``)."""

    def __init__(self, batch: RemoteBatch | None, stop: asyncio.Event) -> None:
        self.batch = batch
        self.stop = stop
        self.state, self.reason = "stopped", "the command ended before the batch did"

    def wrap(self, sink: EventSink | None) -> EventSink | None:
        """``sink``, also passing the runner's notices on to the daemon."""
        batch = self.batch
        if batch is None:
            return sink

        def on_event(task_event: TaskEvent) -> None:
            if task_event.source == "runner":
                batch.report(task_event.task_id, task_event.event)
            if sink is not None:
                sink(task_event)

        return on_event

    def ended(self, result: BatchResult) -> None:
        if result.ok:
            self.state, self.reason = "succeeded", ""
        elif self.stop.is_set() and not result.fatal:
            self.state, self.reason = "stopped", result.stopped or "stopped"
        else:
            failed = sum(not e.result.ok for e in result.entries)
            self.state = "failed"
            self.reason = result.stopped or f"{failed} of {len(result.entries)} task(s) did not succeed"


@contextlib.asynccontextmanager
async def shown_on(
    remote: RemoteProvider | None, out: Path, total: int, stop: asyncio.Event
) -> AsyncIterator[Shown]:
    """With ``--server`` (``remote``), the batch is attached to the daemon's dashboard for as long as it
    runs: its tasks, their sessions, gates and follow-ups show there, and a stop asked for there sets
    ``stop`` (as Ctrl-C does). Nothing changes without a daemon, or with one that cannot show it."""
    batch = None
    if remote is not None:
        from agent_fleet.remote import RemoteBatch

        batch = await RemoteBatch.attach(remote, name=str(out), total=total, on_stop=stop.set)
    shown = Shown(batch, stop)
    try:
        yield shown
    finally:
        if batch is not None:
            await batch.close(shown.state, shown.reason or None)
