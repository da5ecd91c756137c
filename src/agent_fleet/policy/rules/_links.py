"""Links: a path in the workspace may lead somewhere else, so writes and deletes are judged where they land.

Two sources of links are followed when a written, moved or deleted path is judged:

* links the command itself makes first (``ln -s / root && rm -rf root/``, ``cp -s``, a hard ``ln``, and
  ``os.symlink``/``fs.symlinkSync`` in inline code, which ``_code`` turns into ``ln -s``): a path under
  such a link is also judged as the same path under the link's target;
* links already on disk, when the request has a workspace: the path's real location
  (``os.path.realpath``), unless that stays inside the workspace's own real location. A hostile
  repository can ship ``data -> /``; ``rm -rf data/`` must be judged as ``rm -rf /``.

And one rule (``symlink-escape``): making a link in the workspace to the root, the home directory (or an
ancestor of it), another user's home, a credential file or the user's start-up and configuration
files. Such a link has no use but to be written or deleted through later, by a command that looks
harmless on its own.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import replace

from agent_fleet.policy.bash._commands import SimpleCommand
from agent_fleet.policy.rules._targets import inside, resolve_target
from agent_fleet.policy.rules._verdict import VIRTUAL_CWD, RuleContext, Violation
from agent_fleet.policy.rules._writes import split_options

__all__ = ["LINK_RULES", "link_violation", "links_made", "through_links", "virtual_links"]

LINK_RULES: dict[str, str] = {
    "symlink-escape": "a link made to the root, the home directory, another user's home, a credential or"
    " start-up file (or a write through one): the workspace path then leads outside it",
}

_MAX_LINKS = 32
_LN_VALUES = "St"
_LN_LONGS = ("--suffix", "--target-directory")


def _ln_pairs(cmd: SimpleCommand) -> list[tuple[str, str, bool]]:
    """``(target, link name, symbolic)`` for each link ``ln``/``link``/``cp -s`` makes."""
    args = list(cmd.argv[1:])
    if cmd.program == "link" and len(args) == 2:
        return [(args[0], args[1], False)]
    if cmd.program == "cp":
        values, operands = split_options(args, "tS", ("--target-directory", "--suffix"))
        if not ("-s" in values or "--symbolic-link" in values) or len(operands) < 2:
            return []
        if len(operands) == 2:
            return [(operands[0], operands[1], True)]
        return [(src, posixpath.join(operands[-1], posixpath.basename(src)), True) for src in operands[:-1]]
    if cmd.program != "ln":
        return []
    values, operands = split_options(args, _LN_VALUES, _LN_LONGS)
    symbolic = "-s" in values or "--symbolic" in values
    directories = values.get("-t", []) + values.get("--target-directory", [])
    if directories:
        directory = directories[0]
        return [(src, posixpath.join(directory, posixpath.basename(src)), symbolic) for src in operands]
    if len(operands) == 1:
        return [(operands[0], posixpath.basename(operands[0].rstrip("/")) or ".", symbolic)]
    if len(operands) == 2:
        return [(operands[0], operands[1], symbolic)]
    return [(src, posixpath.join(operands[-1], posixpath.basename(src)), symbolic) for src in operands[:-1]]


def _resolve_link_target(target: str, link: str, ctx: RuleContext) -> str | None:
    """Where a link points: a relative symbolic target is relative to the link's own directory."""
    if target.startswith(("/", "~", "$")):
        return resolve_target(target, cwd=ctx.cwd, home=ctx.home)
    base = resolve_target(link, cwd=ctx.cwd, home=ctx.home)
    if base is None:
        return None
    return posixpath.normpath(posixpath.join(posixpath.dirname(base), target))


def links_made(commands: Sequence[SimpleCommand], ctx: RuleContext) -> tuple[tuple[str, str], ...]:
    """``(link path, what it points to)``, absolute, for every link the script makes (bounded). With no
    working directory, relative links are placed in the stand-in ``VIRTUAL_CWD`` (see ``virtual_links``)."""
    found: list[tuple[str, str]] = []
    if ctx.cwd is None:
        ctx = replace(ctx, cwd=VIRTUAL_CWD)
    for cmd in commands:
        for target, link, symbolic in _ln_pairs(cmd):
            link_path = resolve_target(link, cwd=ctx.cwd, home=ctx.home)
            if symbolic:
                points = _resolve_link_target(target, link, ctx)
            else:
                points = resolve_target(target, cwd=ctx.cwd, home=ctx.home)
            if link_path is not None and points is not None:
                found.append((link_path, points))
            if len(found) >= _MAX_LINKS:
                return tuple(found)
    return tuple(found)


def _real(path: str) -> str | None:
    try:
        return posixpath.normpath(os.path.realpath(path))
    except (OSError, ValueError):  # a path too long, a NUL: nothing more to learn
        return None


def through_links(path: str, ctx: RuleContext) -> Iterator[str]:
    """Where else ``path`` (absolute, normalised) leads: through links the script makes, and on disk."""
    if not ctx.follow_links:
        return
    for link, target in ctx.links:
        if path == link or path.startswith(link.rstrip("/") + "/"):
            yield posixpath.normpath(target + path[len(link) :])
    if not ctx.roots or "\x00" in path or not inside(path, ctx.roots):
        return
    real = _real(path)
    if real is None or real == path:
        return
    real_roots = tuple(r for r in (_real(root) for root in ctx.roots) if r is not None)
    if not inside(real, real_roots):
        yield real


def link_violation(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    """``symlink-escape`` for a link made to a place no workspace path should lead to."""
    from agent_fleet.policy.rules._files import credential_reason, vital_reason

    for target, link, symbolic in _ln_pairs(cmd):
        points = (
            _resolve_link_target(target, link, ctx)
            if symbolic
            else resolve_target(target, cwd=ctx.cwd, home=ctx.home)
        )
        if points is None:
            continue
        why: str | None = None
        if points == "/" or points == ctx.home or ctx.home.startswith(points.rstrip("/") + "/"):
            why = f"{points} holds the home directory" if points != "/" else "the root directory"
        elif credential_reason(points, ctx) is not None:
            why = f"{points} is a credential file"
        elif points.startswith(ctx.home.rstrip("/") + "/") or points.startswith(("/home/", "/root")):
            why = vital_reason(points, ctx)
        if why is not None:
            kind = "symbolic link" if symbolic else "hard link"
            return Violation(rule="symlink-escape", reason=f"{cmd.program} makes a {kind} {link!r} to {why}")
    return None


def virtual_links(word: str, ctx: RuleContext) -> Iterator[str]:
    """With no working directory, a relative ``word`` under a link the script made (``ln -s /etc e;
    echo x > e/hosts``): where it lands. A landing under ``VIRTUAL_CWD`` has not left the directory."""
    if ctx.cwd is not None or not ctx.links or not word or word.startswith(("/", "~", "$")):
        return
    path = resolve_target(word, cwd=VIRTUAL_CWD, home=ctx.home)
    if path is not None:
        yield from through_links(path, ctx)
