"""An exclusive lock file that says who holds it: one batch per ``--out`` (``runner.ledger``), one daemon
per state directory (``serve._state``). The lock is an ``flock`` on an open file, so the kernel lets go
when its process ends, however it ends; the file holds the holder's pid, for the refusal's message."""

from __future__ import annotations

import fcntl
import io
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["hold_lock"]


def hold_lock(
    path: Path, *, busy: Callable[[str], Exception], failed: Callable[[OSError], Exception]
) -> io.FileIO:
    """The open file holding an exclusive lock on ``path`` (made 0600 if missing; closing the file, or
    collecting it, lets go), with this process's pid written in it. Raises ``busy(who)`` when another
    process holds it (``who``: ``"pid N"`` as its file says, else ``"another process"``), ``failed(exc)``
    on any other error."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # not inheritable (PEP 446)
    except OSError as exc:
        raise failed(exc) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        raise busy(f"pid {holder}" if holder.isdigit() else "another process") from None
    except OSError as exc:
        os.close(fd)
        raise failed(exc) from exc
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return io.FileIO(fd, "r+", closefd=True)
