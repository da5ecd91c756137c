"""Redaction: every secret shape of ``secrets_corpus`` goes, every look-alike stays, on every write path."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from agent_fleet import AssistantMessage, System, TextDelta, ToolResult, ToolUse
from agent_fleet._redact import REDACTED, FragmentRedactor, Redactor
from agent_fleet.runner import TaskEvent, TaskResult, TranscriptWriter
from agent_fleet.runner.batch import BatchEntry, BatchResult
from agent_fleet.runner.gate import GateCheck, GateResult

from .secrets_corpus import LOOKALIKES, SECRETS


@pytest.mark.parametrize("name", list(SECRETS))
def test_each_shape_is_redacted_and_its_context_kept(name: str) -> None:
    text, secret = SECRETS[name]
    out = Redactor({}).text(text)
    assert secret not in out and REDACTED in out, out
    # Only the secret goes: what is left is the text around it (header names, flags, URLs...).
    assert len(out) < len(text) + len(REDACTED)


@pytest.mark.parametrize("text", LOOKALIKES)
def test_look_alikes_are_untouched(text: str) -> None:
    assert Redactor({}).text(text) == text


def test_env_values_are_redacted_whatever_their_shape() -> None:
    r = Redactor({"MY_SERVICE_TOKEN": "plain-words-here", "PATH": "/usr/bin", "SHORT_KEY": "abc"})
    assert r.text("x plain-words-here y /usr/bin abc") == f"x {REDACTED} y /usr/bin abc"


def test_a_secret_in_a_short_text_is_found() -> None:
    """The short-text gate must not let a short secret through (a streamed delta can hold one)."""
    r = Redactor({})
    assert r.text("ghp_" + "a1" * 18) == REDACTED
    assert r.text("pwd=hunter22") == f"pwd={REDACTED}"


def _events() -> list[TaskEvent]:
    every = "\n".join(text for text, _ in SECRETS.values())
    looks = "\n".join(LOOKALIKES)
    events = [
        ToolUse(id="1", name="shell", input={"command": every}),
        ToolResult(id="1", output=looks + "\n" + every),
        AssistantMessage(text=looks + "\n" + every),  # a cut-off PEM block runs to the end
        System(subtype="runner.gate_finished", data={"output": every, "list": [every], "ok": looks}),
        TextDelta(text=SECRETS["github_ghp"][0]),
    ]
    return [TaskEvent(task_id="t1", source="agent", event=e) for e in events]


def _assert_clean(text: str) -> None:
    for name, (_, secret) in SECRETS.items():
        assert secret not in text, name


def test_the_transcript_writer_redacts_every_shape(tmp_path: Path) -> None:
    with TranscriptWriter(tmp_path / "t.jsonl", redactor=Redactor({})) as writer:
        for event in _events():
            writer.write(event)
    raw = (tmp_path / "t.jsonl").read_text()
    records = [json.loads(line) for line in raw.splitlines()]
    _assert_clean(raw)
    _assert_clean(json.dumps(records, ensure_ascii=False))  # also after JSON unescaping
    output = records[1]["output"]
    assert all(look in output for look in LOOKALIKES)
    assert all(look in records[2]["text"] for look in LOOKALIKES)
    assert records[3]["data"]["ok"] == "\n".join(LOOKALIKES)


def test_the_json_stream_redacts_every_shape() -> None:
    from agent_fleet.cli._view import Progress

    out = io.StringIO()
    progress = Progress(Console(file=io.StringIO()), json_output=True, batch=True, out=out)
    for event in _events():
        progress.on_event(event)
    _assert_clean(out.getvalue())
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert all(look in records[1]["output"] for look in LOOKALIKES)


def test_the_live_view_redacts_commands() -> None:
    from agent_fleet.cli._view import Progress

    screen = io.StringIO()
    progress = Progress(Console(file=screen, width=200), json_output=False, batch=False)
    for event in _events():
        progress.on_event(event)
    Console(file=screen, width=200).print(progress.render())
    _assert_clean(screen.getvalue())
    # Not even a token's head (a look-alike naming the prefix, "ghp_ tokens are...", may be shown).
    assert re.search(r"ghp_[A-Za-z0-9]", screen.getvalue()) is None


def test_the_batch_summary_redacts_every_shape() -> None:
    every = "\n".join(text for text, _ in SECRETS.values())
    check = GateCheck(name="command", passed=False, detail=every, output=every, exit_code=1)
    result = TaskResult(task_id="t1", status="failed", reason=every, gate=GateResult(checks=(check,)))
    batch = BatchResult(entries=(BatchEntry(result=result),), duration=1.0, stopped=every)
    text = json.dumps(batch.to_dict(), ensure_ascii=False)
    _assert_clean(text)
    _assert_clean(json.dumps(result.to_dict(), ensure_ascii=False))
    looks = TaskResult(task_id="t2", status="failed", reason="\n".join(LOOKALIKES))
    assert looks.to_dict()["reason"] == "\n".join(LOOKALIKES)


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("size", [1, 3, 7, 64])
def test_a_secret_split_over_fragments_is_redacted(size: int) -> None:
    """Streamed deltas: neither the secret nor its context need to arrive in one piece."""
    fragments = FragmentRedactor(Redactor({}))
    for name, (text, secret) in SECRETS.items():
        out = "".join(fragments.feed(name, chunk) for chunk in _chunks(text + "\nmore text\n", size))
        out += fragments.flush(name)
        assert secret not in out and REDACTED in out, (name, out)
        assert out.endswith("\nmore text\n") or name == "pem_cut"  # a cut-off key block runs to the end


@pytest.mark.parametrize("size", [1, 5])
def test_look_alikes_stream_through_unchanged(size: int) -> None:
    fragments = FragmentRedactor(Redactor({}))
    text = "\n".join(LOOKALIKES) + "\n"
    out = "".join(fragments.feed("k", chunk) for chunk in _chunks(text, size)) + fragments.flush("k")
    assert out == text


def test_fragments_are_released_a_line_at_a_time() -> None:
    fragments = FragmentRedactor(Redactor({}))
    assert fragments.feed("k", "first li") == ""
    assert fragments.feed("k", "ne\nsecond") == "first line\n"
    assert fragments.flush("k") == "second"


def test_deltas_in_the_transcript_and_the_json_stream_are_redacted_as_a_whole(tmp_path: Path) -> None:
    from agent_fleet.cli._view import Progress

    every = "\n".join(text for text, _ in SECRETS.values())
    looks = "\n".join(LOOKALIKES)
    stream = [
        TaskEvent(task_id="t1", source="agent", event=TextDelta(text=c, item_id="m"))
        for c in _chunks(looks + "\n" + every, 3)
    ]
    stream.append(
        TaskEvent(
            task_id="t1", source="agent", event=AssistantMessage(text=looks + "\n" + every, item_id="m")
        )
    )
    out = io.StringIO()
    progress = Progress(Console(file=io.StringIO()), json_output=True, batch=True, out=out)
    with TranscriptWriter(tmp_path / "t.jsonl", redactor=Redactor({})) as writer:
        for event in stream:
            writer.write(event)
            progress.on_event(event)
    # The --json stream: deltas coalesced a line at a time, released before the message.
    raw = out.getvalue()
    _assert_clean(raw)
    records = [json.loads(line) for line in raw.splitlines()]
    deltas = "".join(r["text"] for r in records if r["type"] == "TextDelta")
    assert deltas.startswith(looks) and records[-1]["type"] == "AssistantMessage"
    assert all(r["type"] == "TextDelta" for r in records[:-1])  # released before the message
    # The (lean) transcript: the deltas are written as the message they built, redacted as a whole.
    raw = (tmp_path / "t.jsonl").read_text()
    _assert_clean(raw)
    records = [json.loads(line) for line in raw.splitlines()]
    assert [r["type"] for r in records] == ["AssistantMessage"]
    assert records[0]["text"].startswith(looks) and records[0]["deltas"] == len(stream) - 1
    # A raw transcript keeps delta records, coalesced a line at a time so they are redacted whole too.
    with TranscriptWriter(tmp_path / "raw.jsonl", redactor=Redactor({}), raw_deltas=True) as writer:
        for event in stream:
            writer.write(event)
    raw = (tmp_path / "raw.jsonl").read_text()
    _assert_clean(raw)
    records = [json.loads(line) for line in raw.splitlines()]
    assert "".join(r["text"] for r in records if r["type"] == "TextDelta").startswith(looks)
