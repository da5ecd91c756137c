"""An idle watchdog for one turn: fires once when the turn has shown no sign of life for ``limit`` s.

Theory of operation: the event path must not pay for a timer per event, so the watchdog does not
reset on each event. A producer marks activity with ``poke()`` (one attribute store); a timer checks
every ``limit / 4`` seconds whether anything was marked (or ``busy()`` says the turn is legitimately
quiet, e.g. a command or an approval is in progress) and fires ``on_idle`` once the last sign of life
is ``limit`` seconds old. So a stall is detected between ``limit`` and ``1.25 * limit`` seconds
after the last event. ``cancel()`` is idempotent; the watchdog never fires after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["IdleWatchdog"]


def _never_busy() -> bool:
    return False


class IdleWatchdog:
    __slots__ = ("_busy", "_last", "_limit", "_loop", "_on_idle", "_step", "_timer", "seen")

    def __init__(
        self, limit: float, on_idle: Callable[[], object], *, busy: Callable[[], bool] = _never_busy
    ) -> None:
        if not limit > 0:
            raise ValueError(f"the idle limit must be positive, not {limit!r}")
        self.seen = False
        self._limit = limit
        self._step = limit / 4
        self._on_idle = on_idle
        self._busy = busy
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(self._step, self._check)

    @property
    def limit(self) -> float:
        return self._limit

    def poke(self) -> None:
        """Mark activity (producers may also set ``seen = True`` directly on a hot path)."""
        self.seen = True

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        now = self._loop.time()
        if self.seen or self._busy():
            self.seen = False
            self._last = now
        elif now - self._last >= self._limit:
            self._timer = None
            self._on_idle()
            return
        wait = min(self._step, self._last + self._limit - now)
        self._timer = self._loop.call_later(max(wait, 0.001), self._check)
