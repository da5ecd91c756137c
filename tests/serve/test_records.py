"""The daemon's records as ``RecordEncoder`` and ``DeltaBuffer`` make them: the same JSON the transcript's
plain encoding gives (timestamps to the millisecond as datetime formats them), deltas of one message
joined, each delta of its own message left alone."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.depth import examples

from agent_fleet._redact import Redactor
from agent_fleet.events import Result, TextDelta, ToolUse
from agent_fleet.serve._records import DeltaBuffer, RecordEncoder


@settings(max_examples=examples(500), deadline=None)
@given(at=st.floats(min_value=0, max_value=4e9, allow_nan=False), text=st.text(max_size=40))
def test_a_delta_record_is_the_plain_encoding(at: float, text: str) -> None:
    encoder = RecordEncoder(Redactor())
    record = json.loads(encoder.encode("task-1", TextDelta(text=text, item_id="msg_1"), at))
    assert record == {
        "ts": datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds"),
        "task_id": "task-1",
        "source": "agent",
        "type": "TextDelta",
        "text": text,
        "item_id": "msg_1",
    }


def test_the_head_made_once_a_millisecond_follows_time_and_task() -> None:
    encoder = RecordEncoder(Redactor())
    a = json.loads(encoder.encode("a", TextDelta(text="x"), 1_800_000_000.0004))
    b = json.loads(encoder.encode("b", TextDelta(text="y"), 1_800_000_000.0004))
    c = json.loads(encoder.encode("b", TextDelta(text="z"), 1_800_000_001.5))
    assert (a["task_id"], b["task_id"], c["task_id"]) == ("a", "b", "b")
    assert (a["ts"], c["ts"]) == ("2027-01-15T08:00:00.000+00:00", "2027-01-15T08:00:01.500+00:00")
    assert b["item_id"] is None and "deltas" not in b


def test_the_buffer_joins_a_messages_deltas_and_keeps_the_rest_in_order() -> None:
    buffer = DeltaBuffer()
    tool = ToolUse(id="t", name="shell", input={})
    for event in (
        TextDelta(text="a", item_id="m1"),
        TextDelta(text="b", item_id="m1"),
        TextDelta(text="c", item_id="m2"),
        tool,
        TextDelta(text="d", item_id="m2"),
        TextDelta(text="e", item_id="m2"),
        TextDelta(text="f", item_id="m2"),
        Result(text="done", session_id="s"),
    ):
        buffer.add(event)
    taken = [(e, n) for e, _, n in buffer.take()]
    assert taken == [
        (TextDelta(text="ab", item_id="m1"), 2),
        (TextDelta(text="c", item_id="m2"), 0),
        (tool, 0),
        (TextDelta(text="def", item_id="m2"), 3),
        (Result(text="done", session_id="s"), 0),
    ]
    assert buffer.take() == []
