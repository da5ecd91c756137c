"""Threads the app-server runs for a session without a handle of their own: its sub-agents.

A session's agent may spawn sub-agents (``spawn_agent``); each runs on a thread of its own whose
notifications and server requests reach the provider's fallback, not the session's subscription.
Their approvals are the parent session's to judge (its policy, its workspace). codex 0.163 links a
sub-agent's thread to its parent in two ways, both recorded here:

- the parent's ``collabAgentToolCall`` item lists the threads it spawned (``receiverThreadIds``): the
  session's handle collects them (``spawned``), a sub-agent's spawns are seen here;
- the sub-agent's ``turn/started`` names the turn of the top-level session it serves
  (``turn.rootTurnId``), which the session's handle knows as one of its own.

Per sub-agent thread the current turn's items are kept (a ``TurnMapper``: file changes, commands,
MCP calls) with the input its processes accepted, so its approvals are judged like the session's own.
Every notification of such a thread is mapped by that mapper too: ``observe`` returns the events, which
the provider hands to the owning session (``owner``, cached on the ``SubThread`` while it is open).
Bounded: the newest ``THREADS`` threads.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

from agent_fleet.codex._stdin import StdinHistory
from agent_fleet.codex.mapping import TurnMapper
from agent_fleet.events import Event

__all__ = ["SubThread", "SubThreads"]

THREADS: Final = 64
_DEPTH: Final = 8


class _Session(Protocol):
    @property
    def spawned(self) -> set[str]: ...

    def owns_turn(self, turn_id: str) -> bool: ...


SessionT = TypeVar("SessionT", bound=_Session)


@dataclass(slots=True)
class SubThread:
    """What is known of one sub-agent thread."""

    thread_id: str
    parent: str | None = None
    root_turn: str | None = None
    mapper: TurnMapper = field(default_factory=lambda: TurnMapper(""))
    stdin: StdinHistory = field(default_factory=StdinHistory)
    owner: Any = None  # the session it works for, once known (the provider checks it is still open)


class SubThreads:
    def __init__(self) -> None:
        self._threads: OrderedDict[str, SubThread] = OrderedDict()

    def get(self, thread_id: str) -> SubThread:
        sub = self._threads.get(thread_id)
        if sub is None:
            sub = self._threads[thread_id] = SubThread(thread_id, mapper=TurnMapper(thread_id))
            while len(self._threads) > THREADS:
                self._threads.popitem(last=False)
        else:
            self._threads.move_to_end(thread_id)
        return sub

    def observe(self, method: str, params: Any) -> tuple[SubThread, list[Event]] | None:
        """A notification for a thread without a handle: the thread and the events it maps to (None
        for a notification that names no thread)."""
        if type(params) is not dict:
            return None
        thread_id = params.get("threadId")
        if not isinstance(thread_id, str):
            return None
        sub = self.get(thread_id)
        if method == "turn/started":
            turn = params.get("turn")
            root = turn.get("rootTurnId") if isinstance(turn, dict) else None
            if isinstance(root, str):
                sub.root_turn = root
            sub.mapper = TurnMapper(thread_id)  # a new turn: the items of the last one are done
            return sub, []
        item = params.get("item")
        if isinstance(item, dict) and item.get("type") == "collabAgentToolCall":
            for child in item.get("receiverThreadIds") or ():
                if isinstance(child, str) and child != thread_id:
                    self.get(child).parent = thread_id
        return sub, sub.mapper.feed(method, params)

    def owner(self, thread_id: str, sessions: Iterable[SessionT]) -> SessionT | None:
        """The live session ``thread_id`` works for, or ``None``."""
        live = list(sessions)
        current: str | None = thread_id
        for _ in range(_DEPTH):
            if current is None:
                return None
            for session in live:
                if current in session.spawned:
                    return session
            sub = self._threads.get(current)
            if sub is None:
                return None
            if sub.root_turn is not None:
                for session in live:
                    if session.owns_turn(sub.root_turn):
                        return session
            current = sub.parent
        return None
