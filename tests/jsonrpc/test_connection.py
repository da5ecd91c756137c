"""Connection over real OS pipes against a scripted fake peer (``fake_peer.py``), plus in-memory cases."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.errors import (
    ConnectionClosed,
    RemoteProtocolError,
    RequestTimeout,
    RPCError,
    TransportError,
    UsageError,
)
from agent_fleet.jsonrpc import (
    Connection,
    JsonRpcCore,
    Notification,
    ProtocolError,
    Request,
    StreamTransport,
    param_key,
)

PEER = str(Path(__file__).with_name("fake_peer.py"))
WAIT = 5.0  # generous upper bound for anything that should happen "soon"

Spawn = Callable[..., Awaitable[tuple[Connection, asyncio.subprocess.Process]]]


@pytest.fixture
async def spawn() -> AsyncIterator[Spawn]:
    """Start ``fake_peer.py`` with a script; return an UNSTARTED Connection over its stdin/stdout."""
    started: list[tuple[Connection, asyncio.subprocess.Process]] = []

    async def _spawn(
        script: list[Any], close_timeout: float = 2.0, **kwargs: Any
    ) -> tuple[Connection, asyncio.subprocess.Process]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-S",
            PEER,
            json.dumps(script),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stdin is not None
        conn = Connection(StreamTransport(proc.stdout, proc.stdin, close_timeout=close_timeout), **kwargs)
        started.append((conn, proc))
        return conn, proc

    yield _spawn
    for conn, proc in started:
        await conn.close()
        try:
            await asyncio.wait_for(proc.wait(), 2)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def collect_reports(conn: Connection) -> asyncio.Queue[list[Any]]:
    """Fallback notification handler that queues the peer's ``report`` payloads."""
    reports: asyncio.Queue[list[Any]] = asyncio.Queue()

    def on_notification(n: Notification) -> None:
        if n.method == "report":
            reports.put_nowait(n.params["received"])

    conn.set_fallback(on_notification=on_notification)
    return reports


async def until(predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(WAIT):
        while not predicate():  # noqa: ASYNC110 - polls state that offers nothing to await
            await asyncio.sleep(0.005)


def ok(result: Any) -> list[Any]:
    return ["send", {"id": "$id", "result": result}]


def err(code: int, message: str = "boom") -> list[Any]:
    return ["send", {"id": "$id", "error": {"code": code, "message": message}}]


# -- requests -----------------------------------------------------------------------------------------


async def test_request_response(spawn: Spawn) -> None:
    conn, _ = await spawn([["recv"], ok({"ok": True}), ["report"]])
    reports = collect_reports(conn)
    conn.start()
    assert await conn.request("ping", {"x": 1}, timeout=WAIT) == {"ok": True}
    (sent,) = await asyncio.wait_for(reports.get(), WAIT)
    assert sent == {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": 1}}
    assert conn.requests_sent == {"ping": 1}
    assert conn.bytes_sent == len(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":1}}\n')
    assert conn.bytes_received > 0 and conn.notifications_received == 1


async def test_error_response_raises_rpc_error(spawn: Spawn) -> None:
    conn, _ = await spawn(
        [["recv"], ["send", {"id": "$id", "error": {"code": -32602, "message": "bad", "data": [1]}}]]
    )
    conn.start()
    with pytest.raises(RPCError) as info:
        await conn.request("thread/start", timeout=WAIT)
    assert (info.value.code, info.value.message, info.value.data, info.value.method) == (
        -32602,
        "bad",
        [1],
        "thread/start",
    )


async def test_many_concurrent_requests_do_not_interleave(spawn: Spawn) -> None:
    conn, _ = await spawn([["echo"]], core=JsonRpcCore(emit_version=False))
    conn.start()
    results = await asyncio.wait_for(
        asyncio.gather(*(conn.request("echo", {"n": i, "pad": "x" * (i * 97 % 5000)}) for i in range(300))),
        WAIT,
    )
    assert [r["echo"]["n"] for r in results] == list(range(300))
    assert dict(conn.core.pending) == {}


# -- server requests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("raw_id", [7, "req-7", 0])
async def test_server_request_reply_echoes_raw_id(spawn: Spawn, raw_id: int | str) -> None:
    script = [
        ["send", {"id": raw_id, "method": "item/approve", "params": {"threadId": "t1"}}],
        ["recv"],
        ["report"],
    ]
    conn, _ = await spawn(script, route_key=param_key("threadId"))
    reports = collect_reports(conn)
    seen: list[Request] = []

    async def on_request(req: Request) -> None:
        seen.append(req)
        await conn.respond(req.id, {"decision": "accept"})

    conn.subscribe("t1", on_request=on_request)
    conn.start()
    (reply,) = await asyncio.wait_for(reports.get(), WAIT)
    assert seen == [Request(raw_id, "item/approve", {"threadId": "t1"})]
    assert reply == {"jsonrpc": "2.0", "id": raw_id, "result": {"decision": "accept"}}
    assert type(reply["id"]) is type(raw_id)


async def test_unhandled_server_request_gets_method_not_found(spawn: Spawn) -> None:
    conn, _ = await spawn([["send", {"id": "s1", "method": "x/unknown", "params": {}}], ["recv"], ["report"]])
    reports = collect_reports(conn)  # notifications only: requests have no handler anywhere
    conn.start()
    (reply,) = await asyncio.wait_for(reports.get(), WAIT)
    assert reply["id"] == "s1"
    assert reply["error"]["code"] == -32601


async def test_failing_request_handler_replies_internal_error(spawn: Spawn) -> None:
    conn, _ = await spawn([["send", {"id": 5, "method": "approve"}], ["recv"], ["report"]])
    reports = collect_reports(conn)

    def on_request(req: Request) -> None:
        raise ValueError("handler bug")

    conn.set_fallback(
        on_notification=lambda n: reports.put_nowait(n.params["received"]), on_request=on_request
    )
    conn.start()
    (reply,) = await asyncio.wait_for(reports.get(), WAIT)
    assert (reply["id"], reply["error"]["code"]) == (5, -32603)
    assert not conn.closed


# -- retries ------------------------------------------------------------------------------------------


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def test_retry_transient_errors_then_success(spawn: Spawn) -> None:
    sleep = RecordingSleep()
    script = [["recv"], err(-32603), ["recv"], err(-32603), ["recv"], ok("done")]
    conn, _ = await spawn(script, sleep=sleep)
    conn.start()
    assert await conn.request_with_retry("flaky", timeout=WAIT) == "done"
    assert sleep.delays == [1.0, 2.0]
    assert conn.requests_sent["flaky"] == 3


async def test_retry_gives_up_after_attempts(spawn: Spawn) -> None:
    sleep = RecordingSleep()
    script = [["recv"], err(-32000), ["recv"], err(-32000), ["recv"], err(-32001, "last")]
    conn, _ = await spawn(script, sleep=sleep, retry_delays=[0.5])
    conn.start()
    with pytest.raises(RPCError) as info:
        await conn.request_with_retry("flaky", timeout=WAIT)
    assert (info.value.code, info.value.message) == (-32001, "last")
    assert sleep.delays == [0.5, 0.5]


@pytest.mark.parametrize("code", [-32700, -32600, -32601])
async def test_permanent_errors_are_not_retried(spawn: Spawn, code: int) -> None:
    sleep = RecordingSleep()
    conn, _ = await spawn([["recv"], err(code)], sleep=sleep)
    conn.start()
    with pytest.raises(RPCError) as info:
        await conn.request_with_retry("config/batchWrite", timeout=WAIT)
    assert info.value.code == code
    assert sleep.delays == []
    assert conn.requests_sent["config/batchWrite"] == 1


async def test_timeouts_are_retried(spawn: Spawn) -> None:
    sleep = RecordingSleep()
    protocol_errors: list[ProtocolError] = []
    conn, _ = await spawn(
        [["recv"], ["recv"], ["recv"], ok("third")], sleep=sleep, on_protocol_error=protocol_errors.append
    )
    conn.start()
    assert await conn.request_with_retry("slow", timeout=0.3) == "third"
    assert sleep.delays == [1.0, 2.0]
    assert dict(conn.core.pending) == {}


async def test_a_sent_request_that_timed_out_is_answered_late_to_on_late_response(spawn: Spawn) -> None:
    """Issue 29: under overload a request codex did carry out (a thread started, a turn started) timed
    out here; its answer was logged as a protocol error (unknown_response_id) and the work it started ran
    on with nobody to undo it. A late answer now reaches ``on_late_response`` with the request."""
    protocol_errors: list[ProtocolError] = []
    late: list[tuple[str, Any, Any]] = []
    conn, _ = await spawn(
        [["recv"], ["sleep", 0.3], ok("late")],
        on_protocol_error=protocol_errors.append,
        on_late_response=lambda method, params, msg: late.append((method, params, msg.result)),
    )
    conn.start()
    with pytest.raises(RequestTimeout) as info:
        await conn.request("thread/start", {"cwd": "/w"}, timeout=0.05)
    assert (info.value.method, info.value.timeout) == ("thread/start", 0.05)
    assert isinstance(info.value, TimeoutError)
    assert dict(conn.core.pending) == {}
    await until(lambda: bool(late))
    assert late == [("thread/start", {"cwd": "/w"}, "late")]
    assert protocol_errors == [] and not conn.closed


async def test_a_late_error_answer_and_a_cancelled_request_are_late_too(spawn: Spawn) -> None:
    late: list[tuple[str, Any]] = []
    conn, _ = await spawn(
        [
            ["recv"],
            ["recv"],
            ["sleep", 0.3],
            ["send", {"id": 1, "error": {"code": -1, "message": "no"}}],
            ok("second"),
        ],
        on_late_response=lambda method, params, msg: late.append((method, type(msg).__name__)),
    )
    conn.start()
    with pytest.raises(RequestTimeout):
        await conn.request("first", timeout=0.05)
    task = asyncio.create_task(conn.request("second"))
    await until(lambda: conn.requests_sent["second"] == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: len(late) == 2)
    assert late == [("first", "ErrorResponse"), ("second", "Response")]


async def test_an_unknown_id_is_still_a_protocol_error(spawn: Spawn) -> None:
    protocol_errors: list[ProtocolError] = []
    conn, _ = await spawn([["send", {"id": 77, "result": 1}]], on_protocol_error=protocol_errors.append)
    conn.start()
    await until(lambda: bool(protocol_errors))
    assert protocol_errors[0].kind == "unknown_response_id"


async def test_write_error_is_transport_error_and_retried(spawn: Spawn) -> None:
    sleep = RecordingSleep()
    conn, proc = await spawn([["close_stdin"], ["send", {"method": "ready"}], ["sleep", 3]], sleep=sleep)
    ready = asyncio.Event()
    conn.set_fallback(on_notification=lambda n: ready.set())
    conn.start()
    await asyncio.wait_for(ready.wait(), WAIT)
    with pytest.raises(TransportError) as info:
        await conn.request_with_retry("x", timeout=WAIT)
    assert not isinstance(info.value, ConnectionClosed)
    assert isinstance(info.value.__cause__, OSError)
    assert sleep.delays == [1.0, 2.0]
    assert dict(conn.core.pending) == {}
    assert not conn.closed  # the reader decides when the connection is gone
    proc.kill()


# -- closing ------------------------------------------------------------------------------------------


async def test_close_fails_pending_requests(spawn: Spawn) -> None:
    conn, _ = await spawn([["recv"]])
    causes: list[BaseException | None] = []
    conn.on_close(causes.append)
    conn.start()
    task = asyncio.create_task(conn.request("hang"))
    await until(lambda: bool(conn.core.pending))
    reason = RuntimeError("shutting down")
    await conn.close(reason)
    await conn.close(RuntimeError("ignored"))
    with pytest.raises(ConnectionClosed) as info:
        await task
    assert info.value.cause is reason and info.value.__cause__ is reason
    assert causes == [reason]
    assert conn.closed and conn.close_cause is reason
    with pytest.raises(ConnectionClosed):
        await conn.request("again")
    with pytest.raises(ConnectionClosed):
        await conn.notify("again")


async def test_peer_exit_fails_pending_and_fires_on_close_once(spawn: Spawn) -> None:
    conn, _ = await spawn([["recv"], ["exit", 3]])
    causes: list[BaseException | None] = []
    conn.on_close(causes.append)
    conn.start()
    with pytest.raises(ConnectionClosed) as info:
        await conn.request("doomed", timeout=WAIT)
    cause = info.value.cause
    assert isinstance(cause, ConnectionClosed) and "peer closed" in str(cause)
    await conn.close(RuntimeError("late close is a no-op"))
    assert causes == [cause]
    late: list[BaseException | None] = []
    conn.on_close(late.append)  # registered after close: fires at once
    assert late == [cause]
    assert conn.close_cause is cause


async def test_response_written_just_before_exit_is_delivered(spawn: Spawn) -> None:
    conn, _ = await spawn([["recv"], ok("last words"), ["exit", 0]])
    conn.start()
    assert await conn.request("final", timeout=WAIT) == "last words"
    await until(lambda: conn.closed)


async def test_close_does_not_hang_when_peer_stops_reading(spawn: Spawn) -> None:
    conn, proc = await spawn([["sleep", 3]], close_timeout=0.1)
    conn.start()
    blocked = asyncio.create_task(conn.notify("big", "x" * (4 * 1024 * 1024)))
    stuck = asyncio.create_task(conn.request("queued behind the big write"))
    await asyncio.sleep(0.05)
    assert not blocked.done()  # backpressure: the pipe is full
    await asyncio.wait_for(conn.close(), WAIT)
    with pytest.raises(ConnectionClosed):
        await blocked
    with pytest.raises(ConnectionClosed):
        await stuck
    proc.kill()


async def test_context_manager_closes(spawn: Spawn) -> None:
    conn, _ = await spawn([["echo"]])
    async with conn:
        assert await conn.request("e", [1], timeout=WAIT) == {"echo": [1]}
    assert conn.closed and conn.close_cause is None


# -- routing ------------------------------------------------------------------------------------------


def note(key: str, n: int) -> list[Any]:
    return ["send", {"method": "item/delta", "params": {"threadId": key, "n": n}}]


async def test_slow_handler_does_not_block_other_keys(spawn: Spawn) -> None:
    script = [note("a", 1), note("a", 2), note("b", 1), note("b", 2), note("a", 3)]
    conn, _ = await spawn(script, route_key=param_key("threadId"))
    release_a = asyncio.Event()
    got_a: list[int] = []
    got_b: list[int] = []
    b_done = asyncio.Event()

    async def slow_a(n: Notification) -> None:
        got_a.append(n.params["n"])
        await release_a.wait()

    def fast_b(n: Notification) -> None:
        got_b.append(n.params["n"])
        if len(got_b) == 2:
            b_done.set()

    conn.subscribe("a", on_notification=slow_a)
    conn.subscribe("b", on_notification=fast_b)
    conn.start()
    await asyncio.wait_for(b_done.wait(), WAIT)
    assert got_b == [1, 2]
    assert got_a == [1]  # still stuck in the first handler call
    release_a.set()
    await until(lambda: len(got_a) == 3)
    assert got_a == [1, 2, 3]


async def test_protocol_error_does_not_kill_reader(spawn: Spawn) -> None:
    errors: list[ProtocolError] = []
    script = [["raw", "garbage\n"], ["raw", "[1,2]\n"], ["raw", '{"what":1}\n'], ["recv"], ok("alive")]
    conn, _ = await spawn(script, on_protocol_error=errors.append)
    conn.start()
    assert await conn.request("ping", timeout=WAIT) == "alive"
    assert [e.kind for e in errors] == ["invalid_json", "not_object", "invalid_message"]
    assert not conn.closed


async def test_cancelling_request_removes_pending(spawn: Spawn) -> None:
    conn, _ = await spawn([["recv"]])
    conn.start()
    task = asyncio.create_task(conn.request("hang"))
    await until(lambda: bool(conn.core.pending))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert dict(conn.core.pending) == {}
    assert not conn.closed


# -- in-memory transport: deterministic orderings ----------------------------------------------------


class MemoryTransport:
    def __init__(self, *chunks: bytes) -> None:
        self.incoming: asyncio.Queue[bytes] = asyncio.Queue()
        for chunk in chunks:
            self.incoming.put_nowait(chunk)
        self.sent: list[bytes] = []
        self.closed = 0
        self.send_error: BaseException | None = None

    async def receive(self) -> bytes:
        return await self.incoming.get()

    async def send(self, data: bytes) -> None:
        if self.send_error is not None:
            raise self.send_error
        self.sent.append(data)

    async def close(self) -> None:
        self.closed += 1


async def test_response_in_same_read_as_eof_without_newline() -> None:
    transport = MemoryTransport()
    conn = Connection(transport)
    conn.start()
    task = asyncio.create_task(conn.request("m"))
    await until(lambda: bool(transport.sent))
    transport.incoming.put_nowait(b'{"id":1,"result":"kept"}')  # unterminated; flushed by feed_eof
    transport.incoming.put_nowait(b"")
    assert await task == "kept"
    assert conn.closed and transport.closed == 1


async def test_read_error_is_close_cause() -> None:
    class Broken(MemoryTransport):
        async def receive(self) -> bytes:
            raise ConnectionResetError("reset")

    transport = Broken()
    conn = Connection(transport)
    causes: list[BaseException | None] = []
    conn.on_close(causes.append)
    conn.start()
    await until(lambda: conn.closed)
    assert isinstance(conn.close_cause, ConnectionResetError)
    assert causes == [conn.close_cause]


async def test_malformed_response_to_pending_request_fails_it() -> None:
    transport = MemoryTransport()
    async with Connection(transport) as conn:
        task = asyncio.create_task(conn.request("m"))
        await until(lambda: bool(transport.sent))
        transport.incoming.put_nowait(b'{"id":1}\n')
        with pytest.raises(RemoteProtocolError):
            await task


async def test_handler_exception_is_logged_and_dispatch_continues(caplog: pytest.LogCaptureFixture) -> None:
    transport = MemoryTransport(b'{"method":"boom"}\n{"method":"fine"}\n')
    seen: list[str] = []

    def handler(n: Notification) -> None:
        seen.append(n.method)
        if n.method == "boom":
            raise RuntimeError("handler bug")

    async with Connection(transport) as conn:
        conn.set_fallback(on_notification=handler)
        await until(lambda: len(seen) == 2)
        assert not conn.closed
    assert seen == ["boom", "fine"]
    assert any("handler for boom failed" in r.getMessage() for r in caplog.records)


async def test_subscription_close_falls_back_and_keys_are_unique() -> None:
    transport = MemoryTransport()
    fallback: list[Any] = []
    routed: list[Any] = []
    async with Connection(transport, route_key=param_key("threadId")) as conn:
        conn.set_fallback(on_notification=lambda n: fallback.append(n.params))
        sub = conn.subscribe("t", on_notification=lambda n: routed.append(n.params))
        with pytest.raises(UsageError):
            conn.subscribe("t")
        transport.incoming.put_nowait(b'{"method":"n","params":{"threadId":"t"}}\n')
        transport.incoming.put_nowait(b'{"method":"n","params":["not","a","dict"]}\n')
        await until(lambda: len(routed) == 1 and len(fallback) == 1)
        sub.close()
        sub.close()
        transport.incoming.put_nowait(b'{"method":"n","params":{"threadId":"t"}}\n')
        await until(lambda: len(fallback) == 2)
    assert routed == [{"threadId": "t"}]
    assert fallback == [["not", "a", "dict"], {"threadId": "t"}]


async def test_failing_route_key_is_logged_and_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    def route_key(method: str, params: Any) -> str | None:
        if method == "bad":
            raise RuntimeError("no key")
        return "t"

    transport = MemoryTransport()
    fallback: list[str] = []
    routed: list[str] = []
    async with Connection(transport, route_key=route_key) as conn:
        conn.set_fallback(on_notification=lambda n: fallback.append(n.method))
        conn.subscribe("t", on_notification=lambda n: routed.append(n.method))
        transport.incoming.put_nowait(b'{"method":"good"}\n{"method":"bad"}\n{"method":"good"}\n')
        await until(lambda: len(routed) == 2 and len(fallback) == 1)
        assert conn.notifications_received == 3
    assert fallback == ["bad"]
    assert [r.getMessage() for r in caplog.records if "route_key failed" in r.getMessage()] == [
        "jsonrpc: route_key failed for bad"
    ]


async def test_misuse_raises_usage_error() -> None:
    conn = Connection(MemoryTransport())
    with pytest.raises(UsageError):
        await conn.request("too early")
    conn.start()
    with pytest.raises(UsageError):
        conn.start()
    with pytest.raises(UsageError):
        await conn.request_with_retry("m", attempts=0)
    await conn.close()


def test_param_key_tolerates_any_params() -> None:
    key = param_key("threadId")
    assert key("m", {"threadId": "t"}) == "t"
    assert key("m", {"threadId": 5}) is None
    assert key("m", None) is None
    assert key("m", [1]) is None


# -- issue 29: answers that race a timeout or a cancellation --------------------------------------------


class AnsweringTransport(MemoryTransport):
    """Puts the answer to each request on the wire as the request is written (before it can be awaited)."""

    async def send(self, data: bytes) -> None:
        await super().send(data)
        rid = json.loads(data)["id"]
        self.incoming.put_nowait(json.dumps({"id": rid, "result": {"turn": {"id": "t1"}}}).encode() + b"\n")


async def test_an_answer_that_came_as_the_time_ran_out_is_the_answer_not_a_timeout() -> None:
    """The reader hands the answer over in the same loop pass as the timer fires: the caller was told
    "no response" (RequestTimeout) for a turn codex had started."""
    late: list[str] = []
    conn = Connection(AnsweringTransport(), on_late_response=lambda method, params, msg: late.append(method))
    conn.start()
    assert await conn.request("turn/start", {"threadId": "a"}, timeout=1e-9) == {"turn": {"id": "t1"}}
    assert late == [] and dict(conn.core.pending) == {}


async def test_an_answer_dispatched_after_its_caller_was_cancelled_is_late_never_lost() -> None:
    late: list[tuple[str, Any, Any]] = []
    transport = MemoryTransport()
    conn = Connection(
        transport, on_late_response=lambda method, params, msg: late.append((method, params, msg.result))
    )
    conn.start()
    task = asyncio.create_task(conn.request("turn/start", {"threadId": "a"}))
    await until(lambda: bool(transport.sent))
    transport.incoming.put_nowait(b'{"id":1,"result":{"turn":{"id":"t1"}}}\n')  # the reader runs first,
    task.cancel()  # then the caller learns of its cancellation
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: bool(late))
    assert late == [("turn/start", {"threadId": "a"}, {"turn": {"id": "t1"}})]
