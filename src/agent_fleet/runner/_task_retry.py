"""What a task run does between turns: pace before a turn, retry a failed one (the usual backoff, or
uncounted while the batch waits out a model outage), end a turn the model went silent in, and let go of
the session at the end. A part of ``runner.task``'s ``_TaskRun``, kept in a room of its own."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from typing import Any

from agent_fleet.contract import Handle, Provider
from agent_fleet.events import Error
from agent_fleet.runner._outage import DEFAULT_MODEL_TIMEOUT, ModelOutage, end_turn
from agent_fleet.runner._pace import pause_before_turn
from agent_fleet.runner._retry import retry_backoff, retry_hint
from agent_fleet.runner._task_types import Task, TaskStatus

__all__ = ["TaskRetries"]

_RELEASE_TIMEOUT = 10.0  # seconds for archiving a finished session (best effort)


class TaskRetries:
    """Mixed into ``runner.task._TaskRun`` (which sets these attributes)."""

    task: Task
    provider: Provider | None
    session_id: str | None
    status: TaskStatus
    outage: ModelOutage | None
    stopped_for_outage: bool
    _ending: set[asyncio.Task[bool]]

    def note(self, subtype: str, /, **data: Any) -> None:
        raise NotImplementedError

    async def _pace(self, provider: Provider) -> None:
        """Wait before a turn while the provider says a rate limit is near (see ``runner._pace``)."""
        wait = pause_before_turn(provider.rate_limits, time.time())
        if wait > 0:
            limits = provider.rate_limits
            self.note("rate_limited", used=limits.used_percent if limits else None, wait=round(wait, 3))
            await asyncio.sleep(wait)

    async def _release(self, provider: Provider, session_id: str | None) -> None:
        """Let go of a finished session on a shared provider (``Provider.archive_session``), so a
        long-lived provider (a batch's app-server, a Ray node's, the daemon's) holds memory for its
        live sessions only; ``provider.resume`` brings an archived session back. Not when the task is
        stopped (a stop stays quick, and the session is resumed next). Best effort: a provider that
        cannot archive, or a failure, changes nothing."""
        if provider is not self.provider or session_id is None or self.status == "cancelled":
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(provider.archive_session(session_id), _RELEASE_TIMEOUT)

    def _retry_delay(self, provider: Provider, error: Error, attempt: int) -> tuple[float, float | None]:
        """Seconds to wait before retry ``attempt``, and the provider's hint (see ``runner._retry``)."""
        task = self.task
        hint = retry_hint(error, provider.rate_limits, time.time())
        delay = retry_backoff(
            attempt,
            base=task.retry_delay,
            cap=task.retry_max_delay,
            hint=hint,
            hint_cap=task.retry_hint_max_delay,
        )
        return delay, hint

    async def _retry(
        self,
        provider: Provider,
        handle: Handle,
        error: Error,
        prompt: str,
        attempt: int,
        delay: float,
        hint: float | None,
    ) -> Handle:
        """Wait ``delay``, then run ``prompt`` again; returns the handle the retry runs on."""
        self.note(
            "retry",
            attempt=attempt,
            max_attempts=self.task.retries,
            delay=round(delay, 3),
            code=error.code,
            message=error.message,
            **({"hint": round(hint, 3)} if hint is not None else {}),
        )
        await asyncio.sleep(delay)
        if self._ending:  # the silent turn is still being ended: know how before going on
            await asyncio.wait(list(self._ending))
        if error.code == "app_server_crashed" or self.stopped_for_outage:
            assert self.session_id is not None
            self.stopped_for_outage = False
            with contextlib.suppress(Exception):
                await handle.stop()
            return await provider.resume(self.session_id, replace(self.task.spec, prompt=prompt))
        await handle.send(prompt)
        return handle

    def _end_silent_turn(self, handle: Handle) -> None:
        """The model made no progress for ``model_timeout``: end the turn (see ``runner._outage``)."""

        async def end() -> bool:
            self.stopped_for_outage = await end_turn(handle)
            return self.stopped_for_outage

        ending = asyncio.get_running_loop().create_task(end(), name=f"silent:{self.task.id}")
        self._ending.add(ending)
        ending.add_done_callback(self._ending.discard)

    async def _outage_retry(self, error: Error) -> bool:
        """True when the batch waits out a model outage and this turn runs again, uncounted."""
        if self.outage is None or error.code != "connection_failed":
            return False
        cause = str(error.data.get("cause") or error.message)
        return await self.outage.hit(
            self.task.id, cause, settle=self.task.model_timeout or DEFAULT_MODEL_TIMEOUT
        )
