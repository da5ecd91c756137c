"""The node's outbox hands out every event a task queued, also those queued while a batch was being sent
(the streaming generator suspended at its ``yield``) when the task ends in that window."""

from __future__ import annotations

import asyncio

from agent_fleet import System, TextDelta
from agent_fleet.runner import Redactor
from agent_fleet.runner._ray_node import redact_event
from agent_fleet.runner._ray_stream import Outbox
from agent_fleet.runner._types import TaskEvent, notice


def _names(batches: list[tuple[TaskEvent, ...]]) -> list[str]:
    out = []
    for batch in batches:
        for e in batch:
            out.append(e.event.subtype if isinstance(e.event, System) else type(e.event).__name__)
    return out


async def test_events_queued_while_a_batch_is_sent_are_not_lost_when_the_task_ends_then() -> None:
    outbox = Outbox(Redactor(), redact_event)
    sending = asyncio.Event()  # the consumer is "sending" a batch: the generator is suspended
    sent = asyncio.Event()

    async def task() -> str:
        outbox.put(notice("t", "started"))
        await sending.wait()
        outbox.put(notice("t", "gate"))  # queued while the first batch is on its way
        outbox.put(notice("t", "finished"))
        return "result"

    work = asyncio.get_running_loop().create_task(task())
    batches: list[tuple[TaskEvent, ...]] = []
    async for batch in outbox.batches(work, flush_interval=0):
        batches.append(batch)
        if len(batches) == 1:
            sending.set()
            await work  # the task ends while this batch is still being sent
            sent.set()
    assert sent.is_set()
    assert _names(batches) == ["runner.started", "runner.gate", "runner.finished"]
    assert work.result() == "result"


async def test_a_text_fragment_held_at_the_end_is_handed_out_redacted() -> None:
    outbox = Outbox(Redactor({"NODE_TOKEN": "node-secret-123"}), redact_event)

    async def task() -> None:
        outbox.put(TaskEvent(task_id="t", source="agent", event=TextDelta(text="key node-sec", item_id="i")))
        outbox.put(TaskEvent(task_id="t", source="agent", event=TextDelta(text="ret-123", item_id="i")))

    work = asyncio.get_running_loop().create_task(task())
    text = ""
    async for batch in outbox.batches(work, flush_interval=0):
        text += "".join(e.event.text for e in batch if isinstance(e.event, TextDelta))
    assert text == "key [REDACTED]"


async def test_many_short_tasks_never_lose_their_last_event() -> None:
    """The race as a fleet meets it: every task ends at a random point of the consumer's send."""
    for n in range(200):
        outbox = Outbox(Redactor(), redact_event)

        async def task(n: int = n, outbox: Outbox = outbox) -> None:
            for i in range(n % 7):
                outbox.put(notice("t", f"step{i}"))
                await asyncio.sleep(0)
            outbox.put(notice("t", "finished"))

        work = asyncio.get_running_loop().create_task(task())
        names: list[str] = []
        async for batch in outbox.batches(work, flush_interval=0):
            names += _names([batch])
            for _ in range(n % 3):
                await asyncio.sleep(0)  # the send takes a while
        assert names[-1:] == ["runner.finished"], (n, names)
