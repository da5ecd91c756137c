"""The Ray backend's git work: a node's clones, worktrees, bundles and pushes; the driver's bundle files.

On a node (``NodeRepos``, one per ``NodeRunner``), in either repository mode (see ``_ray_node``):
worktrees are added and removed under a lock per repository, across processes and nodes too (an
``flock`` on a file in the git directory, polled so a cancelled waiter never holds it).

Repository URL mode: each node makes one bare clone of the URL per batch, of the start commit's
branch only (``--single-branch``), so a branch ``agent-fleet/<id>`` in the clone is only ever the
task's own: started from the start commit or, when the task ran before (a resumed batch, or a retry
of a resumed task), fetched from the bundle of its earlier run that the driver ships with the job,
whichever node it lands on. A same-named branch on the remote never becomes the task's starting
point; with ``push`` it is where the task's branch goes, without force: a remote branch that has
commits the task's lacks refuses the push, and the refusal is returned (``PushOutcome``), not raised.

In the driver's ``out_dir``: ``<id>.bundle`` is the task's branch as its latest run left it (all its
commits since the start, since a run continues from the earlier bundle). A run that brings a
different bundle first moves the earlier one to ``earlier-bundles/<id>.<n>.bundle``: a bundle is
never overwritten.

This module is imported by the Ray workers: it imports nothing but agent-fleet.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_fleet.runner import _git
from agent_fleet.runner.transcript import Redactor

__all__ = [
    "EARLIER_BUNDLES",
    "NodeRepos",
    "PushOutcome",
    "branch_tip",
    "earlier_bundle",
    "flock",
    "has_commit",
    "keep_bundle",
    "publish_branch",
    "repo_lock",
]

EARLIER_BUNDLES = "earlier-bundles"
_LOCK_POLL = 0.05
_NETWORK_LIMIT = 600.0  # seconds for a clone, a fetch from the URL or a push to it


@dataclass(frozen=True, slots=True, kw_only=True)
class PushOutcome:
    """What became of pushing a task's ``branch`` (its tip ``commit``) to the repository URL.

    ``error`` (redacted with the node's environment) says why it was not ``pushed``: refused (the
    remote's branch has commits the task's lacks: never force-pushed), no access, unreachable."""

    branch: str
    commit: str | None
    pushed: bool
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"branch": self.branch, "commit": self.commit, "pushed": self.pushed, "error": self.error}


class NodeRepos:
    """A node's repositories for one batch: clones under ``root/repos``, worktrees, bundles, pushes.

    ``kept`` collects what must outlive the batch on this node (a worktree with uncommitted work, a
    clone holding commits no bundle carried)."""

    def __init__(self, root: Path, redactor: Redactor) -> None:
        self.root = root
        self.redactor = redactor
        self.kept: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._clones: dict[str, Path] = {}

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    @contextlib.asynccontextmanager
    async def _repo_lock(self, repo: Path) -> AsyncIterator[None]:
        """Serialise worktree changes in ``repo``: among this actor's tasks, then across processes and
        nodes (``repo_lock``)."""
        async with self._lock(str(repo)), repo_lock(repo):
            yield

    async def clone(self, url: str, start: str | None) -> Path:
        """This node's clone of ``url`` for this batch (bare, the start commit's branch only; made once,
        then reused)."""
        async with self._lock("clone:" + url):
            if url in self._clones:
                return self._clones[url]
            target = self.root / "repos" / str(len(self._clones))
            if not (target / "HEAD").exists():
                await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
                await _git.git(
                    self.root,
                    "clone",
                    "--quiet",
                    "--bare",
                    "--single-branch",
                    url,
                    str(target),
                    time_limit=_NETWORK_LIMIT,
                )
            if start is not None and not await has_commit(target, start):
                await _git.git(target, "fetch", "--quiet", url, start, time_limit=_NETWORK_LIMIT)
            self._clones[url] = target
            return target

    async def add_attempt_worktree(
        self, repo: Path, worktree: Path, branch: str, attempt_branch: str, *, start: str, reuse: bool
    ) -> str | None:
        """Shared-path mode: ``worktree`` on the attempt's own branch ``attempt_branch``, made from the
        task's ``branch`` as it is (``reuse``: a resumed task, when the branch exists) or from ``start``;
        the task's branch itself is only ever moved by the driver, once it accepted the attempt
        (``publish_branch``). A new task whose branch exists already is refused (``GitError``), as on a
        local batch. A worktree left at that path by a dead actor on this node is removed first.
        Returns the commit of the task's branch the attempt starts from (None: it starts from
        ``start``, the task's branch does not exist)."""
        async with self._repo_lock(repo):
            exists = await has_commit(repo, f"refs/heads/{branch}")
            if exists and not reuse:
                raise _git.GitError(
                    ("worktree", "add"), 128, f"fatal: a branch named '{branch}' already exists"
                )
            base = await _git.git(repo, "rev-parse", f"refs/heads/{branch}") if exists else None
            if await asyncio.to_thread(worktree.exists):
                with contextlib.suppress(_git.GitError):
                    await _git.git(repo, "worktree", "remove", "--force", str(worktree))
                await asyncio.to_thread(shutil.rmtree, worktree, True)
            await _git.git(repo, "worktree", "prune")
            await asyncio.to_thread(worktree.parent.mkdir, parents=True, exist_ok=True)
            await _git.git(
                repo, "worktree", "add", "--quiet", "-B", attempt_branch, str(worktree), base or start
            )
            return base

    async def add_worktree(
        self,
        repo: Path,
        worktree: Path,
        branch: str,
        *,
        start: str | None,
        reset: bool,
        reuse: bool,
        stale: str | None,
        earlier: bytes | None,
    ) -> None:
        """``worktree`` on ``branch``: reused as it is (``reuse``; fetched from the ``earlier`` bundle
        first when given), reset to ``start`` after removing a dead attempt's ``stale`` worktree
        (``reset``), else new from ``start``. Raises ``GitError``."""
        async with self._repo_lock(repo):
            if reuse and not reset:
                # A resumed task: the branch as the earlier run left it. `--force`: an earlier worktree
                # (kept for its uncommitted work) may still hold it; that one is left as it is.
                await _git.git(repo, "worktree", "prune")
                await asyncio.to_thread(shutil.rmtree, worktree, True)
                if earlier is not None:
                    await self._fetch_bundle(repo, branch, earlier)
                if await has_commit(repo, f"refs/heads/{branch}"):
                    await asyncio.to_thread(worktree.parent.mkdir, parents=True, exist_ok=True)
                    await _git.git(repo, "worktree", "add", "--quiet", "--force", str(worktree), branch)
                    return
            if reset:
                # An earlier attempt died holding the branch in its worktree: drop that worktree (on this
                # node it still exists; on another node's disk it is gone and `prune` forgets it).
                for path in {stale, str(worktree)} - {None}:
                    with contextlib.suppress(_git.GitError):
                        await _git.git(repo, "worktree", "remove", "--force", str(path))
                await _git.git(repo, "worktree", "prune")
                await asyncio.to_thread(shutil.rmtree, worktree, True)
            await asyncio.to_thread(worktree.parent.mkdir, parents=True, exist_ok=True)
            flag = "-B" if reset else "-b"
            await _git.git(repo, "worktree", "add", "--quiet", flag, branch, str(worktree), start or "HEAD")

    async def _fetch_bundle(self, repo: Path, branch: str, data: bytes, *, into: str | None = None) -> None:
        """``branch`` in ``repo`` (or the ref ``into``) set to the bundle's (forced: the bundle is the
        task's own record; what this clone had under that name, e.g. a dead attempt's commits, is not)."""
        path = self.root / "bundles" / f"in-{uuid.uuid4().hex}.bundle"
        await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
        await asyncio.to_thread(path.write_bytes, data)
        target = into or f"refs/heads/{branch}"
        try:
            await _git.git(repo, "fetch", "--quiet", str(path), f"+refs/heads/{branch}:{target}")
        finally:
            await asyncio.to_thread(path.unlink, True)

    async def remove_worktree(self, repo: Path, worktree: Path) -> Path | None:
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

    async def bundle(self, repo: Path, branch: str, start: str) -> bytes | None:
        """A git bundle of ``branch``'s commits after ``start`` (None when there are none)."""
        try:
            if not await _ahead(repo, branch, start):
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

    async def push_tip(
        self, url: str, branch: str, start: str, tip: str, bundle: bytes | None
    ) -> PushOutcome:
        """Push commit ``tip`` to ``url``'s ``branch``, never forced, from this node's clone of ``url``
        (made if needed); the commits come from ``bundle`` when the clone lacks them (another node ran
        the attempt). Pushing a tip the remote already has is a no-op that succeeds, so the push of an
        accepted attempt can be tried again on another node. A failure is returned, not raised."""
        ref = f"refs/heads/{branch}"
        incoming = f"refs/agent-fleet/incoming/{uuid.uuid4().hex}"
        try:
            repo = await self.clone(url, start)
            if not await has_commit(repo, tip):
                if bundle is None:
                    raise _git.GitError(("push",), 1, f"error: commit {tip} is not on this node")
                await self._fetch_bundle(repo, branch, bundle, into=incoming)
        except _git.GitError as exc:
            return PushOutcome(branch=branch, commit=tip, pushed=False, error=self.redactor.text(str(exc)))
        try:
            await _git.git(repo, "push", "--quiet", url, f"{tip}:{ref}", time_limit=_NETWORK_LIMIT)
        except _git.GitError as exc:
            error = self.redactor.text(_push_error(exc))
            return PushOutcome(branch=branch, commit=tip, pushed=False, error=error)
        finally:
            with contextlib.suppress(_git.GitError):
                await _git.git(repo, "update-ref", "-d", incoming)
        return PushOutcome(branch=branch, commit=tip, pushed=True)

    async def push(self, repo: Path, url: str, branch: str, start: str) -> PushOutcome | None:
        """Push ``branch`` to the same branch of ``url``, never forced. None when it has no commit after
        ``start`` (nothing to push); a failure is returned, not raised."""
        try:
            if not await _ahead(repo, branch, start):
                return None
            tip = await _git.git(repo, "rev-parse", f"refs/heads/{branch}")
        except _git.GitError as exc:
            return PushOutcome(branch=branch, commit=None, pushed=False, error=self.redactor.text(str(exc)))
        ref = f"refs/heads/{branch}"
        try:
            await _git.git(repo, "push", "--quiet", url, f"{ref}:{ref}", time_limit=_NETWORK_LIMIT)
        except _git.GitError as exc:
            error = self.redactor.text(_push_error(exc))
            return PushOutcome(branch=branch, commit=tip, pushed=False, error=error)
        return PushOutcome(branch=branch, commit=tip, pushed=True)


def _push_error(exc: _git.GitError) -> str:
    """What git said about a failed push, in one line: the refused ref and the errors, not the hints."""
    lines = [line.strip() for line in exc.stderr.splitlines()]
    said = [line.lstrip("! ").strip() for line in lines if line.startswith(("!", "error:", "fatal:"))]
    text = "; ".join(said) if said else str(exc)
    if "[rejected]" in text:
        text += " (the remote's branch has commits this task's branch lacks; agent-fleet never force-pushes)"
    return text


async def _ahead(repo: Path, branch: str, start: str) -> bool:
    return int(await _git.git(repo, "rev-list", "--count", f"{start}..refs/heads/{branch}") or 0) > 0


async def branch_tip(repo: Path, branch: str) -> str | None:
    """The commit ``branch`` points at in ``repo`` (None: no such branch, or git failed)."""
    try:
        return await _git.git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}") or None
    except _git.GitError:
        return None


async def has_commit(repo: Path, sha: str) -> bool:
    try:
        await _git.git(repo, "cat-file", "-e", f"{sha}^{{commit}}")
    except _git.GitError:
        return False
    return True


@contextlib.asynccontextmanager
async def repo_lock(repo: Path) -> AsyncIterator[None]:
    """Serialise changes to ``repo``'s worktrees and agent-fleet's branches across processes and nodes:
    an ``flock`` on a file in its git directory (the shared filesystem must support ``flock``)."""
    common = Path(await _git.git(repo, "rev-parse", "--git-common-dir"))
    async with flock((common if common.is_absolute() else repo / common) / "agent-fleet.lock"):
        yield


_ZERO = "0" * 40


async def publish_branch(
    repo: Path, branch: str, tip: str, *, base: str | None, attempt_branch: str | None
) -> None:
    """The driver accepted an attempt (shared-path mode): set the task's ``branch`` in ``repo`` to the
    attempt's ``tip``, only if it still is where the attempt started (``base``; None: it must not exist
    yet), then delete the attempt's own branch (None: it is kept, a kept worktree has it checked out).
    Raises ``GitError`` when the branch moved meanwhile (it is then left as it is)."""
    async with repo_lock(repo):
        if await branch_tip(repo, branch) != tip:  # (equal: published already, nothing moves)
            await _git.git(repo, "update-ref", f"refs/heads/{branch}", tip, base or _ZERO)
        if attempt_branch is not None:
            with contextlib.suppress(_git.GitError):
                await _git.git(repo, "update-ref", "-d", f"refs/heads/{attempt_branch}", tip)


@contextlib.asynccontextmanager
async def flock(path: Path) -> AsyncIterator[None]:
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


# -- the driver's bundle files ------------------------------------------------------------------------


def earlier_bundle(out: Path, task_id: str) -> bytes | None:
    """The bundle an earlier run of ``task_id`` left in ``out`` (None: it made no commit)."""
    try:
        return (out / f"{task_id}.bundle").read_bytes()
    except FileNotFoundError:
        return None


def keep_bundle(out: Path, task_id: str, data: bytes) -> Path:
    """Write ``data`` as ``out/<id>.bundle``; an earlier, different one there is moved to
    ``out/earlier-bundles/<id>.<n>.bundle`` first (``n`` counts from 1), so none is overwritten."""
    path = out / f"{task_id}.bundle"
    if path.exists() and path.read_bytes() != data:
        history = out / EARLIER_BUNDLES
        history.mkdir(exist_ok=True)
        n = 1
        while (history / f"{task_id}.{n}.bundle").exists():
            n += 1
        path.replace(history / f"{task_id}.{n}.bundle")
    partial = out / f".{task_id}.bundle.partial"  # a crash mid-write leaves no torn bundle
    partial.write_bytes(data)
    os.replace(partial, path)
    return path
