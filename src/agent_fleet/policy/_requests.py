"""Judging the requests that are not shell commands: reads, network access, permission grants, tools.

Every function returns a decline, or ``None`` when nothing here objects (the engine then applies what
the kind's own rules say). Nothing the peer sends chooses the limits: containment is always against the
request's ``cwd`` (the session's workspace, set by the provider) and ``writable_roots``.

- ``read``: a credential file (``_secrets``: SSH keys, cloud and registry credentials, ``.netrc``,
  shell histories, ...) is declined with ``secret-read`` wherever it is, even inside the workspace; a
  path outside the workspace and the writable roots with ``path-escape``; a request naming no path
  with ``no-paths``.
- ``network``: the host must match ``PermissionConfig.allowed_hosts`` (``fnmatch``, case-insensitive; a
  pattern ``host:port`` matches on the port too); a request for any host (``host=None``) needs the
  pattern ``*``. Nothing else opens the network: with an empty list every request is declined with
  ``network-not-allowed``.
- ``permissions``: every write root must be contained (``path-escape``); network access asked for is
  "any host", so it needs ``*`` in the allow-list; asking for nothing we can judge is ``no-paths``.
- ``tool``: an MCP tool (``mcp:server/tool``) must match ``PermissionConfig.mcp_tools`` (``fnmatch`` on
  ``server/tool``), else ``mcp-not-allowed``.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence

from agent_fleet.policy._paths import check_paths
from agent_fleet.policy._secrets import HOME_CREDENTIALS, KEY_FILES, NOT_SECRET, SYSTEM_CREDENTIALS
from agent_fleet.policy._types import ApprovalRequest, Decision

__all__ = ["REQUEST_RULES", "judge_network", "judge_permissions", "judge_read", "judge_tool"]

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
_HOME_DIRS_RE = _pattern(tuple(p for p in HOME_CREDENTIALS if "/" in p))
_SYSTEM_RE = _pattern(SYSTEM_CREDENTIALS)


def _decline(rule: str, reason: str) -> Decision:
    return Decision(action="decline", rule=rule, reason=reason)


def _is_secret(path: str, cwd: str | None) -> bool:
    """``path`` is a credential file (``_secrets``), as written or as resolved."""
    full = os.path.normpath(os.path.join(cwd or "/", path))
    real = os.path.realpath(full)
    for candidate in dict.fromkeys((full, real)):
        name = os.path.basename(candidate)
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in NOT_SECRET):
            continue
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in _NAMES) or _SYSTEM_RE.match(candidate):
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
    for path in (os.fspath(p) for p in request.paths):
        if path and "\0" not in path and _is_secret(path, cwd):
            return _decline("secret-read", f"{path!r} is a credential file")
    escaped = check_paths(request.paths, request.cwd, request.writable_roots)
    if escaped is not None:
        return _decline("path-escape", f"read outside the workspace: {escaped.reason}")
    return None


def host_allowed(host: str | None, port: int | None, allowed: Sequence[str]) -> bool:
    """``host`` (``None``: any host) on ``port`` matches one of the ``allowed`` patterns."""
    if host is None:
        return "*" in allowed
    name = host.strip().strip("[]").rstrip(".").lower()
    if not name:
        return False
    for pattern in (p.strip().lower() for p in allowed):
        if ":" in pattern and not pattern.startswith("["):
            pattern_host, _, pattern_port = pattern.rpartition(":")
            if (
                port is not None
                and fnmatch.fnmatchcase(str(port), pattern_port)
                and fnmatch.fnmatchcase(name, pattern_host)
            ):
                return True
        elif fnmatch.fnmatchcase(name, pattern.strip("[]")):
            return True
    return False


def judge_network(request: ApprovalRequest, allowed: Sequence[str]) -> Decision | None:
    if host_allowed(request.host, request.port, allowed):
        return None
    where = "any host" if request.host is None else repr(request.host)
    if request.host is not None and request.port is not None:
        where += f" port {request.port}"
    listed = ", ".join(allowed) if allowed else "none"
    return _decline("network-not-allowed", f"network access to {where} is not allowed (allowed: {listed})")


def judge_permissions(request: ApprovalRequest, allowed: Sequence[str]) -> Decision | None:
    if not request.paths and not request.network:
        return _decline("no-paths", "a permission request that asks for nothing the policy can judge")
    escaped = check_paths(request.paths, request.cwd, request.writable_roots)
    if escaped is not None:
        return escaped
    if request.network and not host_allowed(None, None, allowed):
        return _decline("network-not-allowed", "network access to any host needs '*' in allowed_hosts")
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
