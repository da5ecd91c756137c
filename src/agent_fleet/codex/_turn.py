"""The state of one turn of a codex thread: its event stream and mapper, timers, and the bookkeeping
of approvals (handler calls in progress, a refusal that continues the turn)."""

from __future__ import annotations

import asyncio

from agent_fleet._provider.stream import EventStream
from agent_fleet._provider.watchdog import IdleWatchdog
from agent_fleet.codex.mapping import TurnMapper
from agent_fleet.events import TokenUsage

__all__ = ["AppServerTurn"]


class AppServerTurn:
    __slots__ = (
        "approvals",
        "continuations",
        "interrupt",
        "mapper",
        "resume_after",
        "seen",
        "stream",
        "sub_baseline",
        "timer",
        "turn_id",
        "watchdog",
    )

    def __init__(
        self,
        session_id: str,
        *,
        structured: bool,
        bound: int | None,
        baseline: TokenUsage | None = None,
        spawned: set[str] | None = None,
    ) -> None:
        self.mapper = TurnMapper(session_id, structured=structured, baseline=baseline, spawned=spawned)
        self.stream = EventStream(bound)
        self.turn_id: str | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.watchdog: IdleWatchdog | None = None
        self.seen = False  # a notification arrived since the watchdog last looked
        self.approvals = 0  # approval_handler calls in progress (a human may take minutes)
        self.interrupt: asyncio.Task[None] | None = None
        # A refusal codex let us send only as "cancel": once codex reports the turn interrupted, the
        # turn goes on with a new codex turn telling the agent why (see _continue_declined).
        self.resume_after: str | None = None
        self.continuations = 0
        self.sub_baseline: TokenUsage | None = None  # the sub-agents' token totals when the turn began

    def active(self) -> bool:
        """For the idle watchdog: anything since it last asked, a command / file change running
        (codex sends nothing during a long command) or an approval being decided."""
        seen, self.seen = self.seen, False
        return seen or self.approvals > 0 or self.mapper.tools_running
