"""SQLite plumbing of the batch's record: one atomic transaction, and writes a full disk refuses raised as
``StorageError`` (naming the file) instead of a bare ``sqlite3.OperationalError``."""

from __future__ import annotations

import contextlib
import errno
import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, Final, ParamSpec, Protocol, TypeVar

from agent_fleet.errors import StorageError

__all__ = ["transaction", "writes"]


class _HasPath(Protocol):
    @property
    def path(self) -> Path: ...


class transaction:
    """``BEGIN IMMEDIATE`` .. ``COMMIT`` (``ROLLBACK`` on an error, or when the commit fails): one atomic
    transition, never half of one."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None:
                self.db.execute("COMMIT")
                return
        except sqlite3.Error:
            self._rollback()
            raise
        self._rollback()

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # (SQLite may have rolled back already, e.g. disk full)
            self.db.execute("ROLLBACK")


_P = ParamSpec("_P")
_R = TypeVar("_R")
_S = TypeVar("_S", bound=_HasPath)
#: SQLite's primary result codes for a write the disk refused (the extended codes keep them in the low byte)
_DISK_CODES: Final = frozenset({13, 10})  # SQLITE_FULL, SQLITE_IOERR


def writes(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """A write of the ledger the disk may refuse (full): raised as ``StorageError`` naming ``self.path``."""

    @functools.wraps(method)
    def write(owner: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(owner, *args, **kwargs)
        except sqlite3.Error as exc:
            code = getattr(exc, "sqlite_errorcode", None)
            if code is None or code & 0xFF not in _DISK_CODES:
                raise
            cause = OSError(errno.ENOSPC if code & 0xFF == 13 else errno.EIO, str(exc))
            raise StorageError(str(owner.path), "the ledger", cause) from exc

    return write
