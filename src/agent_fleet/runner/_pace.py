"""Slowing a task down before it hits its provider's rate limit.

Before each turn the runner reads ``Provider.rate_limits``; when the fullest window is at or above
``SLOW_DOWN_AT`` percent (or a limit was reached) it waits before starting the turn: until the window
resets when that is known, capped, so a fleet stops piling turns onto an account that is about to
refuse them rather than failing them one by one.
"""

from __future__ import annotations

from typing import Final

from agent_fleet.events import RateLimits

__all__ = ["MAX_PAUSE", "NEAR_PAUSE", "SLOW_DOWN_AT", "pause_before_turn"]

SLOW_DOWN_AT: Final = 90.0  # percent of the fullest window
NEAR_PAUSE: Final = 30.0  # seconds, at most, while a limit is near
MAX_PAUSE: Final = 300.0  # seconds, at most, once a limit is reached


def pause_before_turn(limits: RateLimits | None, now: float) -> float:
    """Seconds to wait before the next turn (0: go). ``now`` is epoch seconds, like ``resets_at``."""
    if limits is None:
        return 0.0
    used = limits.used_percent
    if not limits.reached and (used is None or used < SLOW_DOWN_AT):
        return 0.0
    cap = MAX_PAUSE if limits.reached or (used is not None and used >= 100.0) else NEAR_PAUSE
    if limits.resets_at is None:
        return cap
    return max(0.0, min(cap, limits.resets_at - now))
