"""Approval policy: how long ``evaluate`` takes on everyday commands, and the worst case on large inputs.

Two parts, in one process:

* everyday -- every command of the everyday corpus (tests/policy/adversarial.py), judged with a
  workspace, ``--rounds`` times; p50 / p99 / max per command, and the same for the dangerous corpus;
* large -- adversarial shapes (long pipelines, lists, argument lists, nested substitutions, inline
  scripts, here-documents, loops, brace groups ...) grown to ``INLINE_CHARS`` (judged on the event loop
  by ``evaluate_async``) and to ``MAX_COMMAND_CHARS`` (the size cap); the time of each and the worst,
  side by side, with the time per KiB so linearity shows.

Prints a table and rewrites the "## Approval policy" section of ``docs/benchmarks.md``.

    .venv/bin/python bench/policy_eval.py [--rounds 5] [--no-write]

A benchmark, not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from _report import machine_lines, publish

from agent_fleet.policy import evaluate_command
from agent_fleet.policy.engine import INLINE_CHARS, MAX_COMMAND_CHARS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.policy.adversarial import DANGEROUS, EVERYDAY, WORKSPACE

SECTION = "## Approval policy"
FINDINGS = [
    "Findings:",
    "",
    "- Everyday commands are judged in a fraction of a millisecond at the median; the tail is",
    "  here-documents of Python (read with `ast`) and long pipelines.",
    "- This machine is shared (see the load average): timings scale with the load. With the load",
    "  around 11 on 2 cores, the worst shape at 2 KiB took 15 ms; `INLINE_CHARS` is 1 KiB so that even",
    "  a loaded core stays under the 50 ms a call may hold the event loop (`evaluate_async` judges",
    "  larger commands in a worker thread).",
    "- Above the cap (`MAX_COMMAND_CHARS`) a command is declined as `too-large` without parsing; under it",
    "  the walk stops at 1000 simple commands, 1000 assignments or 200 inline scripts (`too-large`), so",
    "  the time is linear in the size and dominated by tree-sitter's own parse.",
]


def _shapes(size: int) -> Iterator[tuple[str, str]]:
    def grow(unit: str, head: str = "", tail: str = "") -> str:
        count = max(1, (size - len(head) - len(tail)) // len(unit))
        return head + unit * count + tail

    yield "pipeline of cat", grow(" | cat", "cat")
    yield "list of ls", grow("ls -la src/a; ")
    yield "argument list", grow(" ~/a/b/c.txt", "echo")
    yield "one long word", grow("a", "echo ")
    yield "substitutions", grow("$(echo x)", "echo ")
    yield "pipe into sh", grow(" | sh", "echo ls")
    yield "loops", grow("for x in a b c d e f g h; do echo $x; done; ")
    yield "assignments", grow("X=$X/a; ")
    yield "bash -c script", grow("echo hi; ", "bash -c '", "'")
    yield "python -c", grow("x = 1; ", "python3 -c '", "'")
    yield "python heredoc", grow("print(open('a').read())\n", "python3 - <<'EOF'\n", "EOF")
    yield "shell heredoc", grow("echo hi\n", "bash <<'EOF'\n", "EOF")
    yield "brace groups", grow("{ ls; }; ")
    yield "credential-looking paths", grow(" ./.ssh/x/.aws/y", "cat")


def _time(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _stats(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (
        f"p50 {statistics.median(ordered) * 1e3:.3f} ms, p99 {p99 * 1e3:.3f} ms, "
        f"max {ordered[-1] * 1e3:.3f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    dangerous = [command for commands in DANGEROUS.values() for command in commands]
    for command in EVERYDAY + dangerous:  # warm: parser, regexes, caches
        evaluate_command(command, cwd=WORKSPACE)
    everyday = [
        _time(lambda c=c: evaluate_command(c, cwd=WORKSPACE)) for _ in range(args.rounds) for c in EVERYDAY
    ]
    hostile = [
        _time(lambda c=c: evaluate_command(c, cwd=WORKSPACE)) for _ in range(args.rounds) for c in dangerous
    ]

    lines = [
        *machine_lines(codex=False),
        "",
        f"Per command, {args.rounds} rounds, with a workspace:",
        "",
        f"- everyday corpus ({len(EVERYDAY)} commands): {_stats(everyday)}",
        f"- dangerous corpus ({len(dangerous)} commands): {_stats(hostile)}",
        "",
        f"Large inputs (best of 3; ms, and ms per KiB): at `INLINE_CHARS` = {INLINE_CHARS} (on the loop)"
        f" and at `MAX_COMMAND_CHARS` = {MAX_COMMAND_CHARS} (the cap)",
        "",
        "| shape | inline: ms | inline: ms/KiB | cap: ms | cap: ms/KiB | cap: decision |",
        "|---|---:|---:|---:|---:|---|",
    ]
    worst = {INLINE_CHARS: ("", 0.0), MAX_COMMAND_CHARS: ("", 0.0)}
    inline_shapes = dict(_shapes(INLINE_CHARS))
    for name, big in _shapes(MAX_COMMAND_CHARS):
        cells: list[str] = []
        decision = ""
        for size, command in ((INLINE_CHARS, inline_shapes[name]), (MAX_COMMAND_CHARS, big)):
            elapsed = min(_time(lambda c=command: evaluate_command(c, cwd=WORKSPACE)) for _ in range(3))
            cells += [f"{elapsed * 1e3:.1f}", f"{elapsed * 1e3 / (len(command) / 1024):.2f}"]
            if elapsed > worst[size][1]:
                worst[size] = (name, elapsed)
            decision = evaluate_command(command, cwd=WORKSPACE).rule or "accepted"
        lines.append(f"| {name} | {' | '.join(cells)} | {decision} |")
    over = "echo " + "a" * (MAX_COMMAND_CHARS + 1)
    lines += [
        "",
        f"- worst at `INLINE_CHARS`: {worst[INLINE_CHARS][0]}, {worst[INLINE_CHARS][1] * 1e3:.1f} ms",
        f"- worst at `MAX_COMMAND_CHARS`: {worst[MAX_COMMAND_CHARS][0]}, "
        f"{worst[MAX_COMMAND_CHARS][1] * 1e3:.1f} ms",
        f"- one character over the cap: {_time(lambda: evaluate_command(over)) * 1e3:.2f} ms (`too-large`)",
    ]
    publish(SECTION, lines, FINDINGS, write=not args.no_write)


if __name__ == "__main__":
    main()
