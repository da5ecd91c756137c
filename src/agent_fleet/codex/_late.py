"""Undoing what codex did for a request agent-fleet stopped waiting for (issue 29).

Under overload a request can time out (or its caller be cancelled) after codex received it: codex
still starts the thread or the turn, and its answer comes late (``Connection``'s ``on_late_response``).
Nobody holds that thread or turn any more, so it is let go of here: a new thread (started or forked) is
archived, which unloads it; a resumed thread no live session holds is unsubscribed (codex then sends it
no more notifications); a turn nobody reads is interrupted (it would otherwise run on, and spend
tokens, in the background).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from agent_fleet.codex import _overload
from agent_fleet.errors import AgentFleetError
from agent_fleet.jsonrpc import Connection, ErrorResponse, Response

__all__ = ["LateUndo"]

logger = logging.getLogger("agent_fleet.codex")

_CONTROL_TIMEOUT = 5.0
_NEW_THREADS = frozenset({"thread/start", "thread/fork"})
_TURNS = frozenset({"turn/start", "review/start"})


class LateUndo:
    """The app-server connection's late-response handler (``Connection.set_late_handler``): lets go of
    the thread or turn a late answer created. ``handles()`` are the provider's live sessions."""

    def __init__(self, conn: Connection, handles: Callable[[], Iterable[Any]]) -> None:
        self._conn = conn
        self._handles = handles

    async def __call__(self, method: str, params: Any, msg: Response | ErrorResponse) -> None:
        result = msg.result if isinstance(msg, Response) else None
        if not isinstance(result, dict):
            return  # an error: codex did nothing
        live = {h.session_id: h for h in self._handles()}
        if method in _NEW_THREADS or method == "thread/resume":
            thread = result.get("thread")
            thread_id = thread.get("id") if isinstance(thread, dict) else None
            if isinstance(thread_id, str) and thread_id not in live:
                undo = "thread/archive" if method in _NEW_THREADS else "thread/unsubscribe"
                await _control(self._conn, undo, {"threadId": thread_id})
        elif method in _TURNS and isinstance(params, dict):
            turn = result.get("turn")
            turn_id = turn.get("id") if isinstance(turn, dict) else None
            thread_id = params.get("threadId")
            handle = live.get(thread_id) if isinstance(thread_id, str) else None
            if isinstance(turn_id, str) and (handle is None or not handle.owns_turn(turn_id)):
                await _control(self._conn, "turn/interrupt", {"threadId": thread_id, "turnId": turn_id})


async def _control(conn: Connection, method: str, params: dict[str, Any]) -> None:
    logger.info("undoing a late %s: %s", method, params)
    try:
        await _overload.request(conn, method, params, timeout=_CONTROL_TIMEOUT)
    except AgentFleetError as exc:  # best effort: the thread or turn may have ended by itself
        logger.debug("%s after a late response failed: %s", method, exc)
