"""Every row of the protocol coverage table is what the pinned binary does (issue 32).

One app-server, driven over raw JSON-RPC with the provider's own ``initialize`` (the same opt-outs)
through a turn with a command (approved), a file change and a message, a rename, a goal set and
cleared, and a compaction. Every notification it sends is recorded, then held to the table: it is in
the table; an opted-out method never comes; and what agent-fleet's mapper makes of the real params is
the row's kind (dropped: nothing; notice: ``System``; typed: typed events, items by the item table).
Rows that say a method comes in these runs (``thread/started``, the compaction's notifications) are
checked to come; the others are only sent by methods agent-fleet never calls."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import __version__
from agent_fleet.codex import find_codex
from agent_fleet.codex._coverage import DROPPED, ITEM_TYPES, NOTICE, NOTIFICATIONS, OPTED_OUT, TYPED, UNKNOWN
from agent_fleet.codex._notices import NoticeRouter
from agent_fleet.codex.mapping import OPT_OUT_NOTIFICATIONS, TurnMapper
from agent_fleet.events import System, UnknownEvent
from agent_fleet.jsonrpc import Connection, Notification, Request, StreamTransport
from agent_fleet.testing import CodexTestEnv, Reply, ScriptedModelServer, apply_patch, exec_command

pytestmark = pytest.mark.e2e  # runs the real binary

PATCH = "*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n"
#: What these runs must show (the table's claims about them).
EXPECTED = {
    "thread/started",
    "turn/started",
    "turn/completed",
    "item/started",
    "item/completed",
    "item/agentMessage/delta",
    "thread/tokenUsage/updated",
    "turn/diff/updated",
    "serverRequest/resolved",
    "thread/name/updated",
    "thread/goal/updated",
    "thread/goal/cleared",
}


async def test_every_notification_the_binary_sends_is_what_the_table_says(
    codex_env: CodexTestEnv, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(
        Reply(items=(exec_command("echo covered"), apply_patch(PATCH))),
        Reply.text("done"),
        Reply.text("a summary of the conversation"),
    )
    proc = await asyncio.create_subprocess_exec(
        str(find_codex()),
        "app-server",
        *codex_env.codex_args(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=codex_env.full_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    seen: list[Notification] = []
    turns: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    conn = Connection(StreamTransport(proc.stdout, proc.stdin))

    goal_cleared = asyncio.Event()

    def on_note(msg: Notification) -> None:
        seen.append(msg)
        if msg.method == "turn/completed":
            turns.put_nowait(msg.params)
        elif msg.method == "thread/goal/cleared":
            goal_cleared.set()

    async def on_request(msg: Request) -> None:  # every approval accepted (a trusted scripted turn)
        await conn.respond(msg.id, {"decision": "accept"})

    conn.set_fallback(on_notification=on_note, on_request=on_request)
    try:
        async with conn:
            capabilities = {"experimentalApi": True, "optOutNotificationMethods": list(OPT_OUT_NOTIFICATIONS)}
            client = {"name": "agent-fleet", "version": __version__}
            await conn.request("initialize", {"clientInfo": client, "capabilities": capabilities}, timeout=30)
            await conn.notify("initialized")
            params = {"cwd": str(workspace), "approvalPolicy": "untrusted", "sandbox": "workspace-write"}
            thread = (await conn.request("thread/start", params, timeout=30))["thread"]["id"]
            text = [{"type": "text", "text": "do the work"}]
            await conn.request("turn/start", {"threadId": thread, "input": text}, timeout=30)
            assert (await asyncio.wait_for(turns.get(), 120))["turn"]["status"] == "completed"
            await conn.request("thread/name/set", {"threadId": thread, "name": "covered"}, timeout=30)
            await conn.request("thread/compact/start", {"threadId": thread}, timeout=30)
            assert (await asyncio.wait_for(turns.get(), 120))["turn"]["status"] == "completed"
            # A goal set on an idle thread makes codex start a turn towards it; clearing it interrupts that.
            await conn.request("thread/goal/set", {"threadId": thread, "objective": "cover it"}, timeout=30)
            await conn.request("thread/goal/clear", {"threadId": thread}, timeout=30)
            await asyncio.wait_for(goal_cleared.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()

    methods = {m.method for m in seen}
    assert not methods - NOTIFICATIONS.keys(), "sent, but not in the table"
    assert not methods & set(OPT_OUT_NOTIFICATIONS), "opted out, yet sent"
    assert methods >= EXPECTED, f"the table says these come: {sorted(EXPECTED - methods)}"
    compacted = NOTIFICATIONS["thread/compacted"][1]
    assert ("thread/compacted" in methods) == ("never sent" not in compacted), compacted
    router = NoticeRouter(list)
    for msg in seen:
        kind = NOTIFICATIONS[msg.method][0]
        assert kind != OPTED_OUT
        events = TurnMapper(thread).feed(msg.method, msg.params)
        item = msg.params.get("item") if isinstance(msg.params, dict) else None
        if isinstance(item, dict):
            item_kind = ITEM_TYPES[str(item.get("type"))][0]
            if msg.method == "item/completed" and item_kind == DROPPED:
                assert events == [], (msg.method, item)
            elif msg.method == "item/completed" and item_kind == UNKNOWN:
                assert [type(e) for e in events] == [UnknownEvent], item
            else:
                assert not any(isinstance(e, UnknownEvent) for e in events), item
            continue
        if kind == DROPPED:
            assert events == [], msg.method
            router.route(msg.method, msg.params)  # nor on the provider's notice stream
        elif kind == NOTICE:
            assert events and all(isinstance(e, System) for e in events), msg.method
        elif kind == TYPED:
            assert events and not any(isinstance(e, UnknownEvent) for e in events), msg.method
        else:
            assert kind == UNKNOWN and all(isinstance(e, UnknownEvent) for e in events), msg.method
    posted = [e async for e in _drain(router)]
    assert posted == [], "a dropped notification reached notices()"


async def _drain(router: NoticeRouter) -> Any:
    router.close()
    async for event in router.follow():
        yield event
