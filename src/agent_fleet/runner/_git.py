"""Small async git helpers for the runner (HEAD tracking, worktrees). Never used on the agent's behalf."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from agent_fleet.errors import AgentFleetError

__all__ = [
    "GitError",
    "changed_files",
    "commits_since",
    "final_diff",
    "git",
    "head",
    "is_dirty",
    "toplevel",
]

_GIT_TIMEOUT = 60.0


class GitError(AgentFleetError):
    """A git command the runner needed failed (``command``, ``returncode``, ``stderr``)."""

    code = "git_failed"

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


_UNTRACKED_LIMIT = 100


async def final_diff(cwd: str | os.PathLike[str], base: str, *, limit: int = 200_000) -> str:
    """What changed since commit ``base``: commits and uncommitted edits of tracked files (``git diff
    base``), then untracked files as new files. Read-only (the index is not touched); at most ``limit``
    characters. Raises ``GitError``."""
    parts = [await git(cwd, "diff", "--no-color", "--no-ext-diff", base)]
    names = [n for n in (await git(cwd, "ls-files", "--others", "--exclude-standard", "-z")).split("\0") if n]
    for name in names[:_UNTRACKED_LIMIT]:
        if sum(map(len, parts)) > limit:
            break
        parts.append(await asyncio.to_thread(_new_file, Path(cwd), name))
    if len(names) > _UNTRACKED_LIMIT:
        parts.append(f"... and {len(names) - _UNTRACKED_LIMIT} more untracked files")
    text = "\n".join(p for p in parts if p)
    return text if len(text) <= limit else text[:limit] + "\n... (cut)"


async def changed_files(cwd: str | os.PathLike[str], base: str, *, limit: int = 1000) -> list[str]:
    """The files changed since commit ``base`` (as ``final_diff`` sees them: commits, edits, untracked
    files), relative to the repository's top level; at most ``limit``. Raises ``GitError``."""
    names = (await git(cwd, "diff", "--name-only", "-z", "--no-renames", base)).split("\0")
    untracked = await git(cwd, "ls-files", "--others", "--exclude-standard", "--full-name", "-z")
    out: dict[str, None] = dict.fromkeys(n for n in [*names, *untracked.split("\0")] if n)
    return list(out)[:limit]


def _new_file(root: Path, name: str) -> str:
    head = f"diff --git a/{name} b/{name}\nnew file (untracked)\n--- /dev/null\n+++ b/{name}"
    try:
        data = (root / name).read_bytes()
    except OSError as exc:
        return f"{head}\n(unreadable: {exc.strerror})"
    if b"\0" in data[:8000]:
        return f"{head}\nBinary file ({len(data)} bytes)"
    lines = data.decode(errors="replace").splitlines()
    return f"{head}\n@@ -0,0 +1,{len(lines)} @@\n" + "\n".join(f"+{line}" for line in lines)
