"""The requests a ``Connection`` has in flight, and answers that come after their caller stopped waiting.

Under overload a request can time out (or its caller be cancelled) after the peer got it: the peer does
the work all the same and answers late. Such an answer is not a protocol error: it goes, with the
request's method and params, to the connection's late handler, for whoever must undo the work (see the
``connection`` module docstring).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeAlias

from agent_fleet.jsonrpc.core import LATE_LIMIT, ErrorResponse, JsonRpcCore, Response

__all__ = ["LateAnswers", "LateResponseHandler"]

logger = logging.getLogger("agent_fleet.jsonrpc")

#: ``(method, params, response)`` of a request answered after its caller stopped waiting.
LateResponseHandler: TypeAlias = Callable[[str, Any, Response | ErrorResponse], object]


class LateAnswers:
    """Params of the requests in flight and of expired ones (bounded), and the late handler."""

    __slots__ = ("_core", "_expired", "_in_flight", "handler", "name")

    def __init__(self, core: JsonRpcCore, name: str, handler: LateResponseHandler | None) -> None:
        self._core = core
        self.name = name
        self.handler = handler
        self._in_flight: dict[int, Any] = {}
        self._expired: dict[int, Any] = {}

    def sent(self, rid: int, params: Any) -> None:
        self._in_flight[rid] = params

    def done(self, rid: int) -> None:
        self._in_flight.pop(rid, None)

    def expire(self, rid: int, params: Any) -> None:
        """Its caller stopped waiting for the sent request ``rid``: recognise its answer if it comes."""
        self._core.expire(rid)
        self._expired[rid] = params
        if len(self._expired) > LATE_LIMIT:
            del self._expired[next(iter(self._expired))]

    def clear(self) -> None:
        self._in_flight.clear()
        self._expired.clear()

    def answer(self, msg: Response | ErrorResponse, params: Any = None) -> object:
        """``msg`` answers a request nobody waits for: the handler's result (an awaitable to run, or
        None)."""
        if type(msg.id) is int:
            params = self._expired.pop(msg.id, None) or self._in_flight.get(msg.id, params)
        logger.info("%s: late response to %s (id %s)", self.name, msg.method, msg.id)
        if self.handler is None:
            return None
        try:
            return self.handler(msg.method or "", params, msg)
        except Exception:
            logger.exception("%s: the late response handler failed", self.name)
            return None
