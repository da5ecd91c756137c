"""``ClaudeProvider``: Claude Code sessions through ``claude-agent-sdk``, one CLI process per session.

Theory of operation
-------------------
``claude-agent-sdk`` is an optional dependency (``pip install 'agent-fleet[claude]'``); it is imported
when the provider starts or opens a session, never at import time, and its absence is a
``ProviderUnavailable`` naming the extra. Its wheel bundles the Claude Code CLI.

``spawn`` gives the session a fresh UUID (``--session-id``), so ``Handle.session_id`` is known before
the CLI says anything; ``resume`` passes ``--resume=<id>`` (the CLI must see the same
``CLAUDE_CONFIG_DIR`` and working directory as the first run: transcripts live there). Each session
is a ``ClaudeSDKClient`` owned by a ``ClaudeHandle``; ``shutdown()`` stops them all.

Every tool call is decided by ``ApprovalPolicy(spec.permission)`` (see ``handle``); the CLI runs in
permission mode ``default`` with no pre-allowed tools.

The wall behind the policy is Claude Code's own OS sandbox (``_sandbox``), on unless
``Spec.sandbox="danger-full-access"``. Before a CLI starts, ``_open`` checks that the sandbox can start
(bubblewrap and socat on the CLI's ``PATH`` on Linux); where it cannot -- there, or when the CLI
itself refuses (``failIfUnavailable``) -- the session fails with ``ProviderUnavailable``, unless
``ClaudeOptions.sandbox_optional`` allows running without it: then it runs so and says so
(``System(subtype="no_os_sandbox")``). Each session gets its temporary directory (``Spec.temp_dir``,
else a private one removed with the session).

Beyond spawn and resume: ``Handle.interrupt()`` (stop a turn, keep the session and its CLI),
``Handle.fork()`` (``fork`` here: Claude Code's ``--fork-session`` into a new session id),
``list_sessions()`` (``claude-agent-sdk``'s listing, under the CLIs' ``CLAUDE_CONFIG_DIR``); the
caller's own hooks (``ClaudeOptions.hooks``) run after ours and cannot accept (``_hooks``).

``Spec`` fields not honoured (reported per session as ``System(subtype="spec_unsupported")``):
``reasoning_effort`` values Claude Code does not know, ``allowed_hosts`` entries its sandbox cannot
express. See ``translate`` for where every field goes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from typing import TYPE_CHECKING

from agent_fleet._provider.sessions import Sessions
from agent_fleet.claude import _sandbox
from agent_fleet.claude._sdk import require_sdk
from agent_fleet.claude.options import ClaudeOptions
from agent_fleet.claude.translate import SANDBOX_DEFAULT, ClaudePlan, plan_session
from agent_fleet.contract import Capabilities, Provider, SessionInfo, Spec
from agent_fleet.errors import ProviderUnavailable, Unsupported, UsageError
from agent_fleet.events import RateLimits, System
from agent_fleet.notices import spec_unsupported
from agent_fleet.policy import ApprovalPolicy

if TYPE_CHECKING:
    from agent_fleet.claude.handle import ClaudeHandle

__all__ = ["ClaudeProvider"]

logger = logging.getLogger("agent_fleet.claude")

_SHUTDOWN_GRACE = 25.0  # seconds; the SDK bounds closing one CLI to about 20


class ClaudeProvider(Provider):
    """The Claude Code provider. ``async with ClaudeProvider(options) as provider: ...``"""

    name = "claude"

    def __init__(self, options: ClaudeOptions | None = None) -> None:
        self.options = options or ClaudeOptions()
        self._sessions: Sessions[ClaudeHandle] = Sessions(logger)
        self._closed = False
        self._rate_limits: RateLimits | None = None

    @property
    def rate_limits(self) -> RateLimits | None:
        """The latest rate-limit state the CLI reported in any session (None before the first)."""
        return self._rate_limits

    def observe_rate_limits(self, limits: RateLimits) -> None:
        """A session saw the account's rate-limit state (called by its handle)."""
        self._rate_limits = limits

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            supports_injection=True,  # a user message written mid-turn reaches the next model request
            supports_resume=True,
            supports_tool_plugins=True,  # Spec.mcp_servers
            supports_output_schema=True,  # --json-schema -> ResultMessage.structured_output
            supports_reasoning_effort=True,  # --effort
            needs_permission_config=False,
            emits_subagent_events=True,  # subagents' tool calls and results are reported
            tool_permission_format="claude-can-use-tool",
            supports_python_tools=True,  # an in-process MCP server (claude._tools)
            os_sandbox=None if self._sandbox_problem() else _sandbox.OS_SANDBOX,
        )

    def _cli_env(self, spec: Spec | None = None) -> dict[str, str]:
        """The environment a session's CLI runs with (its ``PATH`` decides what the sandbox finds)."""
        return {**os.environ, **(self.options.env or {}), **(spec.env if spec is not None else {})}

    def _sandbox_problem(self, spec: Spec | None = None) -> str | None:
        """Why sessions of this provider run without Claude Code's sandbox: it cannot start here and
        ``sandbox_optional`` allows that (else such a session fails to start), or None."""
        if not self.options.sandbox_optional:
            return None
        return _sandbox.missing(self._cli_env(spec))

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Check that ``claude-agent-sdk`` is importable. Raises ``ProviderUnavailable``."""
        if self._closed:
            raise UsageError("this ClaudeProvider was shut down; create a new one")
        require_sdk()

    async def shutdown(self) -> None:
        """Stop every session (interrupt, end its CLI). Idempotent."""
        if self._closed:
            return
        self._closed = True
        handles = self._sessions.handles()
        if handles:
            await asyncio.gather(*(h.stop() for h in handles), return_exceptions=True)
        # Background work left is bounded (interrupts, reaping CLIs that exited): let it finish so
        # every CLI is reaped, then cancel whatever is still stuck.
        await self._sessions.close(grace=_SHUTDOWN_GRACE)

    # -- sessions ----------------------------------------------------------------------------------------

    async def list_sessions(self, *, limit: int | None = None, archived: bool = False) -> list[SessionInfo]:
        """Claude Code's stored sessions (every working directory's) under the CLIs'
        ``CLAUDE_CONFIG_DIR``, newest first. Claude Code archives nothing: ``archived=True`` raises
        ``Unsupported``. Raises ``ProviderUnavailable`` when the listing fails."""
        if archived:
            raise Unsupported("Claude Code does not archive sessions")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise UsageError(f"list_sessions(): limit must be a whole number >= 1, not {limit!r}")
        require_sdk()
        from agent_fleet.claude._sessions import list_sessions

        return await list_sessions(self._cli_env(), limit)

    async def spawn(self, spec: Spec) -> ClaudeHandle:
        """Start a session and its first turn. Raises ``ProviderUnavailable`` (SDK or CLI missing,
        CLI failing to start), ``TransportError`` (the CLI refused), ``UsageError`` (bad spec)."""
        return await self._open(spec, str(uuid.uuid4()), resume=False)

    async def resume(self, session_id: str, spec: Spec) -> ClaudeHandle:
        """Continue session ``session_id`` (history kept) with a turn running ``spec.prompt``.

        Use the same ``spec.cwd`` and ``CLAUDE_CONFIG_DIR`` as the first run. An unknown session is
        a ``TransportError`` carrying the CLI's message.
        """
        if session_id in self._sessions:
            raise UsageError(f"session {session_id} already has a live handle; stop() it first")
        return await self._open(spec, session_id, resume=True)

    async def fork(self, session_id: str, spec: Spec) -> ClaudeHandle:
        """A new session that starts with a copy of session ``session_id``'s history (Claude Code's
        ``--fork-session``); no turn runs until ``send()``. Use the same ``spec.cwd`` and
        ``CLAUDE_CONFIG_DIR`` as the session forked. ``Handle.fork()`` calls this."""
        return await self._open(spec, str(uuid.uuid4()), resume=False, fork_of=session_id)

    async def _open(
        self, spec: Spec, session_id: str, *, resume: bool, fork_of: str | None = None
    ) -> ClaudeHandle:
        if self._closed:
            raise UsageError("this ClaudeProvider was shut down")
        require_sdk()
        from agent_fleet.claude.handle import ClaudeHandle  # imports the SDK

        policy = ApprovalPolicy(spec.permission)  # bad user regex: UsageError before any process starts
        unavailable: str | None = None
        if (spec.sandbox or SANDBOX_DEFAULT) != "danger-full-access":
            unavailable = _sandbox.missing(self._cli_env(spec))
            if unavailable is not None and not self.options.sandbox_optional:
                raise ProviderUnavailable(_no_sandbox_message(unavailable), tried=["Claude Code's sandbox"])
        temp = _sandbox.session_temp(spec.temp_dir)
        try:
            plan = plan_session(
                spec,
                self.options,
                session_id=session_id,
                resume=resume,
                temp=temp,
                sandbox_unavailable=unavailable,
                fork_of=fork_of,
            )
            handle = ClaudeHandle(self, self._sessions, session_id, spec, policy, plan, temp)
            try:
                await handle.connect()
            except _sandbox.SandboxRefused as exc:
                if not self.options.sandbox_optional:
                    raise ProviderUnavailable(
                        _no_sandbox_message(exc.reason),
                        tried=["Claude Code's sandbox"],
                        stderr_tail=exc.stderr,
                    ) from exc
                plan = plan_session(
                    spec,
                    self.options,
                    session_id=session_id,
                    resume=resume,
                    temp=temp,
                    sandbox_unavailable=exc.reason,
                    fork_of=fork_of,
                )
                handle = ClaudeHandle(self, self._sessions, session_id, spec, policy, plan, temp)
                await handle.connect()
        except BaseException:
            temp.remove()
            raise
        self._sessions.add(handle)
        if fork_of is not None:
            handle.notice_next_turn(_notices(plan))  # no turn yet: the first send() gets them
            return handle
        try:
            await handle.start_turn(plan.content)
        except BaseException:
            await handle.stop()
            raise
        for notice in _notices(plan):
            handle.emit(notice)
        return handle


def _no_sandbox_message(reason: str) -> str:
    return (
        f"{reason}. The Claude provider runs Claude Code's commands in its OS sandbox and does not start "
        "a session without it; install what it needs, or run without an OS sandbox -- "
        "ClaudeOptions(sandbox_optional=True) where it cannot start, or Spec.sandbox='danger-full-access' "
        "(--sandbox danger-full-access) -- and the approval policy is the only guard"
    )


def _notices(plan: ClaudePlan) -> list[System]:
    notices = spec_unsupported(plan.untranslated)
    if plan.no_os_sandbox is not None:
        reason = plan.no_os_sandbox
        notices.insert(0, System(subtype="no_os_sandbox", data={"provider": "claude", "reason": reason}))
    return notices
