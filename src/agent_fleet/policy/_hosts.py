"""The host allow-list: which network hosts installs may fetch from, and what counts as "this machine".

One list, shared with later network approvals: the built-in package indexes (``DEFAULT_INDEX_HOSTS``),
the user's ``PermissionConfig.allowed_hosts`` (``fnmatch`` patterns such as ``*.corp.example``), and the
forge of the repository's own remote (read once per working directory from ``.git/config``; a repository
on ``github.com`` may install from ``git+https://github.com/...``). Loopback hosts are never "the network".
"""

from __future__ import annotations

import fnmatch
import functools
import ipaddress
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_INDEX_HOSTS",
    "HostList",
    "host_of",
    "is_loopback",
    "own_forge_hosts",
]

#: Package indexes installs may use without configuration (their CDNs included).
DEFAULT_INDEX_HOSTS: tuple[str, ...] = (
    "pypi.org",
    "files.pythonhosted.org",
    "pypi.python.org",
    "download.pytorch.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "registry.npmmirror.com",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "rubygems.org",
    "index.rubygems.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
    "conda.anaconda.org",
    "repo.anaconda.com",
    "jsr.io",
    "deno.land",
    "npm.jsr.io",
)

_SCP_LIKE = re.compile(r"^(?:[A-Za-z0-9._-]+@)?([A-Za-z0-9.-]+\.[A-Za-z]{2,}|\[[0-9a-fA-F:]+\]):(?!//)")
_BARE_HOST = re.compile(r"^([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|\[[0-9a-fA-F:]+\])(?::[0-9]+)?(?:[/?#].*)?$")


def host_of(word: str, *, bare: bool = False) -> str | None:
    """The host a URL-ish word names: ``https://h/x``, ``git+ssh://git@h/x``, ``git@h:o/r``; with
    ``bare`` also ``h.example:8080/x`` (for programs whose operands are URLs, such as curl)."""
    text = word.strip()
    if "://" in text:
        scheme = text.split("://", 1)[0]
        if "+" in scheme:  # git+https://, svn+ssh://
            text = text.split("+", 1)[1]
        try:
            host = urlsplit(text).hostname
        except ValueError:
            return None
        return host.lower() if host else None
    match = _SCP_LIKE.match(text)
    if match:
        return match.group(1).strip("[]").lower()
    if bare:
        match = _BARE_HOST.match(text)
        if match:
            return match.group(1).strip("[]").lower()
        if text.split(":", 1)[0].split("/", 1)[0] == "localhost":
            return "localhost"
    return None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    host = host.lower().strip("[]")
    if host in ("localhost", "localhost.localdomain", "ip6-localhost", "0.0.0.0", "host.docker.internal"):
        return True
    if host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_URL_LINE = re.compile(r"^\s*url\s*=\s*(\S+)", re.MULTILINE)


def _read_regular(path: str, limit: int) -> str | None:
    """A regular file's text (at most ``limit`` characters); never a FIFO or a device, which could
    block: the repository may be hostile."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except (OSError, ValueError):
        return None


def _git_config_path(start: str) -> str | None:
    current = os.path.abspath(start)
    for _ in range(64):
        dotgit = os.path.join(current, ".git")
        if os.path.isdir(dotgit):
            return os.path.join(dotgit, "config")
        if os.path.isfile(dotgit):  # a worktree: "gitdir: /repo/.git/worktrees/x"
            line = (_read_regular(dotgit, 4096) or "").strip()
            if not line.startswith("gitdir:"):
                return None
            gitdir = os.path.join(current, line[len("gitdir:") :].strip())
            common = os.path.join(gitdir, "commondir")
            shared = _read_regular(common, 4096)
            if shared is not None:
                gitdir = os.path.join(gitdir, shared.strip())
            return os.path.join(gitdir, "config")
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return None


@functools.lru_cache(maxsize=256)
def own_forge_hosts(cwd: str | None) -> tuple[str, ...]:
    """Hosts of the remotes of the repository holding ``cwd`` (cached: read once per directory)."""
    if not cwd:
        return ()
    path = _git_config_path(cwd)
    if path is None:
        return ()
    text = _read_regular(path, 256 * 1024)
    if text is None:
        return ()
    hosts = (host_of(url) for url in _URL_LINE.findall(text))
    return tuple(dict.fromkeys(host for host in hosts if host and not is_loopback(host)))


@dataclass(frozen=True, slots=True)
class HostList:
    """Host patterns (``fnmatch``, case-insensitive); ``user`` are the configuration's own."""

    defaults: tuple[str, ...] = DEFAULT_INDEX_HOSTS
    user: tuple[str, ...] = ()
    forge: tuple[str, ...] = ()

    def with_forge(self, cwd: str | None) -> HostList:
        forge = own_forge_hosts(cwd)
        return HostList(self.defaults, self.user, forge) if forge else self

    def allows(self, host: str | None) -> bool:
        """An install source on ``host`` is acceptable (``None``: not known, so not acceptable)."""
        if host is None:
            return False
        return is_loopback(host) or _matches(host, (*self.defaults, *self.user, *self.forge))

    def trusted(self, host: str | None) -> bool:
        """A host the user named (or loopback): uploads and listeners towards it are acceptable."""
        if host is None:
            return False
        return is_loopback(host) or _matches(host, self.user)


def _matches(host: str, patterns: Iterable[str]) -> bool:
    host = host.lower().rstrip(".")
    return any(fnmatch.fnmatchcase(host, pattern.lower()) for pattern in patterns)
