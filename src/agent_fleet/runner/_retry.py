"""When and how soon the runner runs a failed turn again.

A turn that ends with ``Error(retryable=True)`` (rate limited, 5xx, a dropped connection, an
app-server crash with ``restart_on_crash``) is run again up to ``Task.retries`` times, after
``retry_delay * 2**(n-1)`` seconds (capped at ``retry_max_delay``) with +-25 % jitter. Timeouts and
cancellations are never retried: the caller set that limit. codex retries HTTP requests and dropped
streams itself first (``request_max_retries`` / ``stream_max_retries`` of its model provider, 4 and 5
by default); the runner's retry is the layer above, for what still fails once codex gives up.

Hints. When the provider says how long to wait (``retry_hint``), the wait is at least that, up to
``Task.retry_hint_max_delay`` (a separate cap: a rate limit's reset is often minutes away, longer than
any sensible backoff). A hint is, in order: ``Error.data["retry_after"]`` (seconds), or
``Error.data["retry_at"]`` (epoch seconds), or, for a ``rate_limited`` error, the reset of the
provider's rate limit when it reports that limit reached (``Provider.rate_limits``). Who gives one:
Claude Code's ``rate_limit_event`` (subscription limits) gives ``retry_at``; codex 0.163 passes none
(its TurnError carries only a message and ``codexErrorInfo``; a 429's ``Retry-After`` header is not
passed on, by the app-server nor by ``codex exec``), and Claude Code with an API key passes none
for a 429 (it retries it itself, ``CLAUDE_CODE_MAX_RETRIES``, honouring the header). A wait that would
end past the task's own ``timeout`` is not started: the turn's error is the task's outcome.
"""

from __future__ import annotations

import math
import random
from typing import Any

from agent_fleet.events import Error, RateLimits

__all__ = ["retry_backoff", "retry_hint", "should_retry"]


def should_retry(error: Error, attempt: int, retries: int, *, session_id: str | None) -> bool:
    """Whether failed attempt number ``attempt`` (1-based) of a turn gets another try."""
    if not error.retryable or error.code in ("timeout", "cancelled") or attempt > retries:
        return False
    # After a crash the session continues through provider.resume, which needs its id.
    return error.code != "app_server_crashed" or session_id is not None


def _seconds(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def retry_hint(error: Error, limits: RateLimits | None, now: float) -> float | None:
    """Seconds the provider asks to wait before the turn is run again (see the module docstring), or
    None when it gives no hint. ``now`` is epoch seconds."""
    after = _seconds(error.data.get("retry_after"))
    if after is not None:
        return max(0.0, after)
    at = _seconds(error.data.get("retry_at"))
    if at is not None:
        return max(0.0, at - now)
    if error.code == "rate_limited" and limits is not None and limits.reached:
        reset = _seconds(limits.resets_at)
        if reset is not None:
            return max(0.0, reset - now)
    return None


def retry_backoff(
    attempt: int,
    *,
    base: float,
    cap: float,
    hint: Any = None,
    hint_cap: float | None = None,
    jitter: float | None = None,
) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based).

    ``base * 2**(attempt-1)`` capped at ``cap``, times a jitter factor in [0.75, 1.25] (``jitter``
    in [0, 1] picks it; random by default) so a fleet hit by the same outage does not retry in
    lockstep. A provider's ``hint`` (seconds, e.g. Retry-After) wins when longer, up to ``hint_cap``
    (default: ``cap``).
    """
    delay: float = min(cap, base * 2 ** (attempt - 1))
    delay *= 0.75 + 0.5 * (random.random() if jitter is None else jitter)
    seconds = _seconds(hint)
    if seconds is not None:
        delay = max(delay, min(seconds, cap if hint_cap is None else hint_cap))
    return delay
