"""``CodexOptions``: how to run the codex binary, shared by the app-server and exec providers."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_fleet._codex_toml import config_args
from agent_fleet._provider.stream import DEFAULT_EVENT_BUFFER
from agent_fleet.errors import UsageError

if TYPE_CHECKING:
    from agent_fleet.policy import ApprovalRequest, Decision
    from agent_fleet.user_input import InputHandler

__all__ = ["ApprovalHandler", "AuthRefreshHandler", "AuthTokens", "CodexOptions"]

ApprovalHandler = Callable[["ApprovalRequest", "Decision"], Awaitable["Decision"]]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthTokens:
    """Fresh ChatGPT credentials for codex (``account/chatgptAuthTokens/refresh``)."""

    access_token: str
    account_id: str
    plan_type: str | None = None


#: async ``(previous_account_id) -> AuthTokens``.
AuthRefreshHandler = Callable[[str | None], Awaitable[AuthTokens]]


@dataclass(frozen=True, slots=True, kw_only=True)
class CodexOptions:
    """Options for running codex. ``None`` for a limit disables it.

    - ``codex_bin``: explicit binary (else ``$CODEX_BIN``, the bundled binary, ``codex`` on PATH).
    - ``args``: the subcommand and its flags (app-server provider; default ``["app-server"]``).
    - ``cwd``: working directory of the child process.
    - ``env``: merged over the parent's environment.
    - ``config``: dotted keys to Python values, each rendered as TOML and passed as ``-c key=<toml>``.
    - ``codex_home``: ``CODEX_HOME`` for the child (resume needs the same home as the original run).
    - ``handshake_timeout`` / ``rpc_timeout``: seconds for initialize and for each request.
    - ``restart_on_crash``: start a new app-server when the child dies; old sessions can be resumed.
    - ``event_buffer``: bounds the memory of a handle nobody reads (default 4096 events; ``None``:
      unbounded). Past that many queued events the handle merges text and reasoning deltas of the
      same item (and cumulative token counts) instead of queueing more, after a
      ``System(subtype="events_coalesced")`` marker; no text and no other event is dropped, and
      nothing waits, so no backlog moves into the connection and other handles are never delayed.
      The app-server and exec providers both apply it.
    - ``approval_handler``: async ``(request, decision) -> Decision`` refining the policy's decision.
      It sees accepted requests and, under ``PermissionConfig(profile="strict")``, the ``strict-unproven``
      declines (which it may accept); other declines are final.
    - ``input_handler``: async ``(InputRequest) -> InputAnswer`` for the agent's questions and MCP
      elicitations (``agent_fleet.user_input``); without one, ``canned_answers`` (question id, header
      or text -> answer) answer what they can and the rest is declined with a message for the model.
    - ``auth_refresh_handler``: async ``(previous_account_id) -> AuthTokens`` when codex's ChatGPT
      token is rejected; without one every live turn ends with ``Error(code="auth_failed")``.
    - ``dangerously_bypass_approvals_and_sandbox``: exec provider only; off unless asked explicitly.
    - ``skip_git_repo_check``: exec provider only; run outside a git repository.
    """

    codex_bin: str | os.PathLike[str] | None = None
    args: Sequence[str] = ("app-server",)
    cwd: str | os.PathLike[str] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    codex_home: str | os.PathLike[str] | None = None
    handshake_timeout: float | None = 30.0
    rpc_timeout: float | None = 30.0
    restart_on_crash: bool = False
    event_buffer: int | None = DEFAULT_EVENT_BUFFER
    approval_handler: ApprovalHandler | None = None
    input_handler: InputHandler | None = None
    canned_answers: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    auth_refresh_handler: AuthRefreshHandler | None = None
    dangerously_bypass_approvals_and_sandbox: bool = False
    skip_git_repo_check: bool = False

    def __post_init__(self) -> None:
        for name in ("handshake_timeout", "rpc_timeout"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UsageError(f"CodexOptions.{name} must be positive or None, not {value!r}")
        if self.event_buffer is not None and self.event_buffer < 1:
            raise UsageError(f"CodexOptions.event_buffer must be >= 1 or None, not {self.event_buffer!r}")
        # Render once up front so a bad value is a UsageError at construction, not at spawn.
        config_args(self.config)

    def config_args(self, extra: Mapping[str, Any] | None = None) -> list[str]:
        """``-c`` flags for ``config`` (then ``extra``, which wins on equal keys)."""
        merged = dict(self.config)
        if extra:
            merged.update(extra)
        return config_args(merged)

    def child_env(self) -> dict[str, str]:
        """The environment for a codex child: the parent's, ``env`` on top, then ``CODEX_HOME``."""
        env = {**os.environ, **self.env}
        if self.codex_home is not None:
            env["CODEX_HOME"] = os.fspath(Path(self.codex_home).expanduser())
        return env
