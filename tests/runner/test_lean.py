"""Lean transcripts: fragments written as their message, diff snapshots once per turn."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_fleet.events import AssistantMessage, Diff, Error, Result, System, TextDelta, ToolUse
from agent_fleet.runner import Redactor, TaskEvent, TranscriptWriter


def _ev(event: Any, task: str = "t", source: str = "agent") -> TaskEvent:
    return TaskEvent(task_id=task, source=source, event=event)  # type: ignore[arg-type]


def _diff(text: str) -> Diff:
    return Diff(diff=text, turn_id="turn")


def _write(tmp_path: Path, events: list[Any], **kw: Any) -> list[dict[str, Any]]:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, redactor=Redactor({}), **kw) as writer:
        for event in events:
            writer.write(event if isinstance(event, TaskEvent) else _ev(event))
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_deltas_become_the_message_they_build(tmp_path: Path) -> None:
    words = [f"w{i} " for i in range(1000)]
    text = "".join(words)
    events = [*(TextDelta(text=w, item_id="m1") for w in words), AssistantMessage(text=text, item_id="m1")]
    records = _write(tmp_path, [*events, Result(session_id="s", text=text)])
    assert [r["type"] for r in records] == ["AssistantMessage", "Result"]
    assert records[0]["text"] == text and records[0]["deltas"] == 1000
    # The result's text is the message's: written once.
    assert records[1]["text"] == "" and records[1]["text_is_last_message"] is True


def test_a_message_differing_from_its_fragments_keeps_both(tmp_path: Path) -> None:
    records = _write(
        tmp_path,
        [
            TextDelta(text="a", item_id="m"),
            TextDelta(text="b", item_id="m"),
            AssistantMessage(text="abc", item_id="m"),
        ],
    )
    assert [(r["type"], r["text"], r.get("deltas")) for r in records] == [
        ("TextDelta", "ab", 2),
        ("AssistantMessage", "abc", 2),
    ]


def test_fragments_no_message_completes_are_written_before_the_next_event_and_at_close(
    tmp_path: Path,
) -> None:
    records = _write(
        tmp_path,
        [
            TextDelta(text="thinking ", item_id=None),
            TextDelta(text="aloud", item_id=None),
            ToolUse(id="1", name="shell", input={"command": "ls"}),
            TextDelta(text="cut ", item_id="m2"),
            TextDelta(text="off", item_id="m2"),
        ],
    )
    assert [(r["type"], r.get("text"), r.get("deltas")) for r in records] == [
        ("TextDelta", "thinking aloud", 2),
        ("ToolUse", None, None),
        ("TextDelta", "cut off", 2),
    ]


def test_fragments_of_different_tasks_and_sources_do_not_mix(tmp_path: Path) -> None:
    records = _write(
        tmp_path,
        [
            _ev(TextDelta(text="A", item_id="m"), task="a"),
            _ev(TextDelta(text="B", item_id="m"), task="b"),
            _ev(TextDelta(text="R", item_id="m"), source="review"),
            _ev(AssistantMessage(text="A", item_id="m"), task="a"),
        ],
    )
    by = {(r["task_id"], r["source"], r["type"]): r["text"] for r in records}
    assert by == {
        ("b", "agent", "TextDelta"): "B",
        ("t", "review", "TextDelta"): "R",
        ("a", "agent", "AssistantMessage"): "A",
    }


def test_diff_snapshots_are_written_once_before_the_turn_ends(tmp_path: Path) -> None:
    records = _write(
        tmp_path,
        [
            _diff("diff 1"),
            ToolUse(id="1", name="apply_patch"),
            _diff("diff 1+2"),
            _diff("diff 1+2+3"),
            Result(session_id="s", text="done"),
            System(subtype="runner.gate", data={}),
            _diff("turn 2 diff"),
            Error(code="cancelled", message="stopped"),
        ],
    )
    assert [r["type"] for r in records] == ["ToolUse", "TurnDiff", "Result", "System", "TurnDiff", "Error"]
    assert records[1]["diff"] == "diff 1+2+3" and records[1]["snapshots"] == 3 and "raw" not in records[1]
    assert records[2]["text"] == "done"  # no message preceded it: kept
    assert records[4]["diff"] == "turn 2 diff" and records[4]["snapshots"] == 1


def test_an_unfinished_turn_diff_is_written_at_close(tmp_path: Path) -> None:
    records = _write(tmp_path, [_diff("a"), _diff("ab")])
    assert [(r["type"], r["diff"], r["snapshots"]) for r in records] == [("TurnDiff", "ab", 2)]


def test_raw_deltas_keep_every_event(tmp_path: Path) -> None:
    events = [
        TextDelta(text="a", item_id="m"),
        _diff("d"),
        _diff("d2"),
        AssistantMessage(text="a", item_id="m"),
    ]
    records = _write(tmp_path, events, raw_deltas=True)
    assert [r["type"] for r in records] == ["TextDelta", "Diff", "Diff", "AssistantMessage"]


def test_coalesced_text_is_redacted(tmp_path: Path) -> None:
    secret = "sk-" + "abcdefghijklmnop"
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path, redactor=Redactor({})) as writer:
        for part in ("my key is sk-", "abcdefgh", "ijklmnop ok"):
            writer.write(_ev(TextDelta(text=part, item_id=None)))
    text = path.read_text()
    assert secret not in text and "[REDACTED]" in text
