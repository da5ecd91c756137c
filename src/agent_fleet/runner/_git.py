"""Small async git helpers for the runner (HEAD tracking, worktrees). Never used on the agent's behalf."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agent_fleet.errors import AgentFleetError

__all__ = ["GitError", "commits_since", "git", "head", "is_dirty", "toplevel"]

_GIT_TIMEOUT = 60.0


class GitError(AgentFleetError):
    """A git command the runner needed failed (``command``, ``returncode``, ``stderr``)."""

    def __init__(self, args: tuple[str, ...], returncode: int | None, stderr: str) -> None:
        detail = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {returncode}"
        super().__init__(f"git {' '.join(args)} failed: {detail}")
        self.command = args
        self.returncode = returncode
        self.stderr = stderr


async def git(cwd: str | os.PathLike[str], *args: str, time_limit: float = _GIT_TIMEOUT) -> str:
    """Run ``git args...`` in ``cwd``; return stdout (stripped). Raises ``GitError``."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=os.fspath(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
    except OSError as exc:
        raise GitError(args, None, str(exc)) from exc
    try:
        out, err = await asyncio.wait_for(proc.communicate(), time_limit)
    except TimeoutError as exc:
        proc.kill()
        await proc.wait()
        raise GitError(args, None, f"timed out after {time_limit:g}s") from exc
    if proc.returncode != 0:
        raise GitError(args, proc.returncode, err.decode(errors="replace"))
    return out.decode(errors="replace").strip()


async def toplevel(cwd: str | os.PathLike[str]) -> Path | None:
    """The repository's top-level directory, or None when ``cwd`` is not inside a git work tree."""
    try:
        return Path(await git(cwd, "rev-parse", "--show-toplevel"))
    except GitError:
        return None


async def head(cwd: str | os.PathLike[str]) -> str | None:
    """The commit HEAD points at, or None in a repository without commits (or outside one)."""
    try:
        return await git(cwd, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except GitError:
        return None


async def commits_since(cwd: str | os.PathLike[str], base: str | None) -> int:
    """Commits reachable from HEAD but not from ``base`` (all of HEAD's history when ``base`` is None)."""
    current = await head(cwd)
    if current is None:
        return 0
    spec = current if base is None else f"{base}..{current}"
    return int(await git(cwd, "rev-list", "--count", spec) or 0)


async def is_dirty(cwd: str | os.PathLike[str]) -> bool:
    """True when the work tree has staged, unstaged or untracked changes."""
    return bool(await git(cwd, "status", "--porcelain", "--untracked-files=normal"))
