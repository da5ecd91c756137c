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
* bare loop -- ``for line in proc.stdout: json.loads(line)`` on the same stream: the plain-Python
  baseline (a client that parses with msgspec can beat it).

Every run is a fresh process (this script with ``--child``) that first consumes a 20,000-delta
warm-up turn, so no arm inherits another's imports, threads or heap. Arms alternate A B C D A B C D
... so drift hits all alike; the table shows medians and the ratio of each arm to ours. Prints the
table and rewrites the "## Event throughput" section of
``docs/benchmarks.md`` (other sections are kept).

    .venv/bin/python bench/event_throughput.py [--rounds 5] [--deltas 200000] [--arms ours,bare]
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

from _report import DOC, machine_lines, publish

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


ARM_NAMES = {
    "ours": "ours: `CodexProvider`",
    "sdk-async": "official SDK: `AsyncCodex`",
    "sdk-sync": "official SDK: `Codex` (sync)",
    "bare": "bare loop: readline + `json.loads`",
}


async def _child(arm: str, deltas: int) -> None:
    """One run of one arm in this (fresh) process: a warm-up turn, then the timed one."""
    with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp:
        wrapper = _wrapper(Path(tmp))
        run: Callable[[int], Awaitable[Sample]] = {
            "ours": lambda d: run_ours(wrapper, d),
            "sdk-async": run_sdk_async,
            "sdk-sync": lambda d: _blocking(run_sdk_sync, d),
            "bare": lambda d: _blocking(run_bare, d),
        }[arm]
        await run(min(deltas, 20_000))  # warm-up: lazy imports, model schemas, page cache
        print(json.dumps(await run(deltas)))


def _run_child(arm: str, deltas: int) -> Sample:
    out = subprocess.run(
        [sys.executable, __file__, "--child", arm, "--deltas", str(deltas)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    wall, cpu = json.loads(out.strip().splitlines()[-1])
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--deltas", type=int, default=200_000, help="deltas per turn (default 200000)")
    parser.add_argument("--arms", default=",".join(ARM_NAMES), help="comma-separated subset")
    parser.add_argument("--no-write", action="store_true", help=f"do not rewrite {DOC.name}")
    parser.add_argument("--child", choices=ARM_NAMES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.deltas
    if args.child:
        asyncio.run(_child(args.child, n))
        return 0

    unknown = set(args.arms.split(",")) - set(ARM_NAMES)
    if unknown:
        parser.error(f"unknown arm(s): {', '.join(sorted(unknown))}; choose from {', '.join(ARM_NAMES)}")
    arms = [Arm(key, ARM_NAMES[key]) for key in args.arms.split(",")]
    for r in range(args.rounds):
        for arm in arms:
            wall, cpu = _run_child(arm.key, n)
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
        f"Medians of {rounds} rounds, arms alternating in each round; every run is a fresh process that "
        "first consumes a 20,000-delta warm-up turn, so no arm inherits another's imports, threads or heap. "
        "*CPU* is the "
        "consumer process's CPU time over the same window (all its threads), which a busy machine "
        "disturbs less than wall time; `vs ours` = that arm's median / ours.",
        "",
        *machine_lines(codex=False),
        "",
    ]
    lines = header + rows
    publish(SECTION, lines, FINDINGS, write=write)


# Static text: what the investigations behind this benchmark found (tables above are regenerated).
FINDINGS: list[str] = [
    "**Findings, first pass** (2026-11-22; py-spy at 1 kHz on our process over one 200,000-delta turn). "
    "Of the event loop's samples: the C JSON scanner ~21 % and pipe reads ~9 %, `TurnMapper` with the "
    "frozen `TextDelta`/`Notification` dataclass constructors ~17 %, a worker coroutine per message plus "
    "`inspect.isawaitable` on the `None` a sync handler returns ~5 %, `isinstance(x, Result | Error)` "
    "unions and one `await stream.get()` per event. Changes: handlers called inline by the worker, the C "
    "scanner called directly, `EventStream.get_nowait()` for bursts. CPU 1.58 s -> 1.27 s (-19 %); that "
    "left us 2.4x ahead of the SDK's sync client, short of the 5x target.",
    "",
    "**Findings, second pass** (same day). A bare asyncio pipeline that only reads the pipe, decodes "
    "each line with msgspec, builds a `TextDelta` and hands it to a consumer (a throwaway script) costs "
    "0.53 s of CPU for the "
    "turn; ours cost ~1.3-1.9 s, so the layers (JSON-RPC messages, routing, the per-thread worker, the "
    "turn check, the mapper, the stream) were worth cutting, not just the parse. On this shared 2-core "
    "VM identical runs vary by +-25 %, which hides a 5 % change, so each step was judged by instruction "
    "counts (valgrind, 20,000 deltas through the in-process pipeline, `bench/event_path_instructions.py`), "
    "which are exact and repeatable:",
    "",
    "| Step (commit) | Instructions per delta |",
    "| --- | ---: |",
    "| after the first pass (`a0f15cc`) | 46,500 |",
    "| lines decoded by msgspec into a struct, the json module only for what msgspec rejects; "
    "`TextDelta` built through its slot descriptors (`_fastnew.positional_new`) instead of a frozen "
    "`__init__`; delta fast paths in the mapper and the handle (`6f7094a`) | 27,400 |",
    "| JSON-RPC messages are frozen `msgspec.Struct`s (one C call per `Notification`); terminal events "
    "recognised by `type(e) in frozenset`; no `stream.done` property call per event (`007c1da`) "
    "| 23,900 |",
    "| routing to the subscriber inlined in `Connection._dispatch` (`f21cd9b`) | 23,000 |",
    "| the decode struct not GC-tracked; a message queued to an awake worker without a call | 22,200 |",
    "",
    "msgspec decoding is differential-tested against the json module (`tests/jsonrpc/test_core.py`): "
    "where msgspec accepts a line it yields the same values; where it does not (NaN, lone surrogates, "
    "numbers out of range, not an object, bad JSON) the json module decides exactly as before. Tried "
    "and dropped: delivering notifications to a sync handler inline in the reader instead of through "
    "the per-thread worker (no gain in timed runs: the worker already wakes once per 64 KiB chunk, not "
    "per message), and decoding a "
    "whole chunk with `Decoder.decode_lines` (~4 %, and it accepts two values on one line, which the "
    "line protocol must reject). What is left per event: CPython's eval loop over ~320 bytecodes in "
    "about ten small frames (38 % of instructions), msgspec (~12 %), `bytes.split` (~5 %) and "
    "allocation.",
    "",
    "Targets (the table above): at least 5x faster than the official SDK -- met against both of its "
    "clients; `AsyncCodex` hops to a thread with `asyncio.to_thread` for every event and validates each "
    "with pydantic, hence its far larger ratio, while the sync `Codex` client pays the pydantic "
    "validation alone. Within 2x of the bare loop -- ours is now faster than it, because msgspec "
    "decodes a line in about an eighth of the time `json.loads(bytes)` takes. Our run is short (under a "
    "second), so it is the arm this machine's noise moves most: single rounds against the sync client "
    "ranged from 5.3x to 8.5x in the runs behind this note.",
]


if __name__ == "__main__":
    sys.exit(main())
