"""A batch task's git worktree: created on its branch, reused when the task resumes, removed when clean.

Worktree creation and removal are serialised per repository by the caller's lock (git's own locks are
not made for concurrent ``worktree add``).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from agent_fleet.runner import _git

__all__ = ["prepare", "remove_if_clean", "settle"]

_CLEANUP_LIMIT = 1.0  # seconds a cancelled task still waits for its worktree's removal


def _same(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


async def _is_worktree_of(path: Path, repo: Path) -> bool:
    if not await asyncio.to_thread(path.is_dir):
        return False
    try:
        common = Path(await _git.git(path, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        top = Path(await _git.git(path, "rev-parse", "--show-toplevel"))
    except _git.GitError:
        return False
    return _same(top, path) and _same(common, repo / ".git")


async def _branch_exists(repo: Path, branch: str) -> bool:
    try:
        await _git.git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
    except _git.GitError:
        return False
    return True


async def prepare(
    repo: Path, branch: str, fresh_path: Path, *, previous: Path | None, reuse: bool, lock: asyncio.Lock
) -> Path:
    """The worktree a task runs in.

    A new task (``reuse`` False) gets a new branch ``branch`` from HEAD at ``fresh_path`` (an existing
    branch is an error: it belongs to someone else). A task that ran before (``reuse``) gets its previous
    worktree back when it is still there, else ``branch`` checked out again at ``fresh_path`` (created
    from HEAD if it never came to exist). Raises ``GitError``.
    """
    async with lock:
        if not reuse:
            await _git.git(repo, "worktree", "add", "--quiet", "-b", branch, str(fresh_path), "HEAD")
            return fresh_path
        if previous is not None and await _is_worktree_of(previous, repo):
            return previous
        await _git.git(repo, "worktree", "prune")  # forget worktrees whose directory is gone
        if await _branch_exists(repo, branch):
            await _git.git(repo, "worktree", "add", "--quiet", str(fresh_path), branch)
        else:
            await _git.git(repo, "worktree", "add", "--quiet", "-b", branch, str(fresh_path), "HEAD")
        return fresh_path


async def remove_if_clean(repo: Path, worktree: Path, lock: asyncio.Lock) -> Path | None:
    """Remove a clean worktree (the branch stays); keep a dirty one and return its path."""
    try:
        if await _git.is_dirty(worktree):
            return worktree
        async with lock:
            await _git.git(repo, "worktree", "remove", str(worktree))
    except _git.GitError:
        return worktree
    return None


async def settle(repo: Path, worktree: Path, lock: asyncio.Lock) -> tuple[Path | None, bool]:
    """Remove the task's worktree when it is clean; return (the worktree if kept, cancelled meanwhile).

    The removal is not cancelled half-way (git would be left with a half-removed worktree): a
    cancellation meanwhile waits up to ``_CLEANUP_LIMIT`` for it, so that what is recorded is true."""
    cleanup = asyncio.ensure_future(remove_if_clean(repo, worktree, lock))
    cancelled = False
    deadline = time.monotonic() + _CLEANUP_LIMIT
    while not cleanup.done():
        left = deadline - time.monotonic()
        if cancelled and left <= 0:
            return worktree, True  # still being removed when we must leave: it may be there
        try:
            await asyncio.wait([cleanup], timeout=left if cancelled else None)
        except asyncio.CancelledError:
            cancelled = True
    if cleanup.cancelled() or cleanup.exception() is not None:
        return worktree, cancelled
    return cleanup.result(), cancelled
