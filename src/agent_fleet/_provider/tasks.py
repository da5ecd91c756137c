"""A provider's background tasks (interrupts, approvals, reaping): held, logged, cancelled together."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from agent_fleet.errors import AgentFleetError


class BackgroundTasks:
    """Fire-and-forget tasks kept alive until done (the loop holds tasks only weakly).

    A task that fails with anything but an ``AgentFleetError`` (an expected outcome, e.g. a peer that
    went away) is logged on ``logger``; ``close()`` cancels what is left and waits for it.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            if not isinstance(exc, AgentFleetError):
                self._logger.error("background task %s failed", task.get_name(), exc_info=exc)

    async def close(self, *, grace: float = 0.0) -> None:
        """Give running tasks up to ``grace`` seconds to finish, then cancel the rest and wait."""
        if grace and self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
