"""Model outages on a Ray cluster: one ``ModelOutage`` for the whole batch, kept by the driver.

On a local batch every task reports to the batch's ``ModelOutage`` (``runner._outage``): when every
running task lost the model, the batch pauses (no task starts, no retry is burnt, one task probes) and
it stops, resumable, once the model stayed away for ``--outage-timeout``. On Ray the tasks run on many
nodes, so each attempt gets an ``OutageLink`` on its node instead: what the task reports (it started,
it ended, its turn saw the model, its turn lost the model) travels to the driver as an
``OutageSignal`` in the attempt's stream, in order with its events, and the driver feeds its one
``ModelOutage`` with it. Only a lost model asks for an answer (try the turn again now, uncounted, or
apply the usual retry policy): the link waits until the driver sends it (``NodeRunner.outage_answer``).
So the batch pauses when every running task of the cluster lost the model, as on a local batch.

Imported by the Ray workers: pure asyncio.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["OutageLink", "OutageSignal"]

SignalKind = Literal["enter", "leave", "progress", "hit"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutageSignal:
    """What a task on a node reported (see ``runner._outage.OutageReport``); ``hit`` carries its cause,
    how long it waits for the others (``settle``) and the number its answer names (``seq``)."""

    task_id: str
    kind: SignalKind
    cause: str = ""
    settle: float = 0.0
    seq: int = 0


class OutageLink:
    """An attempt's stand-in for the batch's ``ModelOutage`` on its node: ``send`` puts a signal in the
    attempt's stream (redacted there with the node's secrets: ``cause`` quotes the provider)."""

    def __init__(self, send: Callable[[OutageSignal], None], redact: Callable[[str], str]) -> None:
        self._send = send
        self._redact = redact
        self._seq = 0
        self._waiting: dict[int, asyncio.Future[bool]] = {}

    def enter(self, task_id: str) -> None:
        self._send(OutageSignal(task_id=task_id, kind="enter"))

    def leave(self, task_id: str) -> None:
        self._send(OutageSignal(task_id=task_id, kind="leave"))

    def progress(self, task_id: str) -> None:
        self._send(OutageSignal(task_id=task_id, kind="progress"))

    async def hit(self, task_id: str, cause: str, *, settle: float) -> bool:
        """Tell the driver the turn lost the model and wait for its answer (``ModelOutage.hit``'s)."""
        self._seq += 1
        seq = self._seq
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting[seq] = answer
        try:
            self._send(
                OutageSignal(task_id=task_id, kind="hit", cause=self._redact(cause), settle=settle, seq=seq)
            )
            return await answer
        finally:
            self._waiting.pop(seq, None)

    def answer(self, seq: int, again: bool) -> None:
        """The driver's answer to the ``hit`` numbered ``seq`` (ignored when nobody waits for it)."""
        waiting = self._waiting.get(seq)
        if waiting is not None and not waiting.done():
            waiting.set_result(again)
