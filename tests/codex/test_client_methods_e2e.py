"""Client methods against the real codex app-server and the scripted model: fork, compaction, thread
list / read / archive, and a follow-up turn with an output schema and an image."""

from __future__ import annotations

import asyncio
import json
import struct
import zlib
from pathlib import Path

import pytest

from agent_fleet import Compaction, RateLimits, Result, Spec, System, TokenUsage
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.errors import UsageError
from agent_fleet.events import Event
from agent_fleet.testing import Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e  # runs the real binary


def _png() -> bytes:
    """A valid 2x2 RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


async def _collect(handle: object) -> list[Event]:
    return [e async for e in handle.events()]  # type: ignore[attr-defined]


async def test_fork_copies_history_and_is_listed_read_and_archived(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("first answer"), Reply.text("forked answer"))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="remember the word marmalade", cwd=workspace))
        await asyncio.wait_for(handle.wait(), 60)
        fork = await handle.fork()
        assert fork.session_id != handle.session_id
        with pytest.raises(UsageError):
            fork.events()  # no turn runs until send()
        await fork.send("what was the word?")
        result = await asyncio.wait_for(fork.wait(), 60)
        assert result.text == "forked answer" and result.session_id == fork.session_id
        # the fork's request carries the original thread's history
        assert "remember the word marmalade" in " ".join(scripted_model.requests[-1].user_texts())

        read = await provider.read_session(fork.session_id)
        assert read.id == fork.session_id and read.forked_from == handle.session_id
        listed = {s.id for s in await provider.list_sessions()}
        assert {handle.session_id, fork.session_id} <= listed
        await fork.stop()
        await provider.archive_session(fork.session_id)
        assert fork.session_id not in {s.id for s in await provider.list_sessions()}
        assert fork.session_id in {s.id for s in await provider.list_sessions(archived=True)}


async def test_compaction_is_a_turn_with_a_compaction_event(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("long answer"), Reply.text("summary of the conversation"))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="talk", cwd=workspace))
        await asyncio.wait_for(handle.wait(), 60)
        await handle.compact()
        events = await asyncio.wait_for(_collect(handle), 60)
    assert [e for e in events if isinstance(e, Compaction)], events
    assert isinstance(events[-1], Result)


async def test_follow_up_with_an_output_schema_and_an_image(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    image = workspace / "shot.png"
    image.write_bytes(_png())
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    scripted_model.enqueue(
        Reply.text("plain first", usage={"input_tokens": 10, "output_tokens": 5}),
        Reply.text('{"answer": 42}', usage={"input_tokens": 20, "output_tokens": 7}),
    )
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="hi", cwd=workspace))
        first = await asyncio.wait_for(handle.wait(), 60)
        assert first.structured is None
        await handle.send("the answer, as JSON", images=[image], output_schema=schema)
        events = await asyncio.wait_for(_collect(handle), 60)
    result = events[-1]
    assert isinstance(result, Result) and result.structured == {"answer": 42}
    request = scripted_model.requests[-1]
    assert json.dumps(request.body.get("text", {}).get("format", {})).find("answer") >= 0
    assert any(
        part.get("type") == "input_image"
        for item in request.input
        for part in (item.get("content") if isinstance(item.get("content"), list) else [])
    )
    # per-turn usage: the session's total, and this turn's share of it
    assert result.usage is not None and result.usage.total_tokens == 42
    assert result.usage.turn == TokenUsage(input_tokens=20, output_tokens=7, total_tokens=27)
    assert [e for e in events if isinstance(e, TokenUsage)][-1] == result.usage


async def test_notices_between_turns_and_rate_limits_reach_someone(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.responder = lambda request: Reply.text("ok")
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="one", cwd=workspace))
        await asyncio.wait_for(handle.wait(), 60)
        # between turns: codex announces the new name while no turn runs
        await provider.connection.request(
            "thread/name/set", {"threadId": handle.session_id, "name": "renamed"}, timeout=30
        )
        await handle.send("two")
        events = await asyncio.wait_for(_collect(handle), 60)
        # codex reports the account's rate limits after model responses; they are no longer opted out
        async with asyncio.timeout(30):
            async for notice in provider.notices():
                if isinstance(notice, RateLimits):
                    break
        assert provider.rate_limits is not None
    renamed = [e for e in events if isinstance(e, System) and e.subtype == "notice"]
    assert [e.data["method"] for e in renamed] == ["thread/name/updated"]
    assert events.index(renamed[0]) < len(events) - 1 and isinstance(events[-1], Result)
