"""Containment of file changes: every path must resolve inside the working directory or a writable root.

Paths are joined to ``cwd`` and resolved with ``os.path.realpath``, which follows symlinks for the part
of the path that exists (dangling links included) and folds ``..`` and the not-yet-existing rest
lexically; the roots are resolved the same way, so a working directory reached through a symlink still
contains its own files. This reads the filesystem but changes nothing. ``~`` is not expanded: it is an
ordinary file name to the tools that write files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from agent_fleet.policy._types import Decision

__all__ = ["check_paths", "realpath"]


def _escape(reason: str) -> Decision:
    return Decision(action="decline", rule="path-escape", reason=reason)


def realpath(path: str, known: dict[str, str]) -> str:
    """``os.path.realpath(path)`` for an absolute ``path``, with the directories it resolved kept in
    ``known``: a request naming 10,000 paths in a few directories resolves each directory once and
    each last component with one ``lstat`` (``realpath`` alone walks every component every time)."""
    head, tail = os.path.split(path)
    if not tail or head == path:
        return os.path.realpath(path)
    real_head = known.get(head)
    if real_head is None:
        real_head = known[head] = realpath(head, known) if len(known) < 4096 else os.path.realpath(head)
    if tail in (".", ".."):
        return os.path.normpath(os.path.join(real_head, tail))
    candidate = os.path.join(real_head, tail)
    return os.path.realpath(candidate) if os.path.islink(candidate) else candidate


def _within(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def check_paths(
    paths: Iterable[str | os.PathLike[str]],
    cwd: str | os.PathLike[str] | None,
    writable_roots: Iterable[str | os.PathLike[str]] = (),
) -> Decision | None:
    """``None`` when every path stays inside ``cwd`` or a writable root; else a ``path-escape`` decline.

    Relative paths (and relative writable roots) need ``cwd``: with ``cwd=None`` a relative path is
    declined. An empty path, or one with a NUL byte, is declined. No paths at all gives ``None``.
    """
    try:
        base = os.path.realpath(os.fspath(cwd)) if cwd is not None else None
        roots: list[str] = [base] if base is not None else []
        for root in (os.fspath(raw) for raw in writable_roots):
            if os.path.isabs(root):
                roots.append(os.path.realpath(root))
            elif base is not None:
                roots.append(os.path.realpath(os.path.join(base, root)))
    except (OSError, ValueError) as exc:
        return _escape(f"cannot resolve the working directory or writable roots: {exc}")
    known: dict[str, str] = {}
    for raw in paths:
        path = os.fspath(raw)
        if not path:
            return _escape("empty path")
        if "\0" in path:
            return _escape(f"path {path!r} contains a NUL byte")
        if not os.path.isabs(path) and base is None:
            return _escape(f"relative path {path!r} with no working directory")
        try:
            resolved = realpath(os.path.join(base, path) if base is not None else path, known)
        except (OSError, ValueError) as exc:
            return _escape(f"cannot resolve {path!r}: {exc}")
        if not _within(resolved, roots):
            return _escape(
                f"{path!r} resolves to {resolved!r}, outside the working directory and writable roots"
            )
    return None
