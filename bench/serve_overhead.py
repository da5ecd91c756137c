"""Serve overhead: what the daemon adds to an event and to a short turn, side by side with its floors.

Two measurements, each arm alternating with its floor so drift hits both alike (medians of ``--rounds``):

* **Per event** -- a provider double yields ``--events`` text deltas, each of its own message
  (so the daemon cannot coalesce them: the worst case), 64 per turn of the event loop, through
  an ``agent-fleet serve`` daemon (every record encoded, numbered, queued for SQLite, sent as
  server-sent events) to a ``RemoteProvider`` client reading ``handle.events()``; against the floor:
  the same records, already encoded, served by a bare Starlette + sse-starlette app on uvicorn and read
  with httpx + httpx-sse + ``json.loads``. Goal: at most 2x the floor.
* **A short turn** -- spawn to the terminal event of a 13-event turn on the codex provider (driving
  ``bench/_fake_stream_server.py``, a stand-in app-server, started before the clock), in process
  (``CodexProvider``) and through the daemon (``RemoteProvider``, its connection warm). Goal: at most
  3x in process.

Daemon, floor server and clients share this process and its event loop: the times are the whole
path's CPU and the loopback. Prints the tables and rewrites the "## Serve overhead" section of
``docs/benchmarks.md`` (unless ``--no-write``). Runs under any umask (the token file is made 0600).

    .venv/bin/python bench/serve_overhead.py [--rounds 15] [--events 5000] [--no-write]

A benchmark, not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from _report import machine_lines, publish
from httpx_sse import aconnect_sse
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.contract import Capabilities, Handle, Provider
from agent_fleet.events import Error, Event, Result, TextDelta
from agent_fleet.remote import RemoteProvider
from agent_fleet.runner import Redactor
from agent_fleet.serve import Daemon, ServeConfig
from agent_fleet.serve._records import RecordEncoder

SECTION = "## Serve overhead"
FINDINGS = [
    "What an event costs on the daemon: its record encoded once with msgspec (strings and containers",
    "redacted; for a text delta everything before the text made once a millisecond), queued for SQLite",
    "(written in one transaction per terminal event and every 50 ms), and the readers woken once per",
    "turn of the event loop; text deltas that arrive in one burst are sent as one record. The client",
    "decodes the stream with agent_fleet._sse (bytes in, records out, no generator per line). A turn",
    "is started and read in one exchange (POST /v1/sessions?stream=1 answers with the event stream,",
    "where a POST and a GET took two), the stream written by a lean response (one task, where",
    "sse-starlette ran four and a timeout scope per chunk), and a turn's rows are written in one",
    "transaction at its start and one at its end. The listening socket is IPPROTO_TCP, so every",
    "accepted connection has TCP_NODELAY: a keep-alive answer does not wait for a delayed ACK.",
    "Both arms run after gc.freeze(), as `agent-fleet serve` does once started: without it a full",
    "collection walking every imported object fell into some rounds and not others (ratios swung by",
    "half). The in-process arm's app-server is started before the clock, as the daemon's is (until",
    "2026-11-26 it was not: that arm counted the start, 45 ms, and a turn through the daemon looked",
    "1.35x in process when it was 3.6x). Runs minutes apart on this 2-core VM moved the ratios by up",
    "to 0.3.",
]
FAKE = Path(__file__).resolve().with_name("_fake_stream_server.py")
TOKEN = "bench-token-0123456789abcdef"


# -- a provider double: one event per turn of the loop ---------------------------------------------


_BURST = 64  # events a provider reads at once (a flood of deltas fills a pipe read with many)


def _event(n: int, coalescible: bool) -> Event:
    """A delta of one message (the daemon coalesces a burst of them), or each of its own message."""
    return TextDelta(text=f"tok{n % 10} ", item_id="msg_1" if coalescible else f"msg_{n}")


class _Trickle(Handle):
    def __init__(self, session_id: str, count: int, coalescible: bool) -> None:
        self._id, self._count, self._coalescible = session_id, count, coalescible

    @property
    def session_id(self) -> str:
        return self._id

    async def events(self) -> AsyncIterator[Event]:
        for n in range(self._count):
            yield _event(n, self._coalescible)
            if n % _BURST == _BURST - 1:
                await asyncio.sleep(0)  # a pipe read's worth, then the next turn of the loop
        yield Result(text="done", session_id=self._id)

    async def send(
        self,
        prompt: str,
        *,
        images: Sequence[str | Path] = (),
        output_schema: Mapping[str, Any] | None = None,
    ) -> None:
        raise NotImplementedError

    async def inject(self, text: str) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        pass

    async def wait(self) -> Result:
        raise NotImplementedError


class _TrickleProvider(Provider):
    name = "trickle"
    options = None

    def __init__(self, count: int, coalescible: bool) -> None:
        self._count, self._coalescible = count, coalescible
        self._made = 0

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            supports_injection=False,
            supports_resume=False,
            supports_tool_plugins=False,
            supports_output_schema=False,
            supports_reasoning_effort=False,
            needs_permission_config=False,
            emits_subagent_events=False,
            tool_permission_format="none",
        )

    async def spawn(self, spec: Spec) -> Handle:
        self._made += 1
        return _Trickle(f"trickle-{self._made}", self._count, self._coalescible)

    async def resume(self, session_id: str, spec: Spec) -> Handle:
        raise NotImplementedError

    async def shutdown(self) -> None:
        pass


# -- helpers ------------------------------------------------------------------------------------------


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(started: tuple[float, float]) -> tuple[float, float]:
    """Wall-clock seconds and this process's CPU seconds since ``started``: on a loaded machine the
    wall clock also measures the wait for a core, the CPU time only the path's own work."""
    wall, cpu = _now()
    return wall - started[0], cpu - started[1]


def _state(root: Path, name: str) -> tuple[Path, Path]:
    state = root / name
    state.mkdir(mode=0o700)
    token = root / f"{name}.token"
    fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # private under any umask
    with os.fdopen(fd, "w") as f:
        f.write(TOKEN + "\n")
    return state, token


async def _drain(handle: Handle) -> int:
    count = 0
    async for event in handle.events():
        count += 1
        if isinstance(event, Result | Error):
            break
    return count


# -- per event ----------------------------------------------------------------------------------------


async def _daemon_per_event(
    root: Path, name: str, events: int, cwd: Path, *, coalescible: bool
) -> tuple[tuple[float, float], int]:
    state, token = _state(root, name)
    config = ServeConfig(state_dir=state, token_file=token, allow_roots=(cwd,), provider="codex")
    made = _TrickleProvider(events, coalescible)
    async with (
        Daemon(config, providers=lambda kind, options: made) as daemon,
        RemoteProvider(daemon.url, TOKEN) as client,
    ):
        await client.request("GET", "/v1/info")  # a warm connection, as the floor's
        started = _now()
        handle = await client.spawn(Spec(prompt="trickle", cwd=cwd))
        count = await _drain(handle)
        return _since(started), count


def _records(events: int) -> list[bytes]:
    """The records the daemon sends when nothing is coalesced, already encoded."""
    encoder = RecordEncoder(Redactor())
    at = time.time()
    out = [encoder.encode("s-1", _event(n, False), at) for n in range(events)]
    return [*out, encoder.encode("s-1", Result(text="done", session_id="s-1"), at)]


async def _floor_per_event(records: list[bytes]) -> tuple[tuple[float, float], int]:
    """Starlette + sse-starlette on uvicorn, httpx + httpx-sse + json.loads: the same records."""

    async def stream(request: Request) -> EventSourceResponse:
        async def content() -> AsyncIterator[bytes]:
            # The same bytes in the same writes as the daemon: a burst's records in one chunk.
            for start in range(0, len(records), _BURST):
                burst = records[start : start + _BURST]
                yield b"".join(
                    b"id: %d\nevent: event\ndata: %s\n\n" % (start + i + 1, record)
                    for i, record in enumerate(burst)
                )
                await asyncio.sleep(0)

        return EventSourceResponse(content(), ping=15)

    app = Starlette(routes=[Route("/events", stream)])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.setblocking(False)
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", access_log=False, log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 - uvicorn has no event for it
        await asyncio.sleep(0.01)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        async with httpx.AsyncClient(base_url=url) as http:
            await http.get("/nothing")  # a warm connection
            started = _now()
            count = 0
            async with aconnect_sse(http, "GET", "/events", timeout=httpx.Timeout(30, read=None)) as source:
                async for sse in source.aiter_sse():
                    json.loads(sse.data)
                    count += 1
                    if count == len(records):
                        break
            return _since(started), count
    finally:
        server.should_exit = True
        await serving
        sock.close()


# -- a short turn ------------------------------------------------------------------------------------


def _wrapper(directory: Path) -> Path:
    path = directory / "fake-codex"
    path.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{FAKE}' \"$@\"\n")
    path.chmod(0o755)
    return path


async def _local_turn(options: CodexOptions, cwd: Path) -> tuple[tuple[float, float], int]:
    async with CodexProvider(options) as provider:
        await provider.start()  # its app-server running before the clock, as the daemon's is
        started = _now()
        count = await _drain(await provider.spawn(Spec(prompt="short", cwd=cwd)))
        return _since(started), count


async def _daemon_turn(
    root: Path, n: int, options: CodexOptions, cwd: Path
) -> tuple[tuple[float, float], int]:
    state, token = _state(root, f"turn-{n}")
    config = ServeConfig(state_dir=state, token_file=token, options={"codex": options}, allow_roots=(cwd,))
    async with Daemon(config) as daemon:
        await daemon.sessions.provider("codex")  # started before the clock, as the local arm's is
        async with RemoteProvider(daemon.url, TOKEN) as client:
            await client.request("GET", "/v1/info")  # a warm connection
            started = _now()
            count = await _drain(await client.spawn(Spec(prompt="short", cwd=cwd)))
            return _since(started), count


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    times: dict[str, list[tuple[float, float]]] = {
        a: [] for a in ("floor", "daemon", "deltas", "local", "remote")
    }
    counts: dict[str, int] = {}
    records = _records(args.events)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cwd = root / "work"
        cwd.mkdir()
        options = CodexOptions(codex_bin=_wrapper(root), env={"FAKE_DELTAS": "8"})
        await _local_turn(options, cwd)  # warm-up: imports, first child
        await _floor_per_event(records[:100])
        await _daemon_per_event(root, "warm", 100, cwd, coalescible=False)
        gc.collect()  # then out of the collector's sight, as `agent-fleet serve` does once it started
        gc.freeze()
        for n in range(args.rounds):
            for arm in ("floor", "daemon", "deltas", "local", "remote"):
                if arm == "floor":
                    seconds, count = await _floor_per_event(records)
                elif arm in ("daemon", "deltas"):
                    name, coalescible = f"{arm}-{n}", arm == "deltas"
                    seconds, count = await _daemon_per_event(
                        root, name, args.events, cwd, coalescible=coalescible
                    )
                elif arm == "local":
                    seconds, count = await _local_turn(options, cwd)
                else:
                    seconds, count = await _daemon_turn(root, n, options, cwd)
                times[arm].append(seconds)
                counts[arm] = count
    wall = {arm: statistics.median(v[0] for v in values) for arm, values in times.items()}
    cpu = {arm: statistics.median(v[1] for v in values) for arm, values in times.items()}
    per = {arm: wall[arm] / (args.events + 1) * 1e6 for arm in ("floor", "daemon", "deltas")}
    per_cpu = {arm: cpu[arm] / (args.events + 1) * 1e6 for arm in ("floor", "daemon", "deltas")}

    def row(
        label: str, arm: str, base: str, scale: float, unit: dict[str, float], cpu_unit: dict[str, float]
    ) -> str:
        return (
            f"| {label} | {unit[arm] * scale:.2f} | {unit[arm] / unit[base]:.2f} | "
            f"{cpu_unit[arm] * scale:.2f} | {cpu_unit[arm] / cpu_unit[base]:.2f} |"
        )

    one = dict.fromkeys(per, 1.0)
    lines = [
        *machine_lines(codex=False),
        f"- {args.rounds} rounds per arm, arms alternating, medians; daemon, servers and clients in one "
        "process (`bench/serve_overhead.py`); wall clock, and this process's CPU time (on a loaded "
        "machine the wall clock also counts the wait for a core)",
        "",
        f"Per event ({args.events + 1:,} events from the provider, {_BURST} per turn of the event loop); "
        "goal: the daemon at most 2x the floor",
        "",
        "| arm | µs per event | ratio | CPU µs per event | CPU ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
        row("floor: Starlette + sse-starlette + httpx-sse + `json.loads`", "floor", "floor", 1, per, per_cpu),
        row("daemon + `RemoteProvider`, each event its own record", "daemon", "floor", 1, per, per_cpu),
        row(
            "daemon + `RemoteProvider`, deltas of one message (coalesced)", "deltas", "floor", 1, per, per_cpu
        ),
        "",
        f"A short turn ({counts['local']} events, spawn to the terminal event, the codex provider on a "
        "stand-in app-server); goal: through the daemon at most 3x in process",
        "",
        "| arm | ms | ratio | CPU ms | CPU ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
        row("in process: `CodexProvider`", "local", "local", 1e3, wall, cpu),
        row("through the daemon: `RemoteProvider`", "remote", "local", 1e3, wall, cpu),
    ]
    del one
    publish(SECTION, lines, FINDINGS, write=not args.no_write)


if __name__ == "__main__":
    asyncio.run(main())
