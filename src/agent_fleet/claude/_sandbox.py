"""Claude Code's own OS sandbox for one session: the wall behind the approval policy.

Claude Code confines its ``Bash`` tool's commands when its settings' ``sandbox`` section enables it
(Linux: bubblewrap plus a filtering network proxy run through socat; macOS: Seatbelt). What each
``Spec.sandbox`` becomes (``settings``), as the bundled CLI (2.1.330) does it, tested end to end:

- ``workspace-write`` (the default: a Claude session always has a workspace, its ``cwd``): commands
  write only in the workspace and the session's temporary directory (``filesystem.allowWrite``); the
  shared ``/tmp``, another task's directory and the home directory are read-only, and the CLI itself
  keeps ``.git/hooks``, ``.git/config`` and ``.claude/settings*.json`` read-only even inside the
  workspace;
- ``read-only``: the workspace too is read-only for commands (``filesystem.denyWrite``); the temporary
  directory stays writable (programs need one);
- ``danger-full-access``: no sandbox (``enabled: false``): the approval policy is the only guard.

Always: ``failIfUnavailable`` (the CLI refuses to start rather than run commands unsandboxed),
``autoAllowBashIfSandboxed: false`` (every command still goes through the approval policy), the network
limited to ``PermissionConfig.allowed_hosts`` with ``strictAllowlist`` (a host off the list is refused,
never offered to a prompt). ``allowUnsandboxedCommands`` stays on: a command may ask to run outside the
sandbox (``dangerouslyDisableSandbox: true``), and the approval bridge judges that request as an
escalation, which needs proof (docs/approvals.md, "Walls").

The temporary directory (``session_temp``) is the session's ``Spec.temp_dir``, else a private one made
here (mode 0700, removed with the session). The CLI gets it as ``CLAUDE_CODE_TMPDIR`` (and ``TMPDIR``)
and gives its sandboxed commands a directory of its own inside it as ``TMPDIR``
(``<temp_dir>/claude-<uid>``). The CLI's sockets live there too, so that path must stay short
(``CLI_TEMP_LIMIT``): longer, the CLI would give its commands the shared ``/tmp/claude-<uid>`` instead.
For a ``Spec.temp_dir`` that long the CLI gets a short private directory of its own (0700, removed with
the session) and the ``Spec.temp_dir`` stays a writable root of the sandbox and of the policy.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_fleet.errors import UsageError
from agent_fleet.policy.requests._requests import _entry

__all__ = [
    "OS_SANDBOX",
    "SandboxRefused",
    "SessionTemp",
    "allowed_domains",
    "missing",
    "refused",
    "session_temp",
    "settings",
]

#: ``Capabilities.os_sandbox`` for the Claude provider.
OS_SANDBOX: Final = (
    "Claude Code's sandbox (Linux: bubblewrap + a filtering network proxy; macOS: Seatbelt): Bash commands "
    "write only in the session's box (workspace and temporary directory), network only to allowed_hosts"
)
#: What the Linux sandbox needs on the CLI's ``PATH``.
LINUX_NEEDS: Final = ("bwrap", "socat")
_PACKAGES: Final = {"bwrap": "bubblewrap", "socat": "socat"}
_HOST: Final = re.compile(r"(\*|(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*)")
_V6: Final = re.compile(r"[0-9a-f:.]+")


#: The longest ``<CLAUDE_CODE_TMPDIR>/claude-<uid>`` (bytes) the bundled CLI (2.1.330) gives its commands
#: as ``TMPDIR``: beyond it its sockets' paths would be too long, and it falls back to the shared default.
CLI_TEMP_LIMIT: Final = 44
_PREFIX: Final = "afc-"


def _cli_temp_fits(path: str) -> bool:
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return len(os.fsencode(os.path.join(path, f"claude-{uid}"))) <= CLI_TEMP_LIMIT


def _private_dir() -> str:
    """A new private (0700) directory with a short path: in the temporary directory when its path is
    short enough for the CLI (``CLI_TEMP_LIMIT``), else in ``/tmp``."""
    base = tempfile.gettempdir()
    if not _cli_temp_fits(os.path.join(base, _PREFIX + "x" * 8)) and os.path.isdir("/tmp"):
        base = "/tmp"
    return os.path.realpath(tempfile.mkdtemp(prefix=_PREFIX, dir=base))


@dataclass(frozen=True, slots=True)
class SessionTemp:
    """A session's temporary directories: ``box`` is its own (``Spec.temp_dir`` or a private one), a
    writable root of the sandbox and the policy; ``cli`` is the CLI's ``CLAUDE_CODE_TMPDIR`` (``box``
    itself where its path is short enough); ``owned`` are the ones made here, removed by ``remove``."""

    box: str
    cli: str
    owned: tuple[str, ...] = ()

    @property
    def roots(self) -> tuple[str, ...]:
        """The writable roots these directories add to the session's box."""
        return tuple(dict.fromkeys((self.box, self.cli)))

    def remove(self) -> None:
        """Remove the directories made for the session (idempotent, never raises)."""
        for path in self.owned:
            with contextlib.suppress(OSError):
                shutil.rmtree(path, ignore_errors=True)


def session_temp(temp_dir: str | os.PathLike[str] | None) -> SessionTemp:
    """The temporary directories of a session whose ``Spec.temp_dir`` is ``temp_dir`` (see the module
    docstring). A ``temp_dir`` that does not exist is made (mode 0700); one that cannot be is a
    ``UsageError``."""
    if temp_dir is None:
        private = _private_dir()
        return SessionTemp(box=private, cli=private, owned=(private,))
    path = Path(temp_dir).expanduser()
    if path.exists() and not path.is_dir():
        raise UsageError(f"Spec.temp_dir: {str(path)!r} is not a directory")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"Spec.temp_dir: cannot make {str(path)!r}: {exc.strerror or exc}") from None
    box = str(path.resolve())
    if _cli_temp_fits(box):
        return SessionTemp(box=box, cli=box)
    private = _private_dir()
    return SessionTemp(box=box, cli=private, owned=(private,))


class SandboxRefused(Exception):
    """The CLI refused to start because its sandbox cannot (``failIfUnavailable``): ``reason`` is its
    message. Internal: the provider turns it into ``ProviderUnavailable`` or a session without it."""

    def __init__(self, reason: str, stderr: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.stderr = stderr


#: How the bundled CLI (2.1.330) begins the error it exits with when ``failIfUnavailable`` stops it. It
#: gives no structured field for it: a CLI that words it otherwise fails the session all the same
#: (``TransportError``), only without the hint.
_REFUSAL: Final = "sandbox required but unavailable"


def refused(message: str) -> str | None:
    """The CLI's reason when ``message`` (its error at start) is its sandbox refusal, else None."""
    start = message.lower().find(_REFUSAL)
    if start < 0:
        return None
    reason = message[start:].split(" · ")[0].split(" (exit code")[0].strip()
    return reason or None


def missing(env: Mapping[str, str], platform: str = sys.platform) -> str | None:
    """Why Claude Code's sandbox cannot start for a CLI with environment ``env`` (its ``PATH``), or
    ``None`` when it can: Linux needs bubblewrap and socat, macOS has Seatbelt, nothing else is supported."""
    if platform == "darwin":
        return None
    if not platform.startswith("linux"):
        return f"Claude Code's sandbox runs on Linux and macOS only, not on {platform}"
    path = env.get("PATH", os.defpath)
    absent = [name for name in LINUX_NEEDS if shutil.which(name, path=path) is None]
    if not absent:
        return None
    names = " and ".join(f"{_PACKAGES[n]} ({n})" for n in absent)
    packages = " ".join(_PACKAGES[n] for n in absent)
    return f"Claude Code's sandbox needs {names} on the PATH (apt install {packages})"


def _domain(host: str, port: str | None) -> str | None:
    """One ``allowedDomains`` entry, or None when ``host``/``port`` cannot be said in its syntax."""
    if port is not None and port != "*" and not (port.isdigit() and 0 < int(port) < 65536):
        return None
    suffix = f":{int(port)}" if port is not None and port != "*" else ""
    if ":" in host:  # IPv6 (the entry had it in brackets)
        return f"[{host}]{suffix}" if _V6.fullmatch(host) else None
    return host + suffix if _HOST.fullmatch(host) else None


def allowed_domains(allowed_hosts: Sequence[str]) -> tuple[list[str], list[str]]:
    """``PermissionConfig.allowed_hosts`` as the sandbox's ``network.allowedDomains``, and the entries
    it cannot say (left out: the wall is then narrower than the policy, never wider).

    The sandbox's proxy tells hosts and ports apart, not protocols: a bare entry (the web) becomes the
    host on ports 80 and 443, ``https://host`` port 443, ``http://host`` port 80, and an entry of
    another or any protocol (``socks5tcp://host``, ``*://host``) the host on any port; ``*://*`` is the
    whole network. Host patterns other than ``*`` and a leading ``*.`` (``api-?.example.com``) cannot
    be said."""
    domains: list[str] = []
    left_out: list[str] = []
    for raw in allowed_hosts:
        scheme, host, port = _entry(raw)
        if not host:
            continue
        ports: list[str | None]
        if scheme is None:
            ports = [port] if port is not None else ["80", "443"]
        elif scheme in ("http", "https"):
            ports = [port if port is not None else ("80" if scheme == "http" else "443")]
        else:
            ports = [port]
        entries = [_domain(host, p) for p in ports]
        if any(e is None for e in entries):
            left_out.append(raw)
            continue
        domains += [e for e in entries if e is not None and e not in domains]
    return domains, left_out


def settings(
    mode: str,
    *,
    cwd: str,
    temp_dirs: Sequence[str],
    allowed_hosts: Sequence[str],
) -> tuple[dict[str, Any], list[str]]:
    """The settings' ``sandbox`` section for ``Spec.sandbox`` ``mode`` (see the module docstring),
    and the ``allowed_hosts`` entries left out of its network (``allowed_domains``)."""
    if mode == "danger-full-access":
        return {"enabled": False}, []
    domains, left_out = allowed_domains(allowed_hosts)
    filesystem: dict[str, Any] = {}
    if temp_dirs:
        filesystem["allowWrite"] = list(temp_dirs)
    if mode == "read-only":
        filesystem["denyWrite"] = [cwd]
    section: dict[str, Any] = {
        "enabled": True,
        "failIfUnavailable": True,
        "autoAllowBashIfSandboxed": False,
        "allowUnsandboxedCommands": True,
        "network": {"allowedDomains": domains, "strictAllowlist": True},
    }
    if filesystem:
        section["filesystem"] = filesystem
    return section, left_out
