"""Event throughput: one turn flooded with 200,000 agent-message deltas, consumed as events.

A fake app-server (``bench/_fake_stream_server.py``) answers the handshake, ``thread/start`` and
``turn/start``, then writes ``turn/started``, 200,000 ``item/agentMessage/delta`` notifications and
``turn/completed`` for one thread as fast as the pipe takes them. Each arm starts its own copy and
times ``thread/start`` sent -> the last delta received *as an event* by the consumer:

* ours -- ``CodexProvider`` (``CodexOptions(codex_bin=<fake>)``), ``async for event in handle.events()``;
* SDK async -- the official ``openai_codex.AsyncCodex`` (``CodexConfig(launch_args_override=...)``),
  ``async for n in (await thread.turn(...)).stream()``: its asyncio API, the counterpart of ours;
* SDK sync -- ``openai_codex.Codex``, ``for n in thread.turn(...).stream()`` (the same client without
  the ``asyncio.to_thread`` hop per event);
* bare loop -- ``for line in proc.stdout: json.loads(line)`` on the same stream: the floor for Python.

Arms alternate A B C D A B C D ... so drift hits all alike; the table shows medians and the ratio of
each arm to ours. Prints the table and rewrites the "## Event throughput" section of
``docs/benchmarks.md`` (other sections are kept).

    .venv/bin/python bench/event_throughput.py [--rounds 3] [--deltas 200000] [--arms ours,bare]
                                               [--no-write]

A benchmark, not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from _report import DOC, ROOT, machine_lines, write_section

from agent_fleet import Spec, TextDelta
from agent_fleet.codex import CodexOptions, CodexProvider

SECTION = "## Event throughput"
FAKE = Path(__file__).resolve().with_name("_fake_stream_server.py")
DELTA = "item/agentMessage/delta"


Sample = tuple[float, float]  # (wall seconds, CPU seconds of this process) over the timed window


@dataclass
class Arm:
    key: str
    name: str
    run: Callable[[int], Awaitable[Sample]]
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def _wrapper(tmp: Path) -> Path:
    """An executable that runs the fake server (``CodexOptions.codex_bin`` wants a file to exec)."""
    path = tmp / "fake-codex"
    path.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{FAKE}' \"$@\"\n")
    path.chmod(0o755)
    return path


async def run_ours(wrapper: Path, deltas: int) -> Sample:
    options = CodexOptions(codex_bin=wrapper, env={"FAKE_DELTAS": str(deltas)})
    async with CodexProvider(options) as provider:
        seen = 0
        t0, c0 = time.perf_counter(), time.process_time()
        handle = await provider.spawn(Spec(prompt="stream"))
        async for event in handle.events():
            if type(event) is TextDelta:
                seen += 1
                if seen == deltas:
                    elapsed = time.perf_counter() - t0, time.process_time() - c0
    if seen != deltas:
        raise SystemExit(f"ours: {seen} deltas, expected {deltas}")
    return elapsed


def _sdk_config(deltas: int) -> object:
    from openai_codex import CodexConfig

    return CodexConfig(
        launch_args_override=(sys.executable, str(FAKE)),
        env={"FAKE_DELTAS": str(deltas)},
    )


async def run_sdk_async(deltas: int) -> Sample:
    from openai_codex import AsyncCodex

    async with AsyncCodex(config=_sdk_config(deltas)) as codex:  # type: ignore[arg-type]
        seen = 0
        t0, c0 = time.perf_counter(), time.process_time()
        thread = await codex.thread_start()
        turn = await thread.turn("stream")
        async for note in turn.stream():
            if note.method == DELTA:
                seen += 1
                if seen == deltas:
                    elapsed = time.perf_counter() - t0, time.process_time() - c0
    if seen != deltas:
        raise SystemExit(f"sdk async: {seen} deltas, expected {deltas}")
    return elapsed


def run_sdk_sync(deltas: int) -> Sample:
    from openai_codex import Codex

    with Codex(config=_sdk_config(deltas)) as codex:  # type: ignore[arg-type]
        seen = 0
        t0, c0 = time.perf_counter(), time.process_time()
        thread = codex.thread_start()
        for note in thread.turn("stream").stream():
            if note.method == DELTA:
                seen += 1
                if seen == deltas:
                    elapsed = time.perf_counter() - t0, time.process_time() - c0
    if seen != deltas:
        raise SystemExit(f"sdk sync: {seen} deltas, expected {deltas}")
    return elapsed


def run_bare(deltas: int) -> Sample:
    env = {**os.environ, "FAKE_DELTAS": str(deltas)}
    proc = subprocess.Popen(
        [sys.executable, str(FAKE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def call(rid: int, method: str, params: dict[str, object]) -> dict[str, object]:
        stdin.write(json.dumps({"id": rid, "method": method, "params": params}).encode() + b"\n")
        stdin.flush()
        while True:
            msg = json.loads(stdout.readline())
            if msg.get("id") == rid:
                return msg  # type: ignore[no-any-return]

    try:
        call(1, "initialize", {"clientInfo": {"name": "bare", "title": "bare", "version": "0"}})
        seen = 0
        t0, c0 = time.perf_counter(), time.process_time()
        thread = call(2, "thread/start", {})
        tid = thread["result"]["thread"]["id"]  # type: ignore[index]
        call(3, "turn/start", {"threadId": tid, "input": [{"type": "text", "text": "stream"}]})
        loads = json.loads
        for line in stdout:
            msg = loads(line)
            if msg.get("method") == DELTA:
                seen += 1
                if seen == deltas:
                    elapsed = time.perf_counter() - t0, time.process_time() - c0
            elif msg.get("method") == "turn/completed":
                break
    finally:
        stdin.close()
        proc.wait()
    if seen != deltas:
        raise SystemExit(f"bare loop: {seen} deltas, expected {deltas}")
    return elapsed


async def _blocking(fn: Callable[[int], Sample], deltas: int) -> Sample:
    return fn(deltas)  # blocks the loop on purpose: nothing else runs in this process meanwhile


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--deltas", type=int, default=200_000, help="deltas per turn (default 200000)")
    parser.add_argument("--arms", default="ours,sdk-async,sdk-sync,bare", help="comma-separated subset")
    parser.add_argument("--no-write", action="store_true", help=f"do not rewrite {DOC.name}")
    args = parser.parse_args()
    n = args.deltas

    with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp:
        wrapper = _wrapper(Path(tmp))
        every = {
            "ours": Arm("ours", "ours: `CodexProvider`", lambda d: run_ours(wrapper, d)),
            "sdk-async": Arm("sdk-async", "official SDK: `AsyncCodex`", run_sdk_async),
            "sdk-sync": Arm("sdk-sync", "official SDK: `Codex` (sync)", lambda d: _blocking(run_sdk_sync, d)),
            "bare": Arm("bare", "bare loop: readline + `json.loads`", lambda d: _blocking(run_bare, d)),
        }
        arms = [every[name] for name in args.arms.split(",")]
        for arm in arms:  # warm-up: imports, page cache
            await arm.run(min(n, 20_000))
        for r in range(args.rounds):
            for arm in arms:
                wall, cpu = await arm.run(n)
                arm.wall.append(wall)
                arm.cpu.append(cpu)
            print(
                f"round {r + 1}/{args.rounds}: " + ", ".join(f"{a.key} {a.wall[-1]:.2f}s" for a in arms),
                file=sys.stderr,
            )

    print_and_write(arms, n, args.rounds, write=not args.no_write)
    return 0


def print_and_write(arms: list[Arm], n: int, rounds: int, *, write: bool) -> None:
    ours = next((a for a in arms if a.key == "ours"), arms[0])
    base_wall, base_cpu = statistics.median(ours.wall), statistics.median(ours.cpu)
    rows = [
        "| Consumer | Wall (median) | Events/s | Wall vs ours | CPU (median) | CPU vs ours |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for arm in arms:
        wall, cpu = statistics.median(arm.wall), statistics.median(arm.cpu)
        rows.append(
            f"| {arm.name} | {wall:.2f} s | {n / wall:,.0f} | {wall / base_wall:.2f}x "
            f"| {cpu:.2f} s | {cpu / base_cpu:.2f}x |"
        )
    header = [
        "Generated by `bench/event_throughput.py`: a fake app-server (`bench/_fake_stream_server.py`) "
        f"writes {n:,} `item/agentMessage/delta` notifications for one turn as fast as the pipe takes "
        "them; each consumer is timed from `thread/start` sent to the last delta received as an event. "
        f"Medians of {rounds} rounds, arms alternating in each round, after one warm-up each. *CPU* is the "
        "consumer process's CPU time over the same window (all its threads), which a busy machine "
        "disturbs less than wall time; `vs ours` = that arm's median / ours.",
        "",
        *machine_lines(codex=False),
        "",
    ]
    lines = header + rows
    print(SECTION)
    print("\n".join(lines))
    if write:
        write_section(SECTION, [*lines, "", *FINDINGS])
        print(f"\nwrote {DOC.relative_to(ROOT)}", file=sys.stderr)


# Static text: what the investigation behind this benchmark found (tables above are regenerated).
FINDINGS: list[str] = [
    "**Findings** (investigation of 2026-11-22; py-spy at 1 kHz on our process over one 200,000-delta "
    "turn). Before any change, of the event loop's samples: the C JSON scanner ~21 % and pipe reads "
    "~9 % (the floor any Python client pays), `TurnMapper` with the frozen `TextDelta`/`Notification` "
    "dataclass constructors ~17 %, the per-message worker coroutine plus `inspect.isawaitable` on the "
    "`None` a sync handler returns (an ABC `isinstance` check) ~5 %, `isinstance(x, Result | Error)` "
    "unions and one `await stream.get()` per event in `events()`. Consumer wake-ups were already "
    "batched -- 648 wake-ups for 200,000 events, one per 64 KiB read -- so that was left alone.",
    "",
    "Changes (behaviour identical, `tests/jsonrpc` + `tests/codex` pass): `jsonrpc/connection.py` -- the "
    "worker calls handlers inline instead of through a coroutine per message, and tests `result is not "
    "None` before `inspect.isawaitable`; `jsonrpc/core.py` -- the decoder calls the C scanner "
    "(`JSONDecoder.scan_once`) directly instead of `raw_decode`, one Python frame less per line; "
    "`_stream.py` -- `EventStream.get_nowait()`; `codex/handle.py` -- `events()` takes queued events "
    "with `get_nowait()` and awaits only when the queue is empty, and terminal checks use a "
    "`(Result, Error)` tuple. Tried and dropped for lack of a measurable gain: a fast path for deltas "
    "in `TurnMapper.feed` and 256 KiB reads (which also delay the first event of a burst).",
    "",
    "Before/after (9 alternating runs, a fresh process each, 200,000 deltas, medians): wall "
    "2.15 s -> 1.65 s, CPU 1.58 s -> 1.27 s (-19 %). Targets: at least 5x faster than the official "
    "SDK's asyncio API -- met by a wide margin (`AsyncCodex` hops to a thread with `asyncio.to_thread` "
    "for every event, and validates each one with pydantic); within 2x of the bare loop -- met. The "
    "SDK's *sync* client is only about 2.4x slower than ours: it is itself within ~3.5x of the bare "
    "loop, so 5x against it is out of reach for any client that parses every line in Python. The "
    "remaining gap to the bare loop is mostly the event objects themselves (a frozen dataclass per "
    "notification and per event) plus routing; `json.loads(bytes)` in the bare loop is slower per line "
    "than our decode, which is why the gap is small.",
]


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
