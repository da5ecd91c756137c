"""Transcripts: a turn streaming 100,000 deltas through the runner, with and without a transcript.

Side by side in one run, on the fake app-server of ``bench/event_throughput.py`` (it writes N
``item/agentMessage/delta`` notifications, the completed message and ``turn/completed``):

* provider -- ``CodexProvider``: ``async for event in handle.events()`` (the bare event throughput);
* runner -- ``run_task`` on a started provider, no transcript;
* runner + lean transcript -- ``run_task(transcript=path)`` (the default: fragments written as their
  message);
* runner + raw transcript -- ``TranscriptWriter(path, raw_deltas=True)``: one line per event, what every
  transcript was before.

Each arm is timed from the first delta its consumer sees to the last (the stream's rate; a turn's
fixed costs -- thread start, git HEAD reads, stop -- are not events), in a fresh process per run
(``--child``) after a 20,000-delta warm-up turn; arms alternate A B C D A B C D ... Reports the median
events/s, each arm's share of the provider's, and each transcript's size against the turn's text.
Checks the two targets (exit 1 when missed): a lean transcript no larger than twice the text, and the
runner with a lean transcript keeping at least half the provider's events/s. Rewrites the
"## Transcripts" section of ``docs/benchmarks.md``.

    .venv/bin/python bench/transcript_throughput.py [--rounds 5] [--deltas 100000] [--no-write]

A benchmark, not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from _report import machine_lines, publish
from event_throughput import _wrapper

from agent_fleet import Spec, TextDelta
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.runner import Task, TaskEvent, TranscriptWriter, run_task

SECTION = "## Transcripts"
ARMS = {
    "provider": "provider events (bare)",
    "runner": "runner, no transcript",
    "lean": "runner + lean transcript",
    "raw": "runner + raw transcript (`raw_deltas`)",
}


@dataclass
class Arm:
    key: str
    name: str
    wall: list[float] = field(default_factory=list)
    size: int = 0


class _Clock:
    """First and last delta seen by the consumer: the stream's rate, without the turn's fixed costs
    (thread start, git HEAD reads, stop) that a short benchmark turn would otherwise weigh heavily."""

    def __init__(self) -> None:
        self.first = self.last = 0.0
        self.seen = 0

    def tick(self) -> None:
        self.last = time.perf_counter()
        if not self.seen:
            self.first = self.last
        self.seen += 1

    def result(self, deltas: int, what: str) -> float:
        if self.seen != deltas:
            raise SystemExit(f"{what}: {self.seen} deltas, expected {deltas}")
        return self.last - self.first


async def _provider_turn(provider: CodexProvider, deltas: int) -> float:
    clock = _Clock()
    handle = await provider.spawn(Spec(prompt="stream"))
    async for event in handle.events():
        if type(event) is TextDelta:
            clock.tick()
    await handle.stop()
    return clock.result(deltas, "provider")


async def _runner_turn(provider: CodexProvider, work: Path, arm: str, deltas: int) -> tuple[float, int]:
    path = work / f"{arm}-{time.monotonic_ns()}.jsonl"
    writer = None if arm == "runner" else TranscriptWriter(path, raw_deltas=arm == "raw")
    task = Task(id="bench", spec=Spec(prompt="stream", cwd=work), max_followups=0)
    clock = _Clock()

    def on_event(task_event: TaskEvent) -> None:
        if type(task_event.event) is TextDelta:
            clock.tick()

    try:
        result = await run_task(task, provider=provider, transcript=writer, on_event=on_event)
    finally:
        if writer is not None:
            writer.close()
    if result.status != "succeeded":
        raise SystemExit(f"{arm}: {result.status}: {result.reason}")
    return clock.result(deltas, arm), path.stat().st_size if writer is not None else 0


async def _child(arm: str, deltas: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-transcript-") as tmp:
        work = Path(tmp)
        wrapper = _wrapper(work)

        async def once(n: int) -> tuple[float, int]:
            options = CodexOptions(codex_bin=wrapper, env={"FAKE_DELTAS": str(n)})
            async with CodexProvider(options) as provider:
                if arm == "provider":
                    return await _provider_turn(provider, n), 0
                return await _runner_turn(provider, work, arm, n)

        await once(min(deltas, 20_000))  # warm-up: lazy imports, page cache
        print(json.dumps(await once(deltas)))


def _run_child(arm: str, deltas: int) -> tuple[float, int]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", arm, "--deltas", str(deltas)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    wall, size = json.loads(out.strip().splitlines()[-1])
    return float(wall), int(size)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    parser.add_argument("--deltas", type=int, default=100_000, help="deltas in the turn (default 100000)")
    parser.add_argument("--no-write", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument("--child", choices=list(ARMS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.deltas
    if args.child:
        asyncio.run(_child(args.child, n))
        return 0
    arms = [Arm(key, name) for key, name in ARMS.items()]
    for r in range(args.rounds):
        for arm in arms:
            wall, size = _run_child(arm.key, n)
            arm.wall.append(wall)
            arm.size = size
        print(
            f"round {r + 1}/{args.rounds}: " + ", ".join(f"{a.key} {a.wall[-1]:.2f}s" for a in arms),
            file=sys.stderr,
        )
    # The fake server's text: "tok0 tok1 ... " (see bench/_fake_stream_server.py).
    text = sum(len(f"tok{i} ") for i in range(n))
    base = n / statistics.median(arms[0].wall)
    rows = [
        "| Arm | Stream (median) | Events/s | vs provider | Transcript | Transcript / text |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for arm in arms:
        rate = n / statistics.median(arm.wall)
        size = f"{arm.size / 1e6:.2f} MB" if arm.size else "-"
        ratio = f"{arm.size / text:.2f}x" if arm.size else "-"
        wall = statistics.median(arm.wall)
        rows.append(f"| {arm.name} | {wall:.2f} s | {rate:,.0f} | {rate / base:.2f} | {size} | {ratio} |")
    lean = next(a for a in arms if a.key == "lean")
    lean_share = (n / statistics.median(lean.wall)) / base
    checks = [
        f"- Lean transcript {lean.size:,} bytes for {text:,} characters of text: "
        f"{lean.size / text:.2f}x (target <= 2x): {'met' if lean.size <= 2 * text else 'MISSED'}",
        f"- Runner with a lean transcript keeps {lean_share:.0%} of the provider's events/s "
        f"(target >= 50 %): {'met' if lean_share >= 0.5 else 'MISSED'}",
    ]
    header = [
        "Generated by `bench/transcript_throughput.py`: one turn of "
        f"{n:,} `item/agentMessage/delta` notifications from the fake app-server "
        "(`bench/_fake_stream_server.py`), consumed by the provider alone and by `run_task` without a "
        "transcript, with a lean one and with a raw one. Timed from the first delta the consumer sees to "
        "the last (for the runner arms: its `on_event`, after the transcript has written the event); "
        f"medians of {args.rounds} rounds, arms alternating, each run a fresh process after a 20,000-delta "
        "warm-up turn.",
        "",
        *machine_lines(codex=False),
        "",
    ]
    publish(SECTION, header + rows + ["", *checks], write=not args.no_write)
    met = lean.size <= 2 * text and lean_share >= 0.5
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
