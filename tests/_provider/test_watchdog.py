"""IdleWatchdog: fires once after ``limit`` seconds without a poke, never while busy or cancelled."""

from __future__ import annotations

import asyncio

import pytest

from agent_fleet._provider.watchdog import IdleWatchdog


async def test_fires_once_after_the_limit() -> None:
    fired = asyncio.Event()
    calls: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time()

    def on_idle() -> None:
        calls.append(loop.time() - start)
        fired.set()

    IdleWatchdog(0.2, on_idle)
    await asyncio.wait_for(fired.wait(), 5)
    assert 0.2 <= calls[0] < 1.0
    await asyncio.sleep(0.3)  # no second call: the watchdog is spent
    assert len(calls) == 1


async def test_pokes_keep_it_quiet_and_silence_then_fires() -> None:
    fired = asyncio.Event()
    dog = IdleWatchdog(0.2, fired.set)
    for _ in range(8):  # 0.4 s of activity, twice the limit
        dog.poke()
        await asyncio.sleep(0.05)
    assert not fired.is_set()
    await asyncio.wait_for(fired.wait(), 5)


async def test_busy_keeps_it_quiet() -> None:
    fired = asyncio.Event()
    busy = True
    IdleWatchdog(0.1, fired.set, busy=lambda: busy)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.shield(fired.wait()), 0.4)
    busy = False
    await asyncio.wait_for(fired.wait(), 5)


async def test_cancel_stops_it() -> None:
    fired = asyncio.Event()
    dog = IdleWatchdog(0.05, fired.set)
    dog.cancel()
    dog.cancel()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.shield(fired.wait()), 0.3)


async def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        IdleWatchdog(0, lambda: None)
