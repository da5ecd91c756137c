"""Model outages (issue 29): a turn bounded by model progress, and a batch that waits out an outage.

Only model progress counts as activity
--------------------------------------
With the model endpoint gone, codex keeps the turn alive, sending a "Reconnecting..." notice now and
then (``System(stream_retry)``): every notice reset the idle watchdog, and a fleet hung for as long as
the outage lasted. ``ProgressWatch`` watches one turn for *model progress* (what only the model makes:
text, reasoning, messages, plans, tool calls; not notices, token counts a resumed session replays, or a
command's result), and, while no command or tool call is running (``ToolUse`` without its
``ToolResult``), ends the turn after ``Task.model_timeout`` seconds without any: ``end_turn`` interrupts
it (or stops the session, when the provider cannot interrupt a turn alone; the retry then resumes it),
and the turn's outcome is ``Error(code="connection_failed", retryable=True)`` naming the cause (the
provider's last reconnecting notice).

A batch waits an outage out
---------------------------
``ModelOutage`` is shared by a batch's tasks. A task whose turn ended for want of the model is *down*
until one of its turns shows model progress again. A down task first waits (up to ``settle`` seconds)
for the others: if another shows progress, the model answers and the usual retry policy applies; when
every running task is down, the batch is *paused*: it says so once (``runner.batch_paused``), starts no
task, and no down task burns a retry: one of them (the probe) tries its turn again at once, the others
wait. When the probe's turn (or any
turn) shows progress, the batch resumes (``runner.batch_resumed``) and the waiting tasks try again. If
the model stays unreachable for ``limit`` seconds after the pause, ``on_give_up`` is called with the
cause (the batch then stops, resumable).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from agent_fleet._provider.watchdog import IdleWatchdog
from agent_fleet.contract import Handle
from agent_fleet.errors import AgentFleetError, Unsupported
from agent_fleet.events import (
    AssistantMessage,
    Error,
    Event,
    Plan,
    Reasoning,
    ReasoningDelta,
    Result,
    SubAgent,
    System,
    TextDelta,
    ToolResult,
    ToolUse,
    WebSearch,
)
from agent_fleet.runner._types import TaskEvent, notice

__all__ = ["DEFAULT_MODEL_TIMEOUT", "DEFAULT_OUTAGE_TIMEOUT", "ModelOutage", "ProgressWatch", "end_turn"]

#: Seconds a turn may go without model progress (``--model-timeout``).
DEFAULT_MODEL_TIMEOUT = 180.0
#: Seconds a batch waits for an unreachable model before it stops (``--outage-timeout``).
DEFAULT_OUTAGE_TIMEOUT = 300.0
#: Provider notices that say the model is being retried: the cause an outage error names.
_RETRY_NOTICES = frozenset({"stream_retry", "stream_error"})
#: What only the model makes (see the module docstring).
_PROGRESS: frozenset[type[Event]] = frozenset(
    {TextDelta, AssistantMessage, Reasoning, ReasoningDelta, ToolUse, Plan, WebSearch, SubAgent, Result}
)


class ProgressWatch:
    """One turn's model progress (see the module docstring). ``dog`` is its watchdog (None without a
    limit): a hot path marks progress with ``dog.seen = True``. ``on_progress`` runs at the first
    progress event of the turn."""

    __slots__ = ("_limit", "_on_progress", "_progressed", "_tools", "cause", "dog", "error")

    def __init__(
        self,
        limit: float | None,
        on_silent: Callable[[], object],
        on_progress: Callable[[], object] | None = None,
    ) -> None:
        self._limit = limit
        self._tools: set[str] = set()
        self._on_progress = on_progress
        self._progressed = False
        self.cause: str | None = None
        self.error: Error | None = None

        def silent() -> None:
            self.error = self._error()
            on_silent()

        self.dog = IdleWatchdog(limit, silent, busy=lambda: bool(self._tools)) if limit else None

    def feed(self, event: Event) -> None:
        """An event of the turn (a ``TextDelta`` may skip this: it only sets ``dog.seen``)."""
        kind = type(event)
        if kind is System:
            assert isinstance(event, System)
            if event.subtype in _RETRY_NOTICES:
                self.cause = str(event.data.get("message") or "") or self.cause
            return
        if kind is ToolUse:
            assert isinstance(event, ToolUse)
            self._tools.add(event.id)
        elif kind is ToolResult:
            assert isinstance(event, ToolResult)
            self._tools.discard(event.id)
            return
        if kind in _PROGRESS:
            self.progress()

    def progress(self) -> None:
        if self.dog is not None:
            self.dog.seen = True
        if not self._progressed:
            self._progressed = True
            if self._on_progress is not None:
                self._on_progress()

    def outcome(self, terminal: Result | Error) -> Result | Error:
        """The turn's outcome: the outage error when the watch ended it, else ``terminal``."""
        return self.error if self.error is not None and isinstance(terminal, Error) else terminal

    def cancel(self) -> None:
        if self.dog is not None:
            self.dog.cancel()

    def _error(self) -> Error:
        cause = f"the model is unreachable: {self.cause}" if self.cause else "the model sent nothing"
        return Error(
            code="connection_failed",
            message=f"no progress from the model for {self._limit:g}s ({cause}); the turn was interrupted",
            retryable=True,
            data={"model_timeout": self._limit, "cause": self.cause},
        )


async def end_turn(handle: Handle) -> bool:
    """End a turn the model stopped answering: ``interrupt()`` (the session stays), else ``stop()``.
    Returns True when the session was stopped (the retry must resume it)."""
    try:
        await handle.interrupt()
        return False
    except Unsupported:
        pass
    except AgentFleetError:
        pass  # (a dead connection: stopping below is the best left)
    with contextlib.suppress(AgentFleetError):
        await handle.stop()
    return True


class ModelOutage:
    """A batch's view of the model's reachability (see the module docstring).

    ``notify(event)`` gets the ``runner.batch_paused`` / ``runner.batch_resumed`` notices (once each per
    outage); ``on_give_up(reason)`` is called when the outage outlasts ``limit`` seconds (None: never).
    """

    def __init__(
        self,
        *,
        limit: float | None,
        notify: Callable[[TaskEvent], None],
        on_give_up: Callable[[str], None],
    ) -> None:
        self.limit = limit
        self._notify = notify
        self._on_give_up = on_give_up
        self._running: set[str] = set()
        self._down: dict[str, str] = {}
        self._reachable = asyncio.Event()
        self._reachable.set()
        self._probe: str | None = None
        self._progressed = 0  # turns that showed model progress, ever
        self._changed: asyncio.Event | None = None  # set when the probe's place is free or the model answers
        self._timer: asyncio.TimerHandle | None = None
        self.cause: str | None = None

    @property
    def paused(self) -> bool:
        return not self._reachable.is_set()

    async def open(self) -> None:
        """Wait while the batch is paused (a worker, before it starts a task)."""
        await self._reachable.wait()

    def enter(self, task_id: str) -> None:
        self._running.add(task_id)

    def leave(self, task_id: str) -> None:
        self._running.discard(task_id)
        self._down.pop(task_id, None)
        if self._probe == task_id:
            self._probe = None
            self._wake()  # another waiting task probes the model in its place

    def progress(self, task_id: str) -> None:
        """A turn of ``task_id`` showed model progress: the model answers."""
        self._down.pop(task_id, None)
        self._progressed += 1
        if self.paused:
            self._resume(task_id)
        else:
            self._wake()

    async def hit(self, task_id: str, cause: str, *, settle: float) -> bool:
        """The turn of ``task_id`` ended for want of the model. True: try it again now, without counting
        a retry (the batch paused: this task probes the model, or the model answered while it waited);
        False: not an outage of the whole batch, the usual retry policy applies."""
        self._down[task_id] = cause
        if not self.paused and self._running and self._running <= set(self._down):
            self._pause(task_id, cause)
        if not self.paused:
            seen = self._progressed  # the others may be losing the model too: wait for them a while
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(settle):
                    while not self.paused and self._progressed == seen and task_id in self._down:
                        await self._changes()
            if not self.paused:
                return False
        while self.paused and self._probe not in (None, task_id):
            await self._changes()
        if self.paused:
            self._probe = task_id  # tries again at once: its turn sees the model come back
        return True

    async def _changes(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        await self._changed.wait()

    def _wake(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    def _pause(self, task_id: str, cause: str) -> None:
        self.cause = cause
        self._reachable.clear()
        self._probe = None
        self._wake()
        self._notify(notice(task_id, "batch_paused", cause=cause, tasks=len(self._running), limit=self.limit))
        if self.limit is not None:
            self._timer = asyncio.get_running_loop().call_later(self.limit, self._give_up)

    def _resume(self, task_id: str) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._probe = None
        self._reachable.set()
        self._wake()
        self._notify(notice(task_id, "batch_resumed", cause=self.cause))

    def _give_up(self) -> None:
        self._timer = None
        self._on_give_up(
            f"the model stayed unreachable for {self.limit:g}s ({self.cause}); no task was started meanwhile"
        )
