"""Admitting a batch's tasks before any work: each distinct directory checked once, the tasks read in
chunks (nothing kept per task) and, for a new batch, queued in the ledger as they are checked."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_fleet.errors import UsageError
from agent_fleet.runner import _box, _git
from agent_fleet.runner._tasks_file import (
    BatchTask,
    entry_object,
    idle_timeout_supported,
    parse_task,
    task_id_problem,
)
from agent_fleet.runner.ledger import LEDGER_FILE, Ledger, LedgerRow
from agent_fleet.runner.providers import provider_entry

__all__ = [
    "Locator",
    "Where",
    "admit",
    "admit_ray",
    "make_out",
    "ray_trees",
    "shared_tree_warning",
    "task_of",
    "warn",
]

logger = logging.getLogger("agent_fleet.runner.batch")


@dataclass(slots=True)
class Where:
    """Where a task runs: its directory and, when it is in one, its repository's top level."""

    cwd: Path
    repo: Path | None

    @property
    def tree(self) -> Path:
        """The working tree the task works in: its repository's top level, else its directory."""
        return self.repo if self.repo is not None else self.cwd


def _cwd_key(t: BatchTask) -> str | None:
    """A task's directory as the ledger records it (absolute, not resolved)."""
    return str(t.cwd.expanduser().absolute()) if t.cwd is not None else None


class Locator:
    """Checks each distinct task directory once (concurrently): it exists, it is in git when it must be,
    and with worktrees its repository has a commit. Raises ``UsageError`` naming the first task."""

    def __init__(self, default_cwd: Path, *, worktrees: bool, template_needs_commit: bool) -> None:
        self.default_cwd = default_cwd
        self.worktrees = worktrees
        self.template_needs_commit = template_needs_commit
        self.where: dict[str | None, Where] = {}
        #: tasks admitted per working tree (a repository's top level, else the directory): one count
        #: per distinct tree, nothing per task
        self.tasks_per_tree: dict[Path, int] = {}
        self._heads: dict[Path, asyncio.Future[str | None]] = {}
        self._limit = asyncio.Semaphore(8)

    def get(self, t: BatchTask) -> Where:
        return self.where[_cwd_key(t)]

    def trees(self) -> set[Path]:
        """Every working tree a task admitted so far works in (see ``Where.tree``)."""
        return set(self.tasks_per_tree)

    def shared(self) -> dict[Path, int]:
        """The working trees more than one admitted task works in, with their number of tasks (none
        with worktrees: each task then has its own)."""
        if self.worktrees:
            return {}
        return {tree: n for tree, n in self.tasks_per_tree.items() if n > 1}

    async def admit(self, chunk: Sequence[BatchTask]) -> None:
        new: dict[str | None, BatchTask] = {}
        for t in chunk:
            key = _cwd_key(t)
            if key not in self.where:
                new.setdefault(key, t)
        found = await asyncio.gather(*(self._one(t) for t in new.values()))
        self.where.update(zip(new, found, strict=True))
        for t in chunk:
            needs_commit = t.require_commit if t.require_commit is not None else self.template_needs_commit
            here = self.get(t)
            tree = here.tree
            self.tasks_per_tree[tree] = self.tasks_per_tree.get(tree, 0) + 1
            if here.repo is None and (self.worktrees or needs_commit):
                raise UsageError(
                    f"task {t.id!r} (line {t.line}): {str(here.cwd)!r} is not in a git repository"
                )

    async def _one(self, t: BatchTask) -> Where:
        cwd = (t.cwd or self.default_cwd).expanduser()
        if not cwd.is_dir():
            raise UsageError(f"task {t.id!r} (line {t.line}): directory {str(cwd)!r} does not exist")
        cwd = cwd.resolve()
        async with self._limit:
            top = await _git.toplevel(cwd)
        if top is not None and self.worktrees:
            if top not in self._heads:
                self._heads[top] = asyncio.ensure_future(_git.head(top))
            if await self._heads[top] is None:
                raise UsageError(
                    f"task {t.id!r} (line {t.line}): the repository {str(top)!r} has no commit yet"
                )
        return Where(cwd=cwd, repo=top)


def make_out(out: Path) -> bool:
    """Make ``out`` (a usage error when it cannot be made or written); True when it was made here."""
    existed = out.is_dir()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the output directory {str(out)!r}: {exc.strerror or exc}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise UsageError(f"the output directory {str(out)!r} is not writable")
    return not existed


_ADMIT_CHUNK = 500


async def admit(
    tasks: Iterable[BatchTask] | None,
    ledger: Ledger,
    locator: Locator,
    out: Path,
    *,
    default_provider: str,
    template_review: bool,
    rerun_failed: bool = False,
) -> set[str | None]:
    """Check every task (its directory, its settings) in chunks; a new batch's tasks go into the ledger as
    they are checked. Returns the provider names the tasks ask for. Nothing is kept per task: memory
    stays flat in the number of tasks.

    ``tasks`` None (a resume): the ledger's tasks that will run (``Ledger.to_run``) are checked, not
    the finished ones, whose directories may be long gone; an entry that no longer reads as a task is
    left to the run, which records it failed on its own (one bad entry must not block the batch)."""
    names: set[str | None] = set()
    source: Iterable[BatchTask] = tasks if tasks is not None else _readable(ledger, out, rerun_failed)
    it = iter(source)
    count = 0
    while chunk := list(itertools.islice(it, _ADMIT_CHUNK)):
        entries = []
        for t in chunk:
            where = f"task {t.id!r} (line {t.line})"
            if tasks is not None:
                entry = entry_object(t)
                if not t.raw:  # built in code, never parsed: check it as the run will read it back
                    problem = task_id_problem(t.id)  # (parsing checks it too; this says "task id" first)
                    if problem is not None:
                        raise UsageError(f"task id {t.id!r} (line {t.line}) {problem}")
                    parse_task(entry, line=t.line, base_dir=out, where=where)
                entries.append((t.id, t.line, entry))
            if t.idle_timeout is not None and not idle_timeout_supported():
                raise UsageError(f"{where}: 'idle_timeout' needs a runner with an idle watchdog")
            names.add(t.provider)
            review = t.review if t.review is not None else template_review
            name = t.provider or default_provider
            if review and provider_entry(name).reviewer is None:
                raise UsageError(f"{where}: review needs a provider that can review; {name} cannot")
        await locator.admit(chunk)
        if tasks is not None:
            ledger.add(entries)
        count += len(chunk)
    if not count and tasks is not None:
        raise UsageError("the batch has no tasks")
    return names


def _readable(ledger: Ledger, out: Path, rerun_failed: bool) -> Iterator[BatchTask]:
    for row in ledger.to_run(rerun_failed=rerun_failed):
        try:
            t = task_of(row, out)
        except UsageError:
            continue  # the run records it failed, alone
        yield t


def task_of(row: LedgerRow, out: Path) -> BatchTask:
    return parse_task(row.spec, line=row.line, base_dir=out, where=f"{out / LEDGER_FILE}: task {row.id}")


def shared_tree_warning(tree: Path | str, count: int) -> str:
    """The warning for ``count`` tasks sharing the working tree ``tree``."""
    return (
        f"{count} tasks share the working tree {tree} (no worktrees): they see and change each other's "
        "files, and each task's files changed are only what its own session reported "
        "(--worktrees gives each task its own tree)"
    )


def warn(on_warning: Callable[[str], None] | None, text: str) -> None:
    """``on_warning(text)``, or a logged warning without it."""
    if on_warning is not None:
        on_warning(text)
    else:
        logger.warning("%s", text)


async def ray_trees(tasks: Sequence[BatchTask], default: Path) -> tuple[dict[Path, list[str]], set[Path]]:
    """The tasks of a Ray batch by the working tree they work in (a repository's top level, else their
    directory), as far as this machine sees them, and which of those trees are repositories."""
    tops: dict[Path, Path | None] = {}
    trees: dict[Path, list[str]] = {}
    for t in tasks:
        where = (t.cwd or default).expanduser().absolute()
        if where not in tops:
            tops[where] = await _git.toplevel(where) if where.is_dir() else None
        trees.setdefault(tops[where] or where, []).append(t.id)
    return trees, {top for top in tops.values() if top is not None}


async def admit_ray(
    tasks: Sequence[BatchTask],
    default: Path,
    out: Path,
    resume: bool,
    worktrees: bool,
    on_warning: Callable[[str], None] | None,
) -> set[str]:
    """What the driver checks of a Ray batch in a path the nodes share: a new batch's record is not in a
    task's repository (``UsageError``), and tasks sharing a tree without worktrees are warned about.
    Returns the ids of those tasks."""
    trees, repos = await ray_trees(tasks, default)
    if not resume:
        await _box.check_record_place(out, repos)
    shared: set[str] = set()
    for tree, ids in trees.items():
        if len(ids) > 1 and not worktrees:  # one tree for many
            shared.update(ids)
            warn(on_warning, shared_tree_warning(tree, len(ids)))
    return shared
