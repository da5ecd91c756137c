"""Fault injection between the client and the real exec-server: each fault is recovered byte-exact with
the expected number of ``process/read`` calls (see ``_proxy.py`` for the proxy)."""

from __future__ import annotations

import asyncio
import base64
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent_fleet.errors import ConnectionClosed
from agent_fleet.execserver import ExecServerClient

from ._proxy import DROP_CONNECTION, FaultProxy, Later, nth

pytestmark = pytest.mark.e2e  # runs the real binary

LINES = "for i in 1 2 3 4 5 6; do echo line$i; sleep 0.02; done; echo tail >&2; exit 5"
EXPECTED = b"".join(b"line%d\n" % i for i in range(1, 7))


@pytest.fixture
async def proxy(ws_url: str) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(ws_url) as p:
        yield p


def _client(proxy: FaultProxy, **options: Any) -> Any:
    return ExecServerClient.connect(proxy.url, **options)


async def _check_lines(client: ExecServerClient) -> None:
    result = await asyncio.wait_for(client.run(["sh", "-c", LINES]), 20)
    assert (result.exit_code, result.stdout, result.stderr) == (5, EXPECTED, b"tail\n")
    assert not result.truncated


async def test_through_the_proxy_nothing_is_read(proxy: FaultProxy) -> None:
    async with _client(proxy) as client:
        await _check_lines(client)
        assert client.stats.read_calls == 0 and proxy.requests["process/read"] == 0


async def test_dropped_output_costs_one_read(proxy: FaultProxy) -> None:
    dropped = nth("process/output", 2)
    proxy.rule = lambda m: [] if dropped(m) else [m]
    async with _client(proxy) as client:
        await _check_lines(client)
        assert client.stats.read_calls == 1 and proxy.requests["process/read"] == 1


async def test_dropped_exit_costs_one_read(proxy: FaultProxy) -> None:
    proxy.rule = lambda m: [] if m.get("method") == "process/exited" else [m]
    async with _client(proxy) as client:
        await _check_lines(client)
        assert client.stats.read_calls == 1


async def test_dropped_close_is_found_by_the_stall_timer(proxy: FaultProxy) -> None:
    proxy.rule = lambda m: [] if m.get("method") == "process/closed" else [m]
    async with _client(proxy, stall_timeout=0.2) as client:
        await _check_lines(client)
        assert client.stats.read_calls == 1


async def test_legacy_exit_without_sandbox_denied_costs_one_read_each(proxy: FaultProxy) -> None:
    def legacy(msg: dict[str, Any]) -> list[Any]:
        if msg.get("method") == "process/exited":
            msg = copy.deepcopy(msg)
            del msg["params"]["sandboxDenied"]
        elif isinstance(msg.get("result"), dict) and "sandboxDenied" in msg["result"]:
            msg = copy.deepcopy(msg)
            msg["result"]["sandboxDenied"] = True  # the read is where the denial state comes from
        return [msg]

    proxy.rule = legacy
    async with _client(proxy) as client:
        for i in range(3):
            result = await asyncio.wait_for(client.run(["sh", "-c", f"echo {i}; exit 1"]), 20)
            assert (result.exit_code, result.stdout, result.sandbox_denied) == (1, f"{i}\n".encode(), True)
        assert client.stats.read_calls == 3


async def test_reordered_pair_heals_without_a_read(proxy: FaultProxy) -> None:
    held: list[dict[str, Any]] = []
    first, second = nth("process/output", 1), nth("process/output", 2)

    def swap(msg: dict[str, Any]) -> list[Any]:
        if first(msg):
            held.append(msg)
            return []
        if second(msg):
            return [msg, *held]
        return [msg]

    proxy.rule = swap
    # A generous grace: this is about healing a reorder, not about how long a hole may wait (the
    # second chunk can trail the first by more than the 50 ms default on a loaded machine).
    async with _client(proxy, gap_grace=5.0) as client:
        await _check_lines(client)
        assert client.stats.read_calls == 0


async def test_late_event_after_the_grace_costs_one_read_and_no_duplicate(proxy: FaultProxy) -> None:
    late = nth("process/output", 3)
    proxy.rule = lambda m: [Later(0.5, m)] if late(m) else [m]
    async with _client(proxy, gap_grace=0.05) as client:
        proc = await client.start(["sh", "-c", LINES])
        result = await asyncio.wait_for(proc.wait(), 20)
        assert result.stdout == EXPECTED and result.exit_code == 5
        await asyncio.sleep(0.6)  # the late copy arrives after completion and is ignored
        assert client.stats.read_calls == 1


async def test_evicted_output_is_reported_truncated(proxy: FaultProxy) -> None:
    # 3 MB of output; the 3rd chunk is dropped and only read for after 1.5 s, when the server's
    # 1 MiB retained window has long moved past it: recovery must say so instead of pretending.
    lost: list[bytes] = []
    drop = nth("process/output", 3)

    def rule(msg: dict[str, Any]) -> list[Any]:
        if drop(msg):
            lost.append(base64.b64decode(msg["params"]["chunk"]))
            return []
        return [msg]

    proxy.rule = rule
    async with _client(proxy, gap_grace=1.5) as client:
        result = await asyncio.wait_for(
            client.run(["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a"]), 30
        )
        assert result.truncated and result.exit_code == 0
        assert result.stdout == b"a" * (3_000_000 - len(lost[0]))  # everything else, once
        assert client.stats.read_calls == 1


async def test_unreadable_notification_triggers_a_read(proxy: FaultProxy) -> None:
    garbled = nth("process/output", 2)
    proxy.rule = lambda m: ["{not json"] if garbled(m) else [m]
    async with _client(proxy) as client:
        await _check_lines(client)
        assert client.stats.read_calls == 1


async def test_dropped_connection_recovers_every_live_process(proxy: FaultProxy) -> None:
    starts = 0
    dropped = False

    def rule(msg: dict[str, Any]) -> list[Any]:
        nonlocal starts, dropped
        if isinstance(msg.get("result"), dict) and "sandboxType" in msg["result"]:
            starts += 1  # a process/start answer
        if starts == 2 and not dropped and msg.get("method") == "process/output":
            dropped = True
            return [msg, DROP_CONNECTION]
        return [msg]

    proxy.rule = rule
    slow = "for i in 1 2 3 4 5 6 7 8 9 10; do echo line$i; sleep 0.05; done; echo tail >&2; exit 5"
    async with _client(proxy) as client:
        a = await client.start(["sh", "-c", slow])
        b = await client.start(["sh", "-c", "sleep 0.8; echo b-done"])
        ra, rb = await asyncio.wait_for(asyncio.gather(a.wait(), b.wait()), 20)
        assert (ra.exit_code, ra.stdout, ra.stderr) == (
            5,
            b"".join(b"line%d\n" % i for i in range(1, 11)),
            b"tail\n",
        )
        assert (rb.exit_code, rb.stdout) == (0, b"b-done\n")
        stats = client.stats
        assert dropped and stats.reconnects == 1 and proxy.connections == 2
        assert stats.read_calls == 2  # one recovery read per live process
        assert stats.requests["initialize"] == 2
        await _check_lines(client)  # the resumed session keeps working, with no further reads
        assert client.stats.read_calls == 2


async def test_exit_while_disconnected_recovers_exit_and_sandbox_state(proxy: FaultProxy) -> None:
    drop = nth("process/output", 2)  # by then the process/start answer has certainly passed
    reconnected = False

    def rule(msg: dict[str, Any]) -> list[Any]:
        nonlocal reconnected
        if drop(msg):
            proxy.refuse(0.6)  # stay away until the process has exited
            return [msg, DROP_CONNECTION]
        if reconnected and isinstance(msg.get("result"), dict) and "sandboxDenied" in msg["result"]:
            msg = copy.deepcopy(msg)
            msg["result"]["sandboxDenied"] = True
        if isinstance(msg.get("result"), dict) and "sessionId" in msg["result"] and proxy.connections > 1:
            reconnected = True
        return [msg]

    proxy.rule = rule
    async with _client(proxy) as client:
        proc = await client.start(["sh", "-c", "echo 1; sleep 0.1; echo 2; sleep 0.1; echo 3; exit 7"])
        result = await asyncio.wait_for(proc.wait(), 20)
        assert (result.exit_code, result.stdout, result.sandbox_denied) == (7, b"1\n2\n3\n", True)
        assert client.stats.read_calls == 1 and client.stats.reconnects == 1


async def test_unknown_session_on_reconnect_fails_processes_clearly(proxy: FaultProxy) -> None:
    drop = nth("process/output", 2)
    proxy.rule = lambda m: [m, DROP_CONNECTION] if drop(m) else [m]

    def forget_session(msg: dict[str, Any]) -> dict[str, Any]:
        if msg.get("method") == "initialize" and "resumeSessionId" in msg.get("params", {}):
            msg = copy.deepcopy(msg)
            msg["params"]["resumeSessionId"] = "no-such-session"
        return msg

    proxy.client_rule = forget_session
    async with _client(proxy) as client:
        proc = await client.start(["sh", "-c", LINES])
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(proc.wait(), 20)
        assert "resume" in str(info.value)
        with pytest.raises(ConnectionClosed):
            await client.run(["true"])
