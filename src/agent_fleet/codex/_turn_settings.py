"""Per-turn settings for ``CodexHandle.send``: checked against the session's walls, for one turn.

``turn/start`` may override the model, reasoning effort and summary, sandbox, approval policy and
working directory "for this turn and subsequent turns". agent-fleet makes them per turn: a turn that
overrides nothing after one that did gets the session's own values back (``TurnSettings.params``).

Walls (a ``UsageError`` before anything is sent): a turn's sandbox is never wider than the session's
(read-only < workspace-write < danger-full-access; a narrower workspace-write keeps the session's
writable roots, with ``/tmp`` and ``$TMPDIR`` not writable); its approval policy never asks less than
the session's (never < on-request < untrusted); its cwd lies inside the session's workspace or writable
roots (the approval bridge's containment root stays the workspace). What the session has comes from the
``thread/start`` (or resume / fork) response: the sandbox policy and approval policy codex resolved.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from agent_fleet.errors import UsageError
from agent_fleet.policy import check_paths

__all__ = ["SessionSettings", "TurnSettings"]

_SANDBOX_RANK: Final = {"readOnly": 0, "workspaceWrite": 1, "dangerFullAccess": 2}
_SANDBOX_NAMES: Final = {"read-only": 0, "workspace-write": 1, "danger-full-access": 2}
_APPROVAL_RANK: Final = {"never": 0, "on-request": 1, "untrusted": 2}
_SUMMARIES: Final = frozenset({"auto", "concise", "detailed", "none"})


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSettings:
    """What the session's thread runs with (from codex's thread response) and where it may write."""

    workspace: str
    writable_roots: tuple[str, ...] = ()
    model: str | None = None
    effort: str | None = None
    summary: str = "auto"
    sandbox: Mapping[str, Any] | None = None
    approval_policy: Any = None
    cwd: str | None = None

    @classmethod
    def from_response(
        cls, result: Any, *, workspace: str, writable_roots: tuple[str, ...], summary: str | None
    ) -> SessionSettings:
        r = result if isinstance(result, dict) else {}
        sandbox, model, effort, cwd = r.get("sandbox"), r.get("model"), r.get("reasoningEffort"), r.get("cwd")
        return cls(
            workspace=workspace,
            writable_roots=writable_roots,
            model=model if isinstance(model, str) else None,
            effort=effort if isinstance(effort, str) else None,
            summary=summary if summary in _SUMMARIES else "auto",
            sandbox=sandbox if isinstance(sandbox, dict) else None,
            approval_policy=r.get("approvalPolicy"),
            cwd=cwd if isinstance(cwd, str) else None,
        )


@dataclass(slots=True)
class TurnSettings:
    """The overrides in force (for restoring the session's values on the next turn)."""

    session: SessionSettings
    overridden: set[str] = field(default_factory=set)

    def needs_default_effort(self, reasoning_effort: str | None) -> bool:
        """True when the last turn overrode the effort, this one does not, and the session has no
        effort of its own (the model's default applies): the caller looks that up (``with_effort``)."""
        return reasoning_effort is None and "effort" in self.overridden and self.session.effort is None

    def with_effort(self, effort: str | None) -> None:
        """Record the session's effort (the model's default, as codex lists it)."""
        self.session = replace(self.session, effort=effort)

    def params(
        self,
        *,
        model: str | None = None,
        reasoning_effort: str | None = None,
        reasoning_summary: str | None = None,
        sandbox: str | None = None,
        approval_policy: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> dict[str, Any]:
        """The ``turn/start`` params for a turn with these overrides (and the session's values back
        for what the last turn overrode). Raises ``UsageError`` when one would pass a wall."""
        s = self.session
        asked: dict[str, Any] = {}
        if model is not None:
            asked["model"] = _text(model, "model")
        if reasoning_effort is not None:
            asked["effort"] = _text(reasoning_effort, "reasoning_effort")
        if reasoning_summary is not None:
            if reasoning_summary not in _SUMMARIES:
                raise UsageError(
                    f"reasoning_summary must be one of {sorted(_SUMMARIES)}, not {reasoning_summary!r}"
                )
            asked["summary"] = reasoning_summary
        if sandbox is not None:
            asked["sandboxPolicy"] = self._sandbox(sandbox)
        if approval_policy is not None:
            asked["approvalPolicy"] = self._approval(approval_policy)
        if cwd is not None:
            asked["cwd"] = self._cwd(cwd)
        restore = {
            "model": s.model,
            "effort": s.effort,
            "summary": s.summary,
            "sandboxPolicy": dict(s.sandbox) if s.sandbox is not None else None,
            "approvalPolicy": s.approval_policy,
            "cwd": s.cwd or s.workspace,
        }
        out = {k: restore[k] for k in self.overridden - asked.keys() if restore[k] is not None}
        out.update(asked)
        self.overridden = set(asked)
        return out

    def _sandbox(self, name: str) -> dict[str, Any]:
        wanted = _SANDBOX_NAMES.get(name)
        if wanted is None:
            raise UsageError(f"sandbox must be one of {', '.join(_SANDBOX_NAMES)}, not {name!r}")
        policy = self.session.sandbox
        have = _SANDBOX_RANK.get(str(policy.get("type"))) if policy is not None else None
        if have is None:
            shown = policy.get("type") if policy is not None else "unknown"
            raise UsageError(f"this session's sandbox ({shown}) is not one a turn can be narrowed from")
        if wanted > have:
            raise UsageError(
                f"a turn's sandbox may not be wider than its session's: {name} asked, the session has "
                f"{_name(have)}"
            )
        if wanted == have:
            return dict(policy or {})  # the session's own policy, exactly
        if wanted == 0:
            return {"type": "readOnly", "networkAccess": False}
        return {  # workspace-write under a danger-full-access session: the session's roots, no /tmp
            "type": "workspaceWrite",
            "writableRoots": list(self.session.writable_roots),
            "networkAccess": False,
            "excludeSlashTmp": True,
            "excludeTmpdirEnvVar": True,
        }

    def _approval(self, name: str) -> str:
        wanted = _APPROVAL_RANK.get(name)
        if wanted is None:
            raise UsageError(f"approval_policy must be one of {', '.join(_APPROVAL_RANK)}, not {name!r}")
        session = self.session.approval_policy
        have = _APPROVAL_RANK.get(session) if isinstance(session, str) else None
        if have is None or wanted < have:
            raise UsageError(
                f"a turn's approval policy may not ask less than its session's: {name} asked, the session "
                f"has {session!r} (every command the policy judges is one codex asks about)"
            )
        return name

    def _cwd(self, cwd: str | os.PathLike[str]) -> str:
        path = os.fspath(cwd)
        if not os.path.isabs(path):
            path = os.path.join(self.session.workspace, path)
        path = os.path.realpath(path)
        if check_paths([path], self.session.workspace, self.session.writable_roots) is not None:
            where = self.session.workspace
            raise UsageError(f"a turn's cwd must lie inside the session's workspace {where!r}, not {path!r}")
        return path


def _text(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{what} must be a non-empty string, not {value!r}")
    return value


def _name(rank: int) -> str:
    return next(name for name, r in _SANDBOX_NAMES.items() if r == rank)
