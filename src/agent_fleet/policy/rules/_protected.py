"""Paths no agent writes, even inside its own workspace: the machinery that runs code later.

A file written here runs at somebody's next command, outside any session's sandbox and approval:

* a repository's git machinery: anything under a ``.git`` directory (hooks, config, info, refs written
  by hand), and under the git directory a ``.git`` *file* points to (a worktree's or a submodule's,
  wherever it lives) and its common directory;
* the directories ``core.hooksPath`` names, in the repository's configuration or the user's;
* Python start-up code: ``*.pth``, ``sitecustomize.py``, ``usercustomize.py`` (wherever they are);
* the agents' own settings: ``.codex/``, ``.agents/``, ``.claude/settings*.json``, ``.mcp.json``,
  ``$CODEX_HOME`` and ``~/.codex``;
* shell start-up files (``.bashrc``, ``.profile``, ``.zshenv`` ... and direnv's ``.envrc``).

Names are compared case-insensitively (a case-insensitive file system writes ``.GIT/hooks`` into
``.git/hooks``); a path is judged as written and as resolved through symbolic links. Reading the
repository's configuration is the only I/O; nothing is written.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
from collections.abc import Iterable, Iterator

__all__ = ["protected_reason"]

_AGENT_DIRS = frozenset({".codex", ".agents"})
_STARTUP = frozenset(
    {".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv"}
    | {".zprofile", ".zlogin", ".zlogout", ".kshrc", ".mkshrc", ".cshrc", ".tcshrc", ".login", ".envrc"}
)
_PYTHON_STARTUP = frozenset({"sitecustomize.py", "usercustomize.py"})
_CLAUDE_SETTINGS = re.compile(r"settings(?:\.[^/]*)?\.json")
_MAX_CONFIG_BYTES = 256 * 1024
_SECTION = re.compile(r"^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+\"[^\"]*\")?\s*\]")
_HOOKS_PATH = re.compile(r"^\s*hookspath\s*=\s*(.*?)\s*(?:[#;].*)?$", re.IGNORECASE)


def _forms(path: str, cwd: str | None) -> list[str]:
    """``path`` made absolute (from ``cwd``) and normalised, then resolved through symbolic links."""
    full = os.path.normpath(os.path.join(cwd or "/", path))
    try:
        real = os.path.realpath(full)
    except (OSError, ValueError):
        real = full
    return list(dict.fromkeys((full, real)))


def _name_reason(path: str) -> str | None:
    parts = [part.lower() for part in path.split("/") if part]
    if not parts:
        return None
    if ".git" in parts[:-1] or parts[-1] == ".git":
        return "it is the repository's git machinery (hooks and configuration run on later git commands)"
    base = parts[-1]
    if base.endswith(".pth") or base in _PYTHON_STARTUP:
        return "Python runs it at every start-up"
    if _AGENT_DIRS & set(parts):
        return "it is an agent's own settings (codex reads them at its next start)"
    if len(parts) >= 2 and parts[-2] == ".claude" and _CLAUDE_SETTINGS.fullmatch(base):
        return "it is Claude Code's settings (hooks and permissions)"
    if base == ".mcp.json":
        return "it lists MCP servers an agent starts"
    if base in _STARTUP:
        return "it is a shell start-up file"
    return None


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots if root)


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(_MAX_CONFIG_BYTES).decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""


def _git_dirs(start: str) -> tuple[str | None, tuple[str, ...]]:
    """(the working tree's top, its git directories) for the repository holding ``start``: a ``.git``
    directory, or the directory a ``.git`` file names, and that one's common directory."""
    here = start
    while True:
        dot_git = posixpath.join(here, ".git")
        if os.path.isdir(dot_git):
            return here, (dot_git,)
        if os.path.isfile(dot_git):
            text = _read(dot_git).strip()
            if text.startswith("gitdir:"):
                gitdir = os.path.normpath(os.path.join(here, text.removeprefix("gitdir:").strip()))
                common = _read(posixpath.join(gitdir, "commondir")).strip()
                dirs = [gitdir]
                if common:
                    dirs.append(os.path.normpath(os.path.join(gitdir, common)))
                return here, tuple(dict.fromkeys(os.path.realpath(d) for d in dirs))
            return here, ()
        parent = posixpath.dirname(here)
        if parent == here:
            return None, ()
        here = parent


def _hooks_paths(text: str) -> Iterator[str]:
    section = ""
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header is not None:
            section = header.group(1).lower()
            continue
        if section == "core":
            found = _HOOKS_PATH.match(line)
            if found is not None and found.group(1):
                yield found.group(1).strip('"')


@functools.lru_cache(maxsize=128)
def _hook_dirs_cached(top: str | None, configs: tuple[tuple[str, int, int], ...]) -> tuple[str, ...]:
    found: list[str] = []
    for config, _mtime, _size in configs:
        for value in _hooks_paths(_read(config)):
            value = os.path.expanduser(value)
            base = top if top is not None else "/"
            found.append(os.path.realpath(os.path.join(base, value)))
    return tuple(found)


def _hook_dirs(top: str | None, git_dirs: tuple[str, ...]) -> tuple[str, ...]:
    """The directories ``core.hooksPath`` names, in the repository's configuration and the user's."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or posixpath.join(home, ".config")
    candidates = [posixpath.join(d, name) for d in git_dirs for name in ("config", "config.worktree")]
    candidates += [posixpath.join(home, ".gitconfig"), posixpath.join(xdg, "git", "config")]
    stamps: list[tuple[str, int, int]] = []
    for config in candidates:
        try:
            info = os.stat(config)
        except (OSError, ValueError):
            continue
        stamps.append((config, info.st_mtime_ns, info.st_size))
    return _hook_dirs_cached(top, tuple(stamps))


def _agent_homes() -> tuple[str, ...]:
    homes = [os.path.expanduser("~/.codex")]
    if os.environ.get("CODEX_HOME"):
        homes.append(os.path.expanduser(os.environ["CODEX_HOME"]))
    return tuple(os.path.realpath(home) for home in homes)


def _below(path: str, roots: tuple[str, ...]) -> str:
    """The part of ``path`` below the deepest root holding it (a workspace may itself live under a
    ``.codex`` or ``.git`` directory), or all of it."""
    best = ""
    for root in roots:
        if _under(path, (root,)) and len(root) > len(best):
            best = root
    return path[len(best.rstrip("/")) :] if best else path


def protected_reason(path: str, cwd: str | None, roots: Iterable[str | os.PathLike[str]] = ()) -> str | None:
    """Why writing ``path`` (relative to ``cwd``) writes code that runs later, or ``None``. Names are
    looked for below the deepest of ``cwd`` and ``roots`` that holds the path."""
    if not path or "\0" in path:
        return None
    forms = _forms(path, cwd)
    bases = [
        os.path.normpath(os.path.join(cwd or "/", root)) for root in ((cwd,) if cwd else ()) + tuple(roots)
    ]
    bases += [os.path.realpath(base) for base in bases]
    for form in forms:
        why = _name_reason(_below(form, tuple(bases)))
        if why is not None:
            return why
    if _under(forms[-1], _agent_homes()) or _under(forms[0], _agent_homes()):
        return "it is under CODEX_HOME, codex's own settings"
    start = os.path.realpath(cwd) if cwd else posixpath.dirname(forms[-1])
    top, git_dirs = _git_dirs(start)
    if any(_under(form, git_dirs) for form in forms):
        return "it is in the repository's git directory (hooks and configuration run on later git commands)"
    if any(_under(form, _hook_dirs(top, git_dirs)) for form in forms):
        return "core.hooksPath names its directory: git runs what is there on later commands"
    return None
