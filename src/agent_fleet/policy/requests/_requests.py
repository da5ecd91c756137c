"""Judging the requests that are not shell commands: reads, network access, permission grants, tools.

Every function returns a decline, or ``None`` when nothing here objects (the engine then applies what
the kind's own rules say). Nothing the peer sends chooses the limits: containment is always against the
request's ``cwd`` (the session's workspace, set by the provider) and ``writable_roots``.

- ``read``: a credential file (``_secrets``: SSH keys, cloud and registry credentials, ``.netrc``,
  shell histories, ...) is declined with ``secret-read`` wherever it is, even inside the workspace; a
  path outside the workspace and the writable roots with ``path-escape``; a request naming no path
  with ``no-paths``.
- ``network``: host, port and protocol must match an entry of ``PermissionConfig.allowed_hosts``
  (``host_allowed``: ``host``, ``host:port``, ``scheme://host[:port]``; ``fnmatch``, case-insensitive;
  a bare entry allows ``http``/``https`` only, ``*://host`` any protocol; a port is the request's or
  its protocol's default); a request for any host (``host=None``) needs the host ``*``. Nothing else
  opens the network: with an empty list every request is declined with ``network-not-allowed``.
- ``permissions``: every write root must be contained (``path-escape``) and not code run later
  (``vital-path``: a ``.git`` directory, the agents' settings ... see ``_protected``); network access
  asked for is the sandbox's whole network (any host, any protocol), so it needs ``*://*`` in the allow-list;
  asking for nothing we can judge is ``no-paths``.
- ``tool``: an MCP tool (``mcp:server/tool``) must match ``PermissionConfig.mcp_tools`` (``fnmatch`` on
  ``server/tool``), else ``mcp-not-allowed``.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from typing import Final

from agent_fleet.policy._types import ApprovalRequest, Decision
from agent_fleet.policy.requests._paths import check_paths, realpath
from agent_fleet.policy.rules._protected import protected_reason
from agent_fleet.policy.rules._secrets import HOME_CREDENTIALS, KEY_FILES, NOT_SECRET, SYSTEM_CREDENTIALS

__all__ = [
    "REQUEST_RULES",
    "host_allowed",
    "host_patterns",
    "judge_network",
    "judge_permissions",
    "judge_read",
    "judge_tool",
]

REQUEST_RULES: dict[str, str] = {
    "no-paths": "a file change, read or permission request names nothing the policy can judge",
    "secret-read": "a read of a credential file (SSH keys, cloud or registry credentials, ...)",
    "network-not-allowed": "the host is not in the configuration's allowed_hosts (empty: no network)",
    "mcp-not-allowed": "an MCP tool whose name matches none of the configuration's mcp_tools",
    "unknown-request": "a request of a kind the provider could not classify (declined when in doubt)",
}


def _pattern(patterns: Sequence[str]) -> re.Pattern[str]:
    """One expression: a path equal to, or under, any of ``patterns`` (``fnmatch``; ``*`` spans ``/``)."""
    forms = [fnmatch.translate(p.removesuffix("/*")) for p in patterns]
    forms += [fnmatch.translate(p.removesuffix("/*") + "/*") for p in patterns]
    return re.compile("|".join(f"(?:{form})" for form in forms))


#: For a file tool, a home credential is one wherever its home is (a workspace may be someone's home,
#: a tool's HOME may be private): one-name entries (``.bash_history``) match the file's name, entries
#: with a directory (``.ssh/*``, ``.config/gh/*``) the end of its path.
_NAMES = KEY_FILES + tuple(p for p in HOME_CREDENTIALS if "/" not in p)
_NAMES_RE = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in _NAMES))
_NOT_SECRET_RE = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in NOT_SECRET))
_HOME_DIRS_RE = _pattern(tuple(p for p in HOME_CREDENTIALS if "/" in p))
_SYSTEM_RE = _pattern(SYSTEM_CREDENTIALS)


def _decline(rule: str, reason: str) -> Decision:
    return Decision(action="decline", rule=rule, reason=reason)


def _is_secret(path: str, cwd: str | None, known: dict[str, str]) -> bool:
    """``path`` is a credential file (``_secrets``), as written or as resolved."""
    full = os.path.normpath(os.path.join(cwd or "/", path))
    real = realpath(full, known)
    for candidate in dict.fromkeys((full, real)):
        name = os.path.basename(candidate)
        if _NOT_SECRET_RE.match(name):
            continue
        if _NAMES_RE.match(name) or _SYSTEM_RE.match(candidate):
            return True
        parts = candidate.strip("/").split("/")
        if any(_HOME_DIRS_RE.match("/".join(parts[i:])) for i in range(len(parts))):
            return True
    return False


def judge_read(request: ApprovalRequest) -> Decision | None:
    """Secrets first (wherever they are), then containment."""
    if not request.paths:
        return _decline("no-paths", "a read that names no path")
    cwd = os.fspath(request.cwd) if request.cwd is not None else None
    known: dict[str, str] = {}
    for path in (os.fspath(p) for p in request.paths):
        if path and "\0" not in path and _is_secret(path, cwd, known):
            return _decline("secret-read", f"{path!r} is a credential file")
    escaped = check_paths(request.paths, request.cwd, request.writable_roots)
    if escaped is not None:
        return _decline("path-escape", f"read outside the workspace: {escaped.reason}")
    return None


_WEB: Final = ("http", "https")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def _entry(pattern: str) -> tuple[str | None, str, str | None]:
    """An ``allowed_hosts`` entry as (scheme pattern, host pattern, port pattern), lower-cased; the
    scheme is ``None`` for a bare entry, the port ``None`` when the entry names none."""
    text = pattern.strip().lower()
    scheme: str | None = None
    if "://" in text:
        scheme, _, text = text.partition("://")
    text = text.rstrip("/")
    if text.startswith("["):  # [v6] or [v6]:port
        host, _, rest = text[1:].partition("]")
        return scheme, host, rest[1:] if rest.startswith(":") else None
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return scheme, host, port
    return scheme, text, None


def host_patterns(allowed: Sequence[str]) -> tuple[str, ...]:
    """The entries without their scheme: the hosts the user trusts, for the install and upload rules."""
    return tuple(p.split("://", 1)[-1].rstrip("/") for p in allowed if p.split("://", 1)[-1].strip("/"))


def host_allowed(host: str | None, port: int | None, protocol: str | None, allowed: Sequence[str]) -> bool:
    """A connection to ``host`` (``None``: any host) on ``port`` (``None``: the protocol's default)
    over ``protocol`` (``None``: any protocol) matches one of the ``allowed`` entries: ``host``,
    ``host:port``, ``scheme://host[:port]`` (``fnmatch``, case-insensitive). A bare entry is the web
    (``http``, ``https``); any other protocol needs its scheme named (``socks5tcp://host``), any
    protocol at all ``*://host``."""
    proto = protocol.lower() if protocol else None
    name = host.strip().strip("[]").rstrip(".").lower() if host is not None else None
    if name == "":
        return False
    effective = port if port is not None else _DEFAULT_PORTS.get(proto or "")
    for scheme, host_pattern, port_pattern in map(_entry, allowed):
        if not host_pattern:
            continue
        if scheme is None:
            if proto not in _WEB:
                continue
        elif scheme != "*" and (proto is None or not fnmatch.fnmatchcase(proto, scheme)):
            continue
        if name is None:
            if host_pattern == "*" and port_pattern in (None, "*"):
                return True
            continue
        if not fnmatch.fnmatchcase(name, host_pattern):
            continue
        if port_pattern is None or (
            effective is not None and fnmatch.fnmatchcase(str(effective), port_pattern)
        ):
            return True
    return False


def judge_network(request: ApprovalRequest, allowed: Sequence[str]) -> Decision | None:
    if host_allowed(request.host, request.port, request.protocol, allowed):
        return None
    where = "any host" if request.host is None else repr(request.host)
    if request.host is not None and request.port is not None:
        where += f" port {request.port}"
    if request.protocol:
        where += f" over {request.protocol}"
    listed = ", ".join(allowed) if allowed else "none"
    return _decline("network-not-allowed", f"network access to {where} is not allowed (allowed: {listed})")


def judge_permissions(request: ApprovalRequest, allowed: Sequence[str]) -> Decision | None:
    if not request.paths and not request.network:
        return _decline("no-paths", "a permission request that asks for nothing the policy can judge")
    escaped = check_paths(request.paths, request.cwd, request.writable_roots)
    if escaped is not None:
        return escaped
    cwd = os.fspath(request.cwd) if request.cwd is not None else None
    for root in request.paths:
        why = protected_reason(os.fspath(root), cwd, request.writable_roots)
        if why is not None:
            return _decline("vital-path", f"write access to {os.fspath(root)!r}: {why}")
    if request.network and not host_allowed(None, None, None, allowed):
        return _decline(
            "network-not-allowed", "network access for the sandbox (any host, any protocol) needs '*://*'"
        )
    return None


def judge_tool(request: ApprovalRequest, mcp_tools: Sequence[str]) -> Decision | None:
    name = request.tool or ""
    if not name:
        return _decline("unknown-request", "a tool request with no tool name")
    if name.startswith("mcp:"):
        short = name.removeprefix("mcp:")
        if not any(fnmatch.fnmatchcase(short, pattern) for pattern in mcp_tools):
            listed = ", ".join(mcp_tools) if mcp_tools else "none"
            return _decline("mcp-not-allowed", f"MCP tool {short!r} matches no mcp_tools pattern ({listed})")
    return None
