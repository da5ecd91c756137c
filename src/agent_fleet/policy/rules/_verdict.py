"""What rules share: where the command runs (``RuleContext``) and what a rule found (``Violation``)."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from agent_fleet.policy.rules._targets import HOME_FALLBACK

__all__ = ["VIRTUAL_CWD", "RuleContext", "Violation"]

#: Where relative ``cd`` targets are resolved when the request has no ``cwd``: a directory that exists
#: nowhere, so that a path resolved from it and landing outside it has climbed out of the working
#: directory (``cd .. && rm -rf ./*``).
VIRTUAL_CWD = "/\x00cwd/a/b/c/d/e/f"


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    rule: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleContext:
    """Where the command would run. ``cwd`` and ``roots`` are absolute and normalised.

    ``cd_targets``: directories the script itself ``cd``s into (``cd / && rm -rf *``); relative targets
    are judged against each of them as well as against ``cwd``. ``links``: ``(link, target)`` for the
    links the script makes (``ln -s / root``), followed when a path is judged (``_links``), unless
    ``follow_links`` is off (the link a command makes is judged where it is, not where it points).
    ``roots`` is empty when the session has no workspace (no ``cwd``): then only vital paths are
    judged, not containment.
    """

    cwd: str | None = None
    roots: tuple[str, ...] = ()
    home: str = HOME_FALLBACK
    cd_targets: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    follow_links: bool = True

    @classmethod
    def build(
        cls, cwd: str | os.PathLike[str] | None, writable_roots: Iterable[str | os.PathLike[str]] = ()
    ) -> RuleContext:
        home = os.path.expanduser("~")
        if not home.startswith("/"):
            home = HOME_FALLBACK
        norm_cwd = posixpath.normpath(os.path.abspath(cwd)) if cwd else None
        roots: list[str] = [norm_cwd] if norm_cwd else []
        for root in (os.fspath(raw) for raw in writable_roots):
            if not root.startswith("/"):
                if norm_cwd is None:
                    continue
                root = posixpath.join(norm_cwd, root)
            roots.append(posixpath.normpath(root))
        return cls(cwd=norm_cwd, roots=tuple(roots), home=posixpath.normpath(home))
