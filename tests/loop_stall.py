"""The event loop's longest stall while something runs on it: a 1 ms ticker beside the awaited work.

Measured on the loop (issue 30, item 8): not where a call was made, but how long every other task on
that loop waited. Two numbers per run:

* ``wall``: the longest wait between two ticks, as a session on the loop sees it;
* ``busy``: of each wait, the part this process spent running (its CPU time, all threads, capped at the
  wait), the longest. A stall the judge causes is work of this process -- the loop's own, or another
  thread holding the GIL -- so it shows in both; a stall the machine's load causes (this process not
  scheduled at all, as on a 2-core machine shared by a dozen test runs) shows only in ``wall``.

``held`` accepts a set of runs when one of them stayed under the bound on the wall clock, or when none
of them kept the loop busy that long: so a loaded machine cannot fail it, and a judge that holds the
loop cannot pass it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

#: No request may hold the loop longer than this (issue 30, "The judge's own safety").
BOUND = 0.050


@dataclass(frozen=True)
class Stall:
    wall: float
    busy: float

    def __str__(self) -> str:
        return f"{self.wall * 1000:.1f} ms ({self.busy * 1000:.1f} ms busy)"


async def ticked(work: Callable[[], Awaitable[T]]) -> tuple[T, Stall]:
    """``work()``'s result, and the longest the 1 ms ticker on this loop waited between two ticks."""
    wall = busy = 0.0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal wall, busy
        last, last_cpu = time.perf_counter(), time.process_time()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now, cpu = time.perf_counter(), time.process_time()
            wall = max(wall, now - last)
            busy = max(busy, min(now - last, cpu - last_cpu))
            last, last_cpu = now, cpu

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.005)
    try:
        result = await work()
    finally:
        done.set()
        await task
    return result, Stall(wall, busy)


async def best_of(work: Callable[[], Awaitable[T]], tries: int = 3) -> tuple[T, list[Stall]]:
    """``work()``'s last result and the stalls of up to ``tries`` runs, stopping at the first whose
    wall-clock stall is under ``BOUND``."""
    stalls: list[Stall] = []
    while True:
        result, stall = await ticked(work)
        stalls.append(stall)
        if stall.wall < BOUND or len(stalls) >= tries:
            return result, stalls


def held(stalls: list[Stall]) -> bool:
    """Did the loop stay free (see the module docstring)?"""
    return any(stall.wall < BOUND for stall in stalls) or all(stall.busy < BOUND for stall in stalls)


def shown(stalls: list[Stall]) -> list[str]:
    return [str(stall) for stall in stalls]
