"""Which paths a destructive command must never touch, judged lexically from the word's text.

A target word is first turned into an absolute, normalised path where that is possible: ``~``, ``~/``,
``$HOME``, ``${HOME}`` become the home directory, ``~user`` becomes ``/home/user``, ``$PWD`` and relative
paths are joined to the working directory when it is known, ``..`` is folded (``/tmp/../`` is ``/``).
A word starting with some other variable followed only by slashes or a glob (``"$DIR"/``, ``$X/*``) is
taken as ``/``: that is what it means when the variable is empty. Other unresolvable words are unknown
and not judged. Relative paths with no known working directory are not judged either: ``.``, ``..``,
``*`` and ``build/`` are never "root".

Protected: ``/``; the top-level system directories (``/usr``, ``/etc``, ``/home`` ...); their immediate
children for the system trees (``/usr/lib``, ``/var/log``, ``/home/<user>``, ``/Users/<user>``,
``/mnt/<disk>``); any other top-level directory (``/data``, ``/backup``) and a glob over its contents
(``/tmp/*`` excepted); the home
directory and every ancestor of it; and a glob expanding the contents of any of those (``/*``,
``~/*``, ``/usr/*``, ``/h*``). A component with an unresolved variable counts as a glob: ``/$X`` and
``$HOME/$DIR`` are declined, since an empty variable leaves ``/`` and the home directory.
"""

from __future__ import annotations

import posixpath
import re

__all__ = ["inside", "protected_reason", "resolve_target"]

SYSTEM_DIRS = frozenset(
    {"bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt", "opt"}
    | {"proc", "root", "run", "sbin", "snap", "srv", "sys", "tmp", "usr", "var", "nix"}
    | {"Users", "Applications", "Library", "System", "Volumes", "private", "cores"}
)
# Top-level trees whose direct children are also vital (``/usr/lib``, ``/var/log``, ``/home/alice``).
DEEP_DIRS = frozenset(
    {"bin", "boot", "etc", "home", "lib", "lib32", "lib64", "sbin", "usr", "var", "Users", "System"}
    | {"Library", "nix", "dev", "proc", "sys", "mnt", "media", "Volumes"}
)
HOME_FALLBACK = "/home/~"

_HOME_VAR = re.compile(r"\$(?:HOME(?![A-Za-z0-9_])|\{HOME(?:[^A-Za-z0-9_}][^}]*)?\})")
_PWD_VAR = re.compile(r"\$(?:PWD(?![A-Za-z0-9_])|\{PWD\})")
_OTHER_VAR = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[^}]*\}|[0-9@*#?$!-]|\([^)]*\))|`[^`]*`")
_TILDE = re.compile(r"~([A-Za-z0-9._-]*)(?=/|$)")
# A component holding an unresolved variable may expand to anything (even nothing): like a glob.
_GLOB = re.compile(r"[*?\[$`]")


def _normalise(path: str) -> str:
    return posixpath.normpath(re.sub(r"/+", "/", path))


def resolve_target(word: str, *, cwd: str | None, home: str) -> str | None:
    """The absolute normalised path ``word`` names, or ``None`` when it cannot be known."""
    if not word:
        return None
    if word.startswith("~"):
        if word == "~+" or word.startswith("~+/"):
            if cwd is None:
                return None
            word = cwd + word[2:]
        else:
            match = _TILDE.match(word)
            if match is None:
                return None
            user = match.group(1)
            base = home if not user else ("/root" if user == "root" else f"/home/{user}")
            word = base + word[match.end() :]
    elif match := _HOME_VAR.match(word):
        word = home + word[match.end() :]
    elif match := _PWD_VAR.match(word):
        if cwd is None:
            return None
        word = cwd + word[match.end() :]
    elif match := _OTHER_VAR.match(word):
        rest = word[match.end() :]
        # An empty variable leaves just the rest: `"$DIR"/` is `/`, `$X/*` is `/*`.
        if rest.startswith("/") and re.fullmatch(r"[/*.]*", rest):
            word = rest
        else:
            return None
    if not word.startswith("/"):
        if cwd is None:
            return None
        word = posixpath.join(cwd, word)
    return _normalise(word)


def _is_home_or_ancestor(path: str, home: str) -> bool:
    return path == home or home.startswith(path.rstrip("/") + "/")


def protected_reason(path: str, *, home: str) -> str | None:
    """Why removing ``path`` (absolute, normalised; may hold globs) would be catastrophic, or ``None``."""
    parts = [part for part in path.split("/") if part]
    glob_at = next((i for i, part in enumerate(parts) if _GLOB.search(part)), None)
    if glob_at is not None:
        prefix = "/" + "/".join(parts[:glob_at])
        if glob_at == 0:
            return "a glob or variable over the root directory"
        if (glob_at == 1 and parts[0] != "tmp") or _is_home_or_ancestor(prefix, home):
            return f"a glob or variable over the contents of {prefix}"
        return None
    if not parts:
        return "the root directory"
    if path == home:
        return "the home directory"
    if _is_home_or_ancestor(path, home):
        return f"{path}, which contains the home directory"
    if len(parts) == 1 and parts[0] in SYSTEM_DIRS:
        return f"the system directory {path}"
    if len(parts) == 1:  # `/data`, `/backup`: whatever sits at the top of the machine is not scratch
        return f"the top-level directory {path}"
    if len(parts) == 2 and parts[0] in ("home", "Users"):
        return f"the home directory {path}"
    top = path[len(home.rstrip("/")) + 1 :]
    if path.startswith(home.rstrip("/") + "/") and "/" not in top and top != ".cache":  # caches are caches
        return f"{path}, a top-level directory of the home directory"
    if len(parts) == 2 and parts[0] in DEEP_DIRS:
        return f"the system directory {path}"
    return None


def inside(path: str, roots: tuple[str, ...]) -> bool:
    """Lexical containment: ``path`` equals or lies under one of ``roots`` (all absolute, normalised)."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)
