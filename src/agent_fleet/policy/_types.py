"""The engine's values: what is asked (``ApprovalRequest``) and what is answered (``Decision``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["Action", "ApprovalRequest", "Decision", "RequestKind"]

#: ``command`` (a shell command), ``file_change`` (files written, moved or deleted), ``read`` (files or
#: directories read), ``network`` (a connection to ``host``), ``permissions`` (wider sandbox rights for a
#: while: write ``paths`` and/or ``network``), ``tool`` (a named tool: a caller's ``Spec.tools``
#: function, ``mcp:server/tool`` of an MCP server, ``builtin:Name`` of the agent itself), ``unknown``
#: (anything a provider could not classify: always declined).
RequestKind = Literal["command", "file_change", "read", "network", "permissions", "tool", "unknown"]
#: The policy's own words, translated to each provider's wire format in that provider's package:
#: ``allow_once`` (this request only), ``allow_for_session`` (this and the same again in the session),
#: ``decline`` (refuse; the agent may try something else), ``cancel`` (refuse and stop the turn).
Action = Literal["allow_once", "allow_for_session", "decline", "cancel"]
_KINDS: tuple[str, ...] = get_args(RequestKind)
_ACTIONS: tuple[str, ...] = get_args(Action)


def _paths(values: Sequence[str | os.PathLike[str]], what: str) -> tuple[str, ...]:
    if isinstance(values, str | bytes | os.PathLike):
        raise TypeError(f"ApprovalRequest.{what} must be a sequence of paths, not a single path")
    return tuple(os.fspath(value) for value in values)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequest:
    """One thing an agent asks to do.

    ``command``: shell text, or an argv list (codex sends both; ``["bash", "-lc", "..."]`` is common);
    stored as ``str`` or ``tuple[str, ...]``. ``paths``: the files a ``file_change`` touches, relative to
    ``cwd`` or absolute; for ``read`` what is read, for ``permissions`` the write roots asked for.
    ``cwd``: where the agent works (the session's workspace, never a directory the peer chose).
    ``writable_roots``: further directories it may write (relative ones are taken from ``cwd``).
    ``host``/``port``/``protocol``: a ``network`` request's destination (``host=None``: any host, e.g. a
    web search). ``network``: a ``permissions`` request asks for network access (to any host).
    ``tool``: a ``tool`` request's name: a caller-defined tool (``Spec.tools``), ``mcp:server/tool``, or
    ``builtin:Name`` (the agent's own session tools). Path-likes are stored as ``str``.
    ``escalated``: accepting the request lets something run or write outside the OS sandbox (a
    command asked to run unsandboxed, or one the provider cannot keep inside it): such a request is
    accepted only on proof (see ``agent_fleet.policy.engine``), never by ``default="allow"``.
    Raises ``ValueError`` for an unknown ``kind``.
    """

    kind: RequestKind
    command: str | Sequence[str] | None = None
    paths: Sequence[str | os.PathLike[str]] = ()
    cwd: str | os.PathLike[str] | None = None
    writable_roots: Sequence[str | os.PathLike[str]] = ()
    host: str | None = None
    port: int | None = None
    protocol: str | None = None
    network: bool = False
    tool: str | None = None
    escalated: bool = False

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"ApprovalRequest.kind must be one of {', '.join(_KINDS)}, not {self.kind!r}")
        if self.command is not None and not isinstance(self.command, str | bytes | bytearray):
            # Kept as given (even non-strings): the policy declines what it cannot judge, never raises.
            object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "paths", _paths(self.paths, "paths"))
        object.__setattr__(self, "writable_roots", _paths(self.writable_roots, "writable_roots"))
        if self.cwd is not None:
            object.__setattr__(self, "cwd", os.fspath(self.cwd))


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """The answer. ``rule`` names the rule that declined (``None`` when nothing did); ``reason`` is for
    humans. The engine itself only answers ``allow_for_session`` or ``decline``; ``allow_once`` and
    ``cancel`` exist for handlers that answer on the user's behalf."""

    action: Action
    reason: str | None = None
    rule: str | None = None

    def __post_init__(self) -> None:
        if self.action not in _ACTIONS:
            raise ValueError(f"Decision.action must be one of {', '.join(_ACTIONS)}, not {self.action!r}")

    @property
    def accepted(self) -> bool:
        return self.action in ("allow_once", "allow_for_session")
