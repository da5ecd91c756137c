"""When and how soon the runner runs a failed turn again.

A turn that ends with ``Error(retryable=True)`` (rate limited, 5xx, a dropped connection, an
app-server crash with ``restart_on_crash``) is run again up to ``Task.retries`` times, after
``retry_delay * 2**(n-1)`` seconds (capped at ``retry_max_delay``) with +-25 % jitter, or after the
provider's ``data["retry_after"]`` hint when that is longer. Timeouts and cancellations are never
retried: the caller set that limit. codex retries HTTP requests and dropped streams itself first
(``request_max_retries`` / ``stream_max_retries`` of its model provider, 4 and 5 by default); the
runner's retry is the layer above, for what still fails once codex gives up.
"""

from __future__ import annotations

import math
import random
from typing import Any

from agent_fleet.events import Error

__all__ = ["retry_backoff", "should_retry"]


def should_retry(error: Error, attempt: int, retries: int, *, session_id: str | None) -> bool:
    """Whether failed attempt number ``attempt`` (1-based) of a turn gets another try."""
    if not error.retryable or error.code in ("timeout", "cancelled") or attempt > retries:
        return False
    # After a crash the session continues through provider.resume, which needs its id.
    return error.code != "app_server_crashed" or session_id is not None


def retry_backoff(
    attempt: int, *, base: float, cap: float, hint: Any = None, jitter: float | None = None
) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based).

    ``base * 2**(attempt-1)`` capped at ``cap``, times a jitter factor in [0.75, 1.25] (``jitter``
    in [0, 1] picks it; random by default) so a fleet hit by the same outage does not retry in
    lockstep. A provider's ``hint`` (seconds, e.g. Retry-After) wins when longer, up to ``cap``.
    """
    delay: float = min(cap, base * 2 ** (attempt - 1))
    delay *= 0.75 + 0.5 * (random.random() if jitter is None else jitter)
    if isinstance(hint, int | float) and not isinstance(hint, bool) and math.isfinite(hint):
        delay = max(delay, min(float(hint), cap))
    return delay
