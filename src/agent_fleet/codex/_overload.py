"""codex's "Server overloaded" refusals, and retrying them.

When the app-server's request queue is full it refuses a new request at once, unprocessed, with
JSON-RPC error ``-32001`` ("Server overloaded; retry later."). Any request may be refused so (seen at
512 simultaneous ``thread/start``), and because the request never ran, sending it again is safe even
for one that is not idempotent (``turn/start``). ``retry_on_overload`` retries exactly these refusals,
with exponential backoff and full jitter, never past the caller's time budget; every other error
(a timeout included: a request that timed out may have run) is raised at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from agent_fleet.errors import RequestTimeout, RPCError, UsageError

__all__ = ["OVERLOADED", "is_retryable", "request", "retry_on_overload"]

logger = logging.getLogger("agent_fleet.codex")

#: The JSON-RPC error code of codex's "Server overloaded; retry later."
OVERLOADED: Final = -32001
_DEFAULT_ATTEMPTS: Final = 10  # without a time budget: attempts, not forever
T = TypeVar("T")


def _says_overloaded(data: Any) -> bool:
    if isinstance(data, str):
        return data.replace("_", "").lower() == "serveroverloaded"
    if isinstance(data, dict):
        return any(_says_overloaded(v) for v in data.values())
    if isinstance(data, list):
        return any(_says_overloaded(v) for v in data)
    return False


def is_retryable(exc: BaseException) -> bool:
    """True when ``exc`` is codex refusing a request unprocessed because it is overloaded (JSON-RPC
    ``-32001``, or an error whose data says ``server_overloaded``): sending the same request again later
    is safe. False for everything else, also for errors that are ``retryable`` in the broader sense
    (a timeout: the request may have run)."""
    return isinstance(exc, RPCError) and (exc.code == OVERLOADED or _says_overloaded(exc.data))


async def retry_on_overload(
    op: Callable[[], Awaitable[T]],
    *,
    timeout: float | None = None,  # noqa: ASYNC109 - the total budget, sleeps included, is the contract
    max_attempts: int | None = None,
    initial_delay: float = 0.05,
    max_delay: float = 2.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> T:
    """Await ``op()``; while it raises an overload refusal (``is_retryable``), wait and call it again.

    The wait before attempt *n + 1* is uniform in ``[0, min(max_delay, initial_delay * 2**(n-1))]``
    (exponential backoff, full jitter, so many refused callers spread out). ``timeout`` bounds the
    whole call: no wait ends past it (the last refusal is raised instead), so give each attempt the time
    that is left. ``max_attempts`` bounds the attempts (default: unbounded with a ``timeout``, else 10).
    Any other exception is raised at once. Raises ``UsageError`` for a bad argument.
    """
    if max_attempts is not None and max_attempts < 1:
        raise UsageError("max_attempts must be >= 1")
    if timeout is not None and not timeout > 0:
        raise UsageError("timeout must be > 0 seconds or None")
    if max_attempts is None and timeout is None:
        max_attempts = _DEFAULT_ATTEMPTS
    deadline = None if timeout is None else clock() + timeout
    draw = (rng or random).uniform
    attempt = 0
    while True:
        attempt += 1
        try:
            return await op()
        except RPCError as exc:
            if not is_retryable(exc) or (max_attempts is not None and attempt >= max_attempts):
                raise
            delay = draw(0.0, min(max_delay, initial_delay * 2 ** (attempt - 1)))
            if deadline is not None and clock() + delay >= deadline:
                raise
            logger.debug("codex overloaded (attempt %d); retrying in %.3fs", attempt, delay)
        await sleep(delay)


async def request(conn: Any, method: str, params: Any, *, timeout: float | None) -> Any:  # noqa: ASYNC109
    """``conn.request(method, params)`` with overload refusals retried within ``timeout`` in all (each
    attempt gets the time that is left). Raises what ``Connection.request`` raises."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout

    async def attempt() -> Any:
        left = None if deadline is None else deadline - loop.time()
        if left is not None and left <= 0:
            raise RequestTimeout(method, timeout or 0.0)
        return await conn.request(method, params, timeout=left)

    return await retry_on_overload(attempt, timeout=timeout)
