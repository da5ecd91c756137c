"""The daemon's floor: what a client may ask for, and the approval policy every session gets.

The token lets a client start agents on the daemon's machine; it must not let it do more than the
operator allowed (``agent-fleet serve --allow/--deny/--default-approval/--allow-host/--allow-mcp``).

Permission (``Floor.permission_for``): a client's ``permission`` may add restrictions, never remove the
daemon's. The daemon's disallow patterns and rule packs always apply (the built-in rules always do);
``default`` is the stricter of the two (deny > ask > allow); ``profile`` is strict when either is;
where both give ``allow_patterns`` a command must match one of each (combined into one pattern per
client pattern, so the engine needs no change); where only the client gives them and the daemon's
default is ask or deny, they only narrow (a command matching none is declined, rule ``user-deny``;
one matching is still left to the daemon's default, since allow patterns would accept it); a
client's ``allowed_hosts`` / ``mcp_tools`` must each lie within the daemon's (an equal pattern, or a
plain name one of the daemon's patterns matches), and its ``rule_packs`` must be files under an
allowed root. Anything else is ``Refused`` (HTTP 403).
A spec without ``permission`` gets the daemon's.

Trust (``Floor.check_trust``): without ``trust_clients`` (``serve --trust-clients``) a client may not
ask for what escapes the sandbox or the policy: sandbox ``danger-full-access``, codex ``config``
overrides (a batch task's ``env`` is one), or ``mcp_servers`` that start a process (a ``command``).

Gate commands of a batch run outside the sandbox: each is judged by the task's (floored) policy as a
command in the task's directory, and refused unless the policy accepts it outright (a command the
policy would ask a person about is refused too: nobody is there when the batch is submitted).

``FlooredProvider`` applies the same permission merge to every session a batch opens (the runner
builds each task's spec from the template and its tasks-file line, after the checks above), so a task
line's ``allow``/``deny`` can never replace the daemon's.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from agent_fleet.contract import (
    Capabilities,
    Handle,
    PermissionConfig,
    Provider,
    ReviewResult,
    ReviewTarget,
    Spec,
)
from agent_fleet.errors import UsageError
from agent_fleet.events import Event
from agent_fleet.policy import evaluate_command

__all__ = ["Floor", "FlooredProvider", "Refused"]

_STRICTNESS: Final = {"allow": 0, "ask": 1, "deny": 2}
_GLOB = re.compile(r"[*?\[]")
_GLOBAL_FLAGS = re.compile(r"\(\?([aimsux]+)\)")
_ANY: Final = r"[\s\S]*?"


class Refused(PermissionError):
    """The daemon's floor refuses the request (HTTP 403); the message says which rule and why."""


def _union(first: Sequence[str], second: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *second)))


def _scoped(pattern: str) -> str:
    """``pattern`` as one group, its leading global flags (``(?i)``) made local to it."""
    flags = ""
    while match := _GLOBAL_FLAGS.match(pattern):
        flags += match.group(1)
        pattern = pattern[match.end() :]
    if not flags:
        return f"(?:{pattern})"
    return f"(?{flags}:{pattern}{chr(10) if 'x' in flags else ''})"  # a verbose comment ends at \n


def _both(daemon: Sequence[str], client: Sequence[str], field: str) -> tuple[str, ...]:
    """Allow patterns that accept what one of ``daemon``'s AND one of ``client``'s accept."""
    if not daemon or not client or tuple(client) == tuple(daemon):
        return tuple(client or daemon)
    prefix = rf"\A(?={_ANY}(?:{'|'.join(map(_scoped, daemon))}))"
    if all(p.startswith(prefix) for p in client):  # combined already (a stored spec, resumed)
        return tuple(client)
    out: list[str] = []
    for pattern in client:
        combined = f"{prefix}(?={_ANY}{_scoped(pattern)})"
        try:
            re.compile(combined)
        except re.error as exc:
            raise Refused(
                f"permission.{field}: {pattern!r} cannot be combined with the daemon's own ({exc}); "
                f"leave {field} out to use the daemon's"
            ) from None
        out.append(combined)
    return tuple(out)


def _none_of(patterns: Sequence[str]) -> str:
    """A pattern that matches a text none of ``patterns`` matches (a disallow pattern)."""
    pattern = rf"\A(?!{_ANY}(?:{'|'.join(map(_scoped, patterns))}))"
    try:
        re.compile(pattern)
    except re.error as exc:
        raise Refused(f"permission.allow_patterns {list(patterns)!r} cannot be used here ({exc})") from None
    return pattern


def _within(given: Sequence[str], limits: Sequence[str], field: str, flag: str) -> tuple[str, ...]:
    """``given`` when every pattern lies within ``limits`` (an equal pattern, ``*``, or a name without
    wildcards that one of them matches); ``Refused`` otherwise."""
    for pattern in given:
        low = pattern.lower()
        inside = any(
            low == limit.lower()
            or limit == "*"
            or (not _GLOB.search(low) and fnmatch.fnmatchcase(low, limit.lower()))
            for limit in limits
        )
        if not inside:
            allowed = ", ".join(limits) if limits else "none"
            raise Refused(f"permission.{field}: {pattern!r} is not within the daemon's ({flag}: {allowed})")
    return tuple(given)


@dataclass(frozen=True, slots=True, kw_only=True)
class Floor:
    """The daemon's limits (see the module docstring). ``permission`` None: built-in rules, allow."""

    permission: PermissionConfig | None = None
    trust_clients: bool = False
    allow_roots: tuple[Path, ...] = ()

    def permission_for(self, client: PermissionConfig | None) -> PermissionConfig | None:
        """The permission a session runs with when its client asks for ``client``."""
        if client is None:
            return self.permission
        base = self.permission or PermissionConfig()
        for pack in client.rule_packs:
            path = Path(os.path.realpath(pack))
            if not any(path == root or path.is_relative_to(root) for root in self.allow_roots):
                raise Refused(f"permission.rule_packs: {pack!r} is outside the daemon's --allow-root")
        stricter = max(base.default, client.default, key=_STRICTNESS.__getitem__)
        allow = _both(base.allow_patterns, client.allow_patterns, "allow_patterns")
        disallow = _union(base.disallow_patterns, client.disallow_patterns)
        if client.allow_patterns and not base.allow_patterns and base.default != "allow":
            # Allow patterns accept what they match, and the daemon leaves what no rule decides to
            # its default (ask or deny): a client's may only narrow, as a decline of what matches none.
            allow, disallow = (), (*disallow, _none_of(client.allow_patterns))
        return PermissionConfig(
            allow_patterns=allow,
            disallow_patterns=disallow,
            default=stricter,
            rule_packs=_union(base.rule_packs, client.rule_packs),
            allowed_hosts=_within(client.allowed_hosts, base.allowed_hosts, "allowed_hosts", "--allow-host"),
            mcp_tools=_within(client.mcp_tools, base.mcp_tools, "mcp_tools", "--allow-mcp"),
            tool_allow_patterns=_both(
                base.tool_allow_patterns, client.tool_allow_patterns, "tool_allow_patterns"
            ),
            tool_disallow_patterns=_union(base.tool_disallow_patterns, client.tool_disallow_patterns),
            profile="strict" if "strict" in (base.profile, client.profile) else "default",
        )

    def check_trust(
        self,
        *,
        sandbox: str | None,
        config: Any,
        mcp_servers: Any,
        env: Any = None,
        where: str = "spec",
    ) -> None:
        """``Refused`` for what only a trusted client may ask for (see the module docstring)."""
        if self.trust_clients:
            return
        hint = "; the daemon's operator can allow it with `agent-fleet serve --trust-clients`"
        if env:  # PATH, LD_PRELOAD, ...: what the approved commands really run
            raise Refused(f"{where}: 'env' sets the environment of the agent's commands{hint}")
        if sandbox == "danger-full-access":
            raise Refused(f"{where}: sandbox 'danger-full-access' runs commands outside the sandbox{hint}")
        if config:
            raise Refused(f"{where}: codex config overrides ({', '.join(sorted(config))}) are refused{hint}")
        for name, server in dict(mcp_servers or {}).items():
            if isinstance(server, dict) and "command" in server:
                raise Refused(f"{where}: MCP server {name!r} starts a process (its 'command'){hint}")

    def spec(self, spec: Spec) -> Spec:
        """``spec`` with the permission it runs with, after the trust checks (``Refused``)."""
        self.check_trust(sandbox=spec.sandbox, config=spec.config, mcp_servers=spec.mcp_servers)
        return dataclasses.replace(spec, permission=self.permission_for(spec.permission))

    def check_gate(self, command: str, *, cwd: str, permission: PermissionConfig | None, where: str) -> None:
        """``Refused`` unless the policy accepts ``command`` outright as a command run in ``cwd``."""
        decision = evaluate_command(command, config=permission, cwd=cwd, writable_roots=(cwd,))
        if not decision.accepted:
            raise Refused(
                f"{where}: gate command {command!r} is declined by the daemon's approval policy "
                f"(rule {decision.rule}: {decision.reason})"
            )


class FlooredProvider(Provider):
    """``inner`` with ``floor`` applied to every session's permission (for batches: see the module
    docstring). Starting it starts ``inner``; shutting it down leaves ``inner`` running (it is the
    daemon's, shared with its sessions)."""

    def __init__(self, inner: Provider, floor: Floor) -> None:
        self._inner = inner
        self._floor = floor
        self.name = inner.name
        self.options = inner.options

    @property
    def capabilities(self) -> Capabilities:
        return self._inner.capabilities

    @property
    def pid(self) -> int | None:
        return self._inner.pid

    @property
    def rate_limits(self) -> Any:
        return self._inner.rate_limits

    def _floored(self, spec: Spec) -> Spec:
        try:
            return self._floor.spec(spec)
        except Refused as exc:  # the batch was checked when it was submitted: this is a task's failure
            raise UsageError(str(exc)) from None

    async def start(self) -> None:
        await self._inner.start()

    async def spawn(self, spec: Spec) -> Handle:
        return await self._inner.spawn(self._floored(spec))

    async def resume(self, session_id: str, spec: Spec) -> Handle:
        return await self._inner.resume(session_id, self._floored(spec))

    async def review(
        self,
        target: ReviewTarget,
        *,
        cwd: str | Path,
        model: str | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> ReviewResult:
        return await self._inner.review(target, cwd=cwd, model=model, on_event=on_event)

    async def shutdown(self) -> None:
        """Nothing: the inner provider is the daemon's."""
