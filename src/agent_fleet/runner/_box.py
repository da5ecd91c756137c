"""Where a fleet keeps its own files: the state directory, each batch's box, the record's place.

Layout (``docs/concepts/box.md``)::

    $XDG_STATE_HOME/agent-fleet/        (else ~/.local/state/agent-fleet; mode 0700)
        batches/<stamp>-<hex>/          the default --out of `agent-fleet batch`: the record
        boxes/<name>-<hex>/             one batch's box (mode 0700)
            worktrees/<task-id>/        a task's git worktree (--worktrees)
            tmp/<task-id>/              a task's own temporary directory (mode 0700: Spec.temp_dir)
        ray/<batch-id>/<node>/          on a Ray node: its clones, worktrees/ and tmp/
        serve/                          the daemon's (its store, batches/<id>/ and boxes/)

A task's writable world is its working directory and its temporary directory: the box keeps both out
of any shared, world-writable directory (``/tmp``) and out of every repository's working tree, so
another user cannot reach them and no agent commits them. The record (``--out``) is outside every box.

``private_dir`` makes (or checks) a directory that only this user can enter: made mode 0700, refused
when it is a symbolic link or another user's, tightened to 0700 when it is ours but looser.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_fleet.errors import UsageError
from agent_fleet.runner import _git
from agent_fleet.runner.ledger import Ledger

__all__ = [
    "BatchBox",
    "Box",
    "check_outside",
    "check_record_place",
    "default_record_dir",
    "fresh_private_dir",
    "open_batch_box",
    "private_dir",
    "private_tree",
    "state_dir",
]


def state_dir() -> Path:
    """The fleet's state directory on this machine (not created): ``$XDG_STATE_HOME/agent-fleet``, else
    ``~/.local/state/agent-fleet`` (a relative ``XDG_STATE_HOME`` is ignored, as the XDG spec says)."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "agent-fleet"


def private_dir(path: Path) -> Path:
    """``path`` as a directory only this user can enter (see the module docstring); its parents are made
    with the usual mode when missing. Raises ``UsageError`` naming the directory."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        raise UsageError(f"cannot create the directory {str(path)!r}: {exc.strerror or exc}") from exc
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{str(path)!r} must be a directory, not a symbolic link or a file")
    if info.st_uid != os.geteuid():
        raise UsageError(f"the directory {str(path)!r} belongs to another user (uid {info.st_uid})")
    if stat.S_IMODE(info.st_mode) & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            raise UsageError(f"cannot make {str(path)!r} private (mode 0700): {exc.strerror}") from exc
    return path


def private_tree(top: Path, path: Path) -> Path:
    """``path`` made with every directory from ``top`` down to it private (``top`` included)."""
    private_dir(top)
    for part in path.relative_to(top).parts:
        top = private_dir(top / part)
    return path


def fresh_private_dir(path: Path) -> Path:
    """``path`` made empty and private (mode 0700): what an earlier use left is removed."""
    private_dir(path.parent)
    shutil.rmtree(path, ignore_errors=True)
    try:
        path.mkdir(mode=0o700)
    except OSError as exc:
        raise UsageError(f"cannot create the directory {str(path)!r}: {exc.strerror or exc}") from exc
    return path


def default_record_dir(base: Path | None = None) -> Path:
    """A new batch's default record directory (not created): ``<state>/batches/<stamp>-<hex>``; its
    parents are made private."""
    batches = private_dir((base or private_dir(state_dir())) / "batches")
    return batches / f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def _inside(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


def _absolute(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


async def _ignored(top: Path, path: Path) -> bool:
    """True when git ignores ``path`` (a directory inside ``top``'s working tree, made or not): a file in
    it is ignored and not tracked."""
    probe = path.relative_to(top) / "batch.db"
    try:
        await _git.git(top, "check-ignore", "-q", "--", str(probe))
    except _git.GitError:
        return False  # 1: not ignored; anything else: cannot tell, so not ignored
    return True


async def check_record_place(out: str | os.PathLike[str], trees: Iterable[Path]) -> None:
    """``UsageError`` when the record directory ``out`` lies inside one of the git working trees
    ``trees`` (the repositories the agents work in) and git does not ignore it: the agents' commits
    would take the batch's files with them."""
    where = _absolute(out)
    for tree in {_absolute(t) for t in trees}:
        if _inside(where, tree) and not (where != tree and await _ignored(tree, where)):
            raise UsageError(
                f"--out {str(out)!r} is inside the git working tree {str(tree)!r} the agents work in: "
                "their commits would take the batch's record with them. Leave --out out (the record then "
                f"goes to {str(state_dir() / 'batches')!r}), choose a directory outside the repository, "
                "or have git ignore it"
            )


def check_outside(path: Path, trees: Iterable[Path], what: str) -> None:
    """``UsageError`` when ``path`` lies inside one of ``trees`` (working trees the agents work in)."""
    where = _absolute(path)
    for tree in {_absolute(t) for t in trees}:
        if _inside(where, tree):
            raise UsageError(
                f"{what} {str(path)!r} is inside the working tree {str(tree)!r} the agents work in "
                "(set XDG_STATE_HOME to a directory outside it)"
            )


class Box:
    """One batch's box directory: the tasks' worktrees and temporary directories (mode 0700 each).

    ``open(base, name)`` makes a new one under ``base`` (``<state>/boxes`` by default); ``reopen(path)``
    takes back a box a previous run of the batch recorded (a resume), when it is still there."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def open(cls, base: Path | None, name: str) -> Box:
        parent = private_dir(base if base is not None else private_dir(state_dir()) / "boxes")
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60] or "batch"
        try:
            root = Path(tempfile.mkdtemp(prefix=f"{safe}-", dir=parent))  # mode 0700
        except OSError as exc:
            raise UsageError(f"cannot create a box under {str(parent)!r}: {exc.strerror or exc}") from exc
        return cls(root)

    @classmethod
    def reopen(cls, path: str) -> Box | None:
        root = Path(path)
        if not root.is_dir():
            return None
        return cls(private_dir(root))

    def worktree(self, task_id: str) -> Path:
        """Where task ``task_id``'s worktree goes (made by ``git worktree add``; its parent made here)."""
        parent = private_dir(self.root / "worktrees")
        return parent / task_id

    def temp_dir(self, task_id: str) -> Path:
        """Task ``task_id``'s own temporary directory, made empty (mode 0700)."""
        return fresh_private_dir(self.root / "tmp" / task_id)  # an earlier run's is scratch

    def drop_temp(self, task_id: str) -> None:
        """Remove task ``task_id``'s temporary directory and everything in it."""
        shutil.rmtree(self.root / "tmp" / task_id, ignore_errors=True)

    def close(self) -> None:
        """Remove what is empty: ``tmp/``, ``worktrees/`` and the box itself (a kept worktree stays)."""
        for path in (self.root / "tmp", self.root / "worktrees", self.root):
            with contextlib.suppress(OSError):
                path.rmdir()


def open_batch_box(ledger: Ledger, out: Path, box_dir: str | os.PathLike[str] | None) -> Box:
    """A batch's box: the one its ledger names when it is still there (a resume), else a new one under
    ``box_dir`` (default ``<state>/boxes``), named in the ledger."""
    recorded = ledger.meta().get("box")
    if isinstance(recorded, str):
        box = Box.reopen(recorded)
        if box is not None:
            return box
    box = Box.open(Path(box_dir) if box_dir is not None else None, out.name)
    ledger.set_meta("box", str(box.root))
    return box


@dataclass(frozen=True, slots=True)
class BatchBox:
    """What a batch's task needs of its box: the directory, worktrees on or off, the trees tasks share
    (with their number of tasks)."""

    box: Box
    worktrees: bool
    shared: Mapping[Path, int]
