"""The daemon's state directory: private, and one daemon's at a time.

``open_state_dir`` makes the directory (mode 0700) or checks an existing one: owned by another user it
is refused; readable, writable or searchable by the group or by others, it is tightened (the directory
and everything in it: directories 0700, files 0600) and a warning says so, because batch transcripts,
reports and summaries hold prompts, outputs and diffs. It then locks ``serve.lock`` in it (``flock``, as
a batch's ``batch.lock``): a second daemon on the same directory stops with a ``UsageError`` (exit 2)
naming the pid that holds it, before it opens the store (which would mark the first's live sessions
``interrupted``). The lock is held by an open file; closing it (or the process ending) lets go.

``private_tree`` tightens a tree the daemon wrote through other code (a batch's directory, written by
the runner with the process's umask) once that code is done with it.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Final

from agent_fleet._pidlock import hold_lock
from agent_fleet.errors import UsageError

LOCK_FILE: Final = "serve.lock"


def private_tree(root: Path) -> int:
    """Make every directory under ``root`` (and ``root``) 0700 and every file 0600 (symlinks are left
    alone); returns how many modes changed."""
    changed = 0
    for directory, dirs, files in os.walk(root):
        for name, mode in [(directory, 0o700), *((os.path.join(directory, f), 0o600) for f in files)]:
            try:
                info = os.lstat(name)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                continue
            wanted = mode if stat.S_ISDIR(info.st_mode) else 0o600
            if stat.S_IMODE(info.st_mode) & 0o077:
                os.chmod(name, stat.S_IMODE(info.st_mode) & wanted)
                changed += 1
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(directory, d))]
    return changed


def _usage(state: Path, exc: OSError) -> UsageError:
    return UsageError(
        f"cannot use the state directory {str(state)!r}: {exc.strerror or exc} (see --state-dir)"
    )


def open_state_dir(state: Path) -> tuple[io.FileIO, list[str]]:
    """The lock held on ``state`` and warnings (see the module docstring). Raises ``UsageError``."""
    warnings: list[str] = []
    try:
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = state.stat()
        if not stat.S_ISDIR(info.st_mode):
            raise NotADirectoryError(20, "not a directory")
        if info.st_uid != os.geteuid():
            raise UsageError(
                f"the state directory {str(state)!r} belongs to another user (uid {info.st_uid}): "
                "give a --state-dir of your own"
            )
        if stat.S_IMODE(info.st_mode) & 0o077:
            mode = stat.S_IMODE(info.st_mode)
            changed = private_tree(state)
            warnings.append(
                f"the state directory {str(state)!r} was accessible to other users (mode {mode:o}): "
                f"made it private (0700, its files 0600; {changed} mode(s) changed)"
            )
        if not os.access(state, os.W_OK | os.X_OK):
            raise PermissionError(13, f"{state} is not writable")
    except OSError as exc:
        raise _usage(state, exc) from exc

    def busy(who: str) -> UsageError:
        return UsageError(
            f"the state directory {str(state)!r} is in use by another agent-fleet serve ({who}): "
            "stop it, or give another --state-dir"
        )

    return hold_lock(state / LOCK_FILE, busy=busy, failed=lambda exc: _usage(state, exc)), warnings
