"""The daemon's floor: what a client may ask for, and the approval policy every session gets.

The token lets a client start agents on the daemon's machine; it must not let it do more than the
operator allowed (``agent-fleet serve --allow/--deny/--default-approval/--allow-host/--allow-mcp``).

Permission (``Floor.permission_for``): a client's ``permission`` is never merged into the daemon's, and
no pattern of one is ever combined with a pattern of the other. The session runs with the daemon's
permission *narrowed by* the client's (``PermissionConfig.narrowed_by``): the policy judges every
request by both, each with its own patterns, rule packs, hosts and default, and the stricter decision
wins. So a command must be accepted by both: each simple command matched by one of the daemon's allow
patterns (when it has any) and by one of the client's (when it gives any); a decline of either
declines; the daemon's ``ask`` still asks a person, and the client's ``deny`` still declines. The same
holds for ``escalation_patterns`` (what may leave the sandbox): a client's only narrow the daemon's.
Besides, a client's ``allowed_hosts`` / ``mcp_tools`` must each lie within the daemon's (an equal
pattern, or a plain name one of the daemon's patterns matches), and its ``rule_packs`` must be files
under an allowed root; its patterns must compile. Anything else is ``Refused`` (HTTP 403) or a
``UsageError`` (400). A spec without ``permission`` gets the daemon's. What the daemon stores is the
client's spec as sent (the two kept apart): a resumed session gets the daemon's floor of the moment.

Every field of a spec is checked (``FIELD_RULES``; a test holds it to ``Spec``'s fields): paths (``cwd``,
``images``, ``temp_dir``) must lie under an allowed root; without ``trust_clients`` (``serve
--trust-clients``) a client may not ask for what escapes the sandbox or the policy: sandbox
``danger-full-access``, codex ``config`` overrides, ``env`` (the environment of the agent's commands:
``GIT_CONFIG_*``, ``LD_PRELOAD``, ``PATH`` ... change what an approved command runs), or ``mcp_servers``
that start a process (a ``command``). Every route that takes a spec (a session, its resume, a batch's
template, each task line as the runner builds it) goes through ``Floor.spec``.

Gate commands of a batch run outside the sandbox: each is judged by the task's (floored) policy as a
command in the task's directory, and refused unless the policy accepts it outright (a command the
policy would ask a person about is refused too: nobody is there when the batch is submitted).

``FlooredProvider`` applies the same floor to every session a batch opens (the runner builds each
task's spec from the template and its tasks-file line, after the checks above), so a task line's
``allow``/``deny`` can never replace the daemon's.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

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
from agent_fleet.policy import ApprovalPolicy, evaluate_command

__all__ = ["FIELD_RULES", "Floor", "FlooredProvider", "Refused"]

_GLOB = re.compile(r"[*?\[]")

FieldRule = Literal["free", "path", "paths", "permission", "trust", "local"]

#: What the floor does with each ``Spec`` field: ``free`` (anything the spec accepts), ``path`` /
#: ``paths`` (under an allowed root; URLs allowed for images), ``permission`` (narrows the daemon's),
#: ``trust`` (needs ``--trust-clients`` when it escapes the sandbox or the policy), ``local`` (never sent).
FIELD_RULES: Final[Mapping[str, FieldRule]] = {
    "prompt": "free",
    "cwd": "path",
    "model": "free",
    "base_instructions": "free",
    "developer_instructions": "free",
    "reasoning_effort": "free",
    "sandbox": "trust",
    "permission": "permission",
    "mcp_servers": "trust",
    "output_schema": "free",
    "mode": "free",
    "images": "paths",
    "config": "trust",
    "timeout": "free",
    "idle_timeout": "free",
    "tools": "local",
    "answers": "free",
    "env": "trust",
    "max_turns": "free",
    "max_cost_usd": "free",
    "temp_dir": "path",
}


class Refused(PermissionError):
    """The daemon's floor refuses the request (HTTP 403); the message says which rule and why."""


def _within(given: Sequence[str], limits: Sequence[str], field: str, flag: str) -> None:
    """``Refused`` unless every pattern of ``given`` lies within ``limits`` (an equal pattern, ``*``, or a
    name without wildcards that one of them matches)."""
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


def _narrowed(config: PermissionConfig, client: PermissionConfig) -> PermissionConfig:
    """``config`` with ``client`` as one more configuration every request must satisfy."""
    inner = client if config.narrowed_by is None else _narrowed(config.narrowed_by, client)
    return dataclasses.replace(config, narrowed_by=inner)


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://", "data:"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Floor:
    """The daemon's limits (see the module docstring). ``permission`` None: built-in rules, allow."""

    permission: PermissionConfig | None = None
    trust_clients: bool = False
    allow_roots: tuple[Path, ...] = ()

    # -- paths -------------------------------------------------------------------------------------------

    def inside(self, path: str | os.PathLike[str], what: str) -> str:
        """``path`` resolved (symlinks followed); ``Refused`` when it lies outside every allowed root."""
        try:
            resolved = Path(os.path.realpath(path))
        except ValueError as exc:  # an embedded NUL
            raise UsageError(f"{what} {str(path)!r} is not a path: {exc}") from None
        if not any(resolved == root or resolved.is_relative_to(root) for root in self.allow_roots):
            raise Refused(f"{what} {str(resolved)!r} is outside the daemon's --allow-root directories")
        return str(resolved)

    def cwd(self, cwd: str | os.PathLike[str] | None) -> str:
        """``cwd`` resolved (the first allowed root when None): ``Refused`` outside the roots,
        ``UsageError`` when it is no directory."""
        if cwd is None and not self.allow_roots:
            raise Refused("the daemon has no --allow-root directory")
        path = self.inside(cwd if cwd is not None else self.allow_roots[0], "cwd")
        if not Path(path).is_dir():
            raise UsageError(f"cwd {path!r} is not a directory")
        return path

    def images(self, images: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
        """``images`` as given: URLs, or files under an allowed root (``Refused`` otherwise: a client may
        not have the agent look at a file of the daemon's machine it could not work in)."""
        out: list[str] = []
        for image in images:
            text = str(image)
            if not _is_url(text):
                self.inside(text, "image")
            out.append(text)
        return tuple(out)

    # -- permission --------------------------------------------------------------------------------------

    def permission_for(self, client: PermissionConfig | None) -> PermissionConfig | None:
        """The permission a session runs with when its client asks for ``client``: the daemon's,
        narrowed by the client's (see the module docstring). ``Refused`` / ``UsageError`` for a client
        permission the daemon does not take."""
        if client is None:
            return self.permission
        base = self.permission or PermissionConfig()
        layer: PermissionConfig | None = client
        while layer is not None:
            for pack in layer.rule_packs:
                self.inside(pack, "permission.rule_packs:")
            _within(layer.allowed_hosts, base.allowed_hosts, "allowed_hosts", "--allow-host")
            _within(layer.mcp_tools, base.mcp_tools, "mcp_tools", "--allow-mcp")
            layer = layer.narrowed_by
        # Built-in rules and default allow are already the client's own policy: nothing to add.
        combined = client if self.permission is None else _narrowed(self.permission, client)
        ApprovalPolicy(combined)  # a client pattern that does not compile: UsageError (400) naming it
        return combined

    # -- every field -------------------------------------------------------------------------------------

    def check_trust(self, spec: Spec, *, where: str = "spec") -> None:
        """``Refused`` for what only a trusted client may ask for (see the module docstring)."""
        if self.trust_clients:
            return
        hint = "; the daemon's operator can allow it with `agent-fleet serve --trust-clients`"
        if spec.env:  # GIT_CONFIG_*, LD_PRELOAD, PATH ...: what the approved commands really run
            raise Refused(f"{where}: 'env' sets the environment of the agent's commands{hint}")
        if spec.sandbox == "danger-full-access":
            raise Refused(f"{where}: sandbox 'danger-full-access' runs commands outside the sandbox{hint}")
        if spec.config:
            raise Refused(
                f"{where}: codex config overrides ({', '.join(sorted(spec.config))}) are refused{hint}"
            )
        for name, server in dict(spec.mcp_servers or {}).items():
            if not isinstance(server, Mapping) or "command" in server:
                raise Refused(f"{where}: MCP server {name!r} starts a process (its 'command'){hint}")

    def spec(self, spec: Spec, *, where: str = "spec", paths: bool = True) -> Spec:
        """``spec`` as the session runs it: every field checked by ``FIELD_RULES`` (``Refused``,
        ``UsageError``), paths resolved, the permission narrowed from the daemon's. ``paths=False``: the
        paths are the runner's own (a batch task's worktree and temp dir), checked when it was submitted."""
        self.check_trust(spec, where=where)
        changes: dict[str, Any] = {}
        for name, rule in FIELD_RULES.items():
            value = getattr(spec, name)
            match rule:
                case "path" | "paths" if not paths:
                    pass
                case "path" if name == "cwd":
                    changes[name] = self.cwd(value)
                case "path" if value is not None:
                    changes[name] = self.inside(value, f"{where}: {name}")
                case "paths":
                    changes[name] = self.images(value)
                case "permission":
                    changes[name] = self.permission_for(value)
                case "local" if value:
                    raise UsageError(f"{where}: {name} cannot be sent to the daemon")
        return dataclasses.replace(spec, **changes)

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
            return self._floor.spec(spec, paths=False)
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
