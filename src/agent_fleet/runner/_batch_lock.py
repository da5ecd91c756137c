"""One batch at a time in an ``--out`` directory: an exclusive ``flock`` on its lock file (see
``runner.ledger``'s module docstring)."""

from __future__ import annotations

import fcntl
import io
import os
from pathlib import Path

from agent_fleet.errors import UsageError

__all__ = ["lock_batch"]


def lock_batch(path: Path) -> io.FileIO:
    """An exclusive lock on the batch whose lock file is ``path``: the open file holding it (a file
    object, so a ledger dropped without ``close`` still lets go when it is collected). Raises
    ``UsageError`` naming the process that holds it."""
    out = path.parent
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # not inheritable (PEP 446)
    except OSError as exc:
        raise UsageError(f"cannot lock the batch in {str(out)!r}: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        who = f"pid {holder}" if holder.isdigit() else "another process"
        raise UsageError(
            f"--out {str(out)!r} is in use by another batch ({who}): wait for it to end or stop it"
        ) from None
    except OSError as exc:
        os.close(fd)
        raise UsageError(f"cannot lock the batch in {str(out)!r}: {exc.strerror or exc}") from exc
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return io.FileIO(fd, "r+", closefd=True)
