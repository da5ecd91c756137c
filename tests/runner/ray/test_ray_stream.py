"""The node's outbox hands out every event a task queued, also those queued while a batch was being sent
(the streaming generator suspended at its ``yield``) when the task ends in that window; and what a task
reports about the model travels in it, in order, to the driver's ``ModelOutage`` (``_ray_outage``)."""

from __future__ import annotations

import asyncio

from agent_fleet import System, TextDelta
from agent_fleet.runner import Redactor
from agent_fleet.runner._ray_node import redact_event
from agent_fleet.runner._ray_outage import OutageLink, OutageSignal
from agent_fleet.runner._ray_stream import Outbox
from agent_fleet.runner._types import TaskEvent, notice


def _names(batches: list[tuple[TaskEvent | OutageSignal, ...]]) -> list[str]:
    out = []
    for batch in batches:
        for e in batch:
            if isinstance(e, OutageSignal):
                out.append(f"outage.{e.kind}")
            else:
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


async def test_what_a_task_reports_about_the_model_reaches_the_driver_in_order_and_a_hit_waits_for_it() -> (
    None
):
    outbox = Outbox(Redactor({"NODE_TOKEN": "node-secret-123"}), redact_event)
    link = OutageLink(outbox.signal, Redactor({"NODE_TOKEN": "node-secret-123"}).text)

    async def task() -> bool:
        link.enter("t")
        outbox.put(notice("t", "started"))
        link.progress("t")
        again = await link.hit("t", "reconnecting with node-secret-123", settle=3.0)
        outbox.put(notice("t", "retry"))
        link.leave("t")
        return again

    work = asyncio.get_running_loop().create_task(task())
    names: list[str] = []
    hits: list[OutageSignal] = []
    async for batch in outbox.batches(work, flush_interval=0):
        names += _names([batch])
        for item in batch:
            if isinstance(item, OutageSignal) and item.kind == "hit":
                hits.append(item)
                assert not work.done()  # the turn waits for the driver's answer
                link.answer(item.seq + 1, False)  # an answer to another hit is ignored
                await asyncio.sleep(0)
                assert not work.done()
                link.answer(item.seq, True)
    assert names == [
        "outage.enter",
        "runner.started",
        "outage.progress",
        "outage.hit",
        "runner.retry",
        "outage.leave",
    ]
    [hit] = hits
    assert (hit.task_id, hit.settle, hit.cause) == ("t", 3.0, "reconnecting with [REDACTED]")
    assert work.result() is True
