"""Where the app-server's notifications that no handle subscribed to go.

A notification without a subscriber is connection-wide (no ``threadId``: config warnings, account
changes, rate limits) or for a thread whose handle does not exist yet (MCP start-up status arrives
right after the ``thread/start`` response, before the handle subscribes) or never will (a sub-agent's
thread). ``NoticeRouter.route`` puts every notice on the provider's bounded ``NoticeBoard``; a
connection-wide notice also goes to every live session, a thread's notice to that thread's handle,
or is kept (bounded: ``THREADS`` threads, ``PER_THREAD`` notices each) until ``adopt`` hands it to the
handle. Rate limits are news only when they change. Anything else is logged at debug level.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Final, Protocol

from agent_fleet._provider.board import Backlog, NoticeBoard
from agent_fleet.codex.mapping import IGNORED, notice_events
from agent_fleet.events import Event, RateLimits, UnknownEvent

__all__ = ["NoticeRouter"]

logger = logging.getLogger("agent_fleet.codex")

THREADS: Final = 64
PER_THREAD: Final = 32


class _Session(Protocol):
    @property
    def session_id(self) -> str: ...

    def notice(self, event: Event) -> None: ...


class NoticeRouter:
    """``sessions`` returns the live handles (a snapshot)."""

    def __init__(self, sessions: Callable[[], Iterable[_Session]]) -> None:
        self._sessions = sessions
        self._board = NoticeBoard()
        self._orphans: OrderedDict[str, Backlog] = OrderedDict()
        self.rate_limits: RateLimits | None = None

    def follow(self) -> AsyncIterator[Event]:
        return self._board.follow()

    def close(self) -> None:
        self._board.close()

    def post(self, event: Event) -> None:
        """A provider notice of our own (e.g. a declined approval no session owns)."""
        self._board.post(event)

    def adopt(self, thread_id: str) -> list[Event]:
        """The notices kept for ``thread_id`` until its handle existed (oldest first)."""
        backlog = self._orphans.pop(thread_id, None)
        return backlog.drain() if backlog is not None else []

    def route(self, method: str, params: Any) -> None:
        if method in IGNORED:  # e.g. thread/started (its thread id is inside, so no handle gets it)
            return
        p = params if isinstance(params, dict) else {}
        events = notice_events(method, p)
        thread_id = p.get("threadId")
        if events is None:
            if isinstance(thread_id, str):  # events of a thread nobody watches (a sub-agent, ...)
                logger.debug("codex notification for thread %s without a handle: %s", thread_id, method)
                return
            events = [UnknownEvent(raw={"method": method, "params": params})]
        for event in events:
            if isinstance(event, RateLimits):
                if event == self.rate_limits:
                    continue  # codex repeats the state after every model response: news only
                self.rate_limits = event
            self._board.post(event)
            if isinstance(thread_id, str):
                self._to_thread(thread_id, event)
            elif not isinstance(event, UnknownEvent):
                for handle in self._sessions():
                    handle.notice(event)

    def _to_thread(self, thread_id: str, event: Event) -> None:
        # The fallback may run after the thread's handle subscribed: then it is that handle's.
        for handle in self._sessions():
            if handle.session_id == thread_id:
                handle.notice(event)
                return
        backlog = self._orphans.get(thread_id)
        if backlog is None:
            backlog = self._orphans[thread_id] = Backlog(PER_THREAD)
            while len(self._orphans) > THREADS:
                self._orphans.popitem(last=False)
        backlog.add(event)
