from __future__ import annotations

import asyncio
import logging

import pytest

from agent_fleet._provider.tasks import BackgroundTasks
from agent_fleet.errors import TransportError

log = logging.getLogger("test_tasks")


async def test_unexpected_failures_are_logged_expected_ones_not(caplog: pytest.LogCaptureFixture) -> None:
    async def boom() -> None:
        raise RuntimeError("bug")

    async def gone() -> None:
        raise TransportError("peer went away")

    tasks = BackgroundTasks(log)
    await asyncio.wait([tasks.spawn(boom(), "boom"), tasks.spawn(gone(), "gone")])
    await asyncio.sleep(0)  # done callbacks
    messages = [r.getMessage() for r in caplog.records if r.name == "test_tasks"]
    assert messages == ["background task boom failed"]


async def test_close_waits_out_the_grace_then_cancels() -> None:
    finished: list[str] = []

    async def quick() -> None:
        await asyncio.sleep(0.01)
        finished.append("quick")

    async def stuck() -> None:
        await asyncio.Event().wait()

    tasks = BackgroundTasks(log)
    held = [tasks.spawn(quick(), "quick"), tasks.spawn(stuck(), "stuck")]
    await tasks.close(grace=0.2)
    assert finished == ["quick"]
    assert held[1].cancelled()


async def test_close_without_grace_cancels_at_once() -> None:
    tasks = BackgroundTasks(log)
    task = tasks.spawn(asyncio.sleep(10), "sleep")
    await tasks.close()
    assert task.cancelled()
