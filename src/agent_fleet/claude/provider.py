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

``Spec`` fields not honoured (reported per session as ``System(subtype="spec_unsupported")``):
``sandbox`` (Claude Code's OS sandbox is not configured; the policy still gates every call) and
``reasoning_effort`` values Claude Code does not know. See ``translate`` for where every field goes.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from agent_fleet._provider.sessions import Sessions
from agent_fleet.claude._sdk import require_sdk
from agent_fleet.claude.options import ClaudeOptions
from agent_fleet.claude.translate import plan_session
from agent_fleet.contract import Capabilities, Provider, Spec
from agent_fleet.errors import UsageError
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
        )

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

    async def _open(self, spec: Spec, session_id: str, *, resume: bool) -> ClaudeHandle:
        if self._closed:
            raise UsageError("this ClaudeProvider was shut down")
        require_sdk()
        from agent_fleet.claude.handle import ClaudeHandle  # imports the SDK

        policy = ApprovalPolicy(spec.permission)  # bad user regex: UsageError before any process starts
        plan = plan_session(spec, self.options, session_id=session_id, resume=resume)
        handle = ClaudeHandle(self, self._sessions, session_id, spec, policy, plan)
        await handle.connect()
        self._sessions.add(handle)
        try:
            await handle.start_turn(plan.content)
        except BaseException:
            await handle.stop()
            raise
        for notice in spec_unsupported(plan.untranslated):
            handle.emit(notice)
        return handle
