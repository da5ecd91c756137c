"""Before a Ray batch runs: every task checked and turned into the ``Job`` its attempts start from.

``plan_jobs`` raises ``UsageError`` on the first task that cannot run, before anything is touched on
the cluster. Two repository modes (see ``docs/ray.md``): a path every node shares (the task's
directory must exist here; worktrees start from its repository's HEAD) or a git URL (``git ls-remote``
gives the start commit; tasks run at the repository's top level). ``resumed_jobs`` adds what a resumed
batch's earlier runs left: the session to continue and the branch (in URL mode, its bundle).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from agent_fleet.errors import UsageError
from agent_fleet.runner import _git
from agent_fleet.runner._ray_node import Job
from agent_fleet.runner._ray_repo import earlier_bundle
from agent_fleet.runner._tasks_file import BatchTask, build_task
from agent_fleet.runner.ledger import LedgerRow
from agent_fleet.runner.task import Task

__all__ = ["plan_jobs", "remote_head", "resumed_job"]


async def plan_jobs(
    tasks: Sequence[BatchTask],
    *,
    template: Task,
    cwd: str | os.PathLike[str] | None,
    worktrees: bool,
    repo_url: str | None,
    push: bool,
    provider_name: str,
) -> list[Job]:
    """One ``Job`` per task, in order (``attempt`` 0). Raises ``UsageError`` for the first bad task."""
    for t in tasks:
        if t.provider is not None and t.provider != provider_name:
            raise UsageError(
                f"task {t.id!r} (line {t.line}): 'provider' {t.provider!r} is not the batch's "
                f"({provider_name!r}): on --backend ray every node runs the batch's one provider"
            )
    if repo_url is not None:
        return await _url_jobs(tasks, template, cwd, repo_url, push)
    return await _path_jobs(tasks, template, cwd, worktrees)


async def _url_jobs(
    tasks: Sequence[BatchTask],
    template: Task,
    cwd: str | os.PathLike[str] | None,
    url: str,
    push: bool,
) -> list[Job]:
    if cwd is not None:
        raise UsageError("--cwd cannot be combined with a repository URL (tasks run at its top level)")
    start = await remote_head(url)
    jobs = []
    for t in tasks:
        if t.cwd is not None:
            raise UsageError(
                f"task {t.id!r} (line {t.line}): 'cwd' cannot be used with a repository URL "
                "(tasks run at the repository's top level)"
            )
        task = build_task(t, template, Path("."))
        jobs.append(Job(task=task, repo=url, clone=True, start=start, worktree=True, attempt=0, push=push))
    return jobs


async def _path_jobs(
    tasks: Sequence[BatchTask], template: Task, cwd: str | os.PathLike[str] | None, worktrees: bool
) -> list[Job]:
    default_cwd = Path(cwd) if cwd is not None else Path(template.spec.cwd or os.getcwd())
    starts: dict[Path, str | None] = {}
    jobs = []
    for t in tasks:
        directory = (t.cwd or default_cwd).expanduser()
        if not directory.is_dir():
            raise UsageError(f"task {t.id!r} (line {t.line}): directory {str(directory)!r} does not exist")
        directory = directory.resolve()
        top = await _git.toplevel(directory)
        needs_git = (
            worktrees or t.require_commit or (t.require_commit is None and template.gate.require_commit)
        )
        if top is None and needs_git:
            raise UsageError(f"task {t.id!r} (line {t.line}): {str(directory)!r} is not in a git repository")
        if top is not None and worktrees and top not in starts:
            starts[top] = await _git.head(top)
            if starts[top] is None:
                raise UsageError(
                    f"task {t.id!r} (line {t.line}): the repository {str(top)!r} has no commit yet"
                )
        job = Job(
            task=build_task(t, template, directory),
            repo=str(top) if top is not None else None,
            clone=False,
            start=starts.get(top) if top is not None else None,
            worktree=worktrees and top is not None,
            attempt=0,
        )
        jobs.append(job)
    return jobs


def resumed_job(job: Job, row: LedgerRow, out: Path) -> Job:
    """``job`` continuing what the ledger's ``row`` says earlier runs did: its session and the commit its
    first run started from (unless it is to start afresh) and its branch; in URL mode the branch comes
    from the bundle the last run brought back, shipped to whichever node runs it (each run clones
    anew)."""
    continued = row.resumable and not row.fresh
    session = row.session_id if continued else None
    base_head = row.base_head if continued else None
    reuse = row.runs > 0
    earlier = earlier_bundle(out, job.task.id) if reuse and job.clone else None
    return replace(
        job, reuse_branch=reuse, resume_session=session, base_head=base_head, earlier_bundle=earlier
    )


async def remote_head(url: str) -> str:
    """The commit ``url``'s HEAD names (``git ls-remote``); ``UsageError`` when it cannot be read."""
    try:
        listing = await _git.git(tempfile.gettempdir(), "ls-remote", url, "HEAD")
    except _git.GitError as exc:
        raise UsageError(f"cannot read the repository {url!r}: {exc}") from exc
    sha = listing.split()[0] if listing.split() else ""
    if not sha:
        raise UsageError(f"the repository {url!r} has no HEAD commit")
    return sha
