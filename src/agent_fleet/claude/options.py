"""``ClaudeOptions``: how to run the Claude Code CLI (through ``claude-agent-sdk``)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_fleet._provider.stream import DEFAULT_EVENT_BUFFER
from agent_fleet.errors import UsageError

if TYPE_CHECKING:
    from agent_fleet.policy import ApprovalRequest, Decision
    from agent_fleet.user_input import InputHandler

__all__ = ["SETTING_SOURCES", "ClaudeOptions"]

ApprovalHandler = Callable[["ApprovalRequest", "Decision"], Awaitable["Decision"]]

SETTING_SOURCES = ("user", "project", "local")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaudeOptions:
    """Options for the Claude provider. All keyword-only; ``None`` means "the SDK's default".

    - ``cli_path``: an explicit ``claude`` executable (default: the CLI bundled in the
      ``claude-agent-sdk`` wheel, else ``claude`` on ``PATH``).
    - ``env``: merged over the parent's environment for every CLI process (e.g.
      ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``, ``CLAUDE_CONFIG_DIR``). Resume needs the same
      ``CLAUDE_CONFIG_DIR`` (and the same ``Spec.cwd``) as the session's first run.
    - ``model``: the model when ``Spec.model`` is not set.
    - ``extra_args``: further CLI flags, ``{"flag": "value"}`` or ``{"flag": None}`` for a switch.
    - ``setting_sources``: which Claude Code settings files the CLI loads: any of ``"user"``
      (``~/.claude/settings.json``), ``"project"`` (the repository's ``.claude/settings.json``, its
      agents, commands and ``.mcp.json``), ``"local"`` (``.claude/settings.local.json``). Default: none,
      so a repository cannot register hooks, permission rules or MCP servers that run outside the
      approval policy (a ``SessionStart`` hook is a shell command). Name a source only for a trusted one.
    - ``event_buffer``: bounds the memory of a handle nobody reads, as ``CodexOptions.event_buffer``
      does (the same policy: see ``docs/events.md``); ``None``: unbounded.
    - ``input_handler``: async ``(InputRequest) -> InputAnswer`` for Claude's ``AskUserQuestion``
      (``agent_fleet.user_input``); without one, ``canned_answers`` (question header or text ->
      answer) answer what they can and the rest is declined with a message for the model.
    - ``approval_handler``: async ``(request, decision) -> Decision`` refining the policy's decision,
      as ``CodexOptions.approval_handler`` does: it sees the accepts and the declines that ask for
      someone (``strict-unproven``, ``escalation-unproven``, ``default-ask``), which it may accept;
      other declines are final.
    - ``hooks``: the caller's own Claude Code hooks, ``{event: [claude_agent_sdk.HookMatcher, ...]}``
      as ``ClaudeAgentOptions.hooks`` takes them. They run after agent-fleet's own ``PreToolUse`` hook
      and may refuse, add context or rewrite a tool's input (which is then judged), never accept: a
      ``PreToolUse`` "allow", a ``PermissionRequest`` allow, session permission rules and any field not
      known to be harmless are dropped from their answers (``claude._hooks``).
    - ``sandbox_optional``: every session runs its commands in Claude Code's own OS sandbox (see
      ``Spec.sandbox``; on Linux it needs bubblewrap and socat), and where that sandbox cannot start
      the session fails with ``ProviderUnavailable``. ``True`` runs such a session without it instead:
      the approval policy is then the only guard, and the session says so
      (``System(subtype="no_os_sandbox")``, and ``Capabilities.os_sandbox`` is None). Only for
      machines you accept that on.
    """

    cli_path: str | os.PathLike[str] | None = None
    env: Mapping[str, str] | None = None
    model: str | None = None
    extra_args: Mapping[str, str | None] | None = None
    setting_sources: tuple[str, ...] = ()
    input_handler: InputHandler | None = None
    approval_handler: ApprovalHandler | None = None
    hooks: Mapping[str, Sequence[Any]] | None = None
    canned_answers: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    event_buffer: int | None = DEFAULT_EVENT_BUFFER
    sandbox_optional: bool = False

    def __post_init__(self) -> None:
        if self.event_buffer is not None and (
            isinstance(self.event_buffer, bool)
            or not isinstance(self.event_buffer, int)
            or self.event_buffer < 1
        ):
            raise UsageError(f"ClaudeOptions.event_buffer must be >= 1 or None, not {self.event_buffer!r}")
        object.__setattr__(self, "setting_sources", tuple(self.setting_sources))
        bad_sources = [s for s in self.setting_sources if s not in SETTING_SOURCES]
        if bad_sources:
            raise UsageError(
                f"ClaudeOptions.setting_sources: unknown {bad_sources!r}; "
                f"choose from {', '.join(SETTING_SOURCES)}"
            )
        if self.hooks is not None and not isinstance(self.hooks, Mapping):
            raise UsageError("ClaudeOptions.hooks maps hook event names to lists of HookMatcher")
        if self.env is not None:
            bad = [k for k, v in self.env.items() if not isinstance(k, str) or not isinstance(v, str)]
            if bad:
                raise UsageError(f"ClaudeOptions.env must map str to str; bad keys: {bad!r}")
        if self.extra_args is not None:
            for flag, value in self.extra_args.items():
                if not isinstance(flag, str) or flag.startswith("-") or not flag:
                    raise UsageError(
                        f"ClaudeOptions.extra_args: give flag names without dashes, not {flag!r}"
                    )
                if value is not None and not isinstance(value, str):
                    raise UsageError(f"ClaudeOptions.extra_args[{flag!r}] must be a str or None")
