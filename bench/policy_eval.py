"""Approval policy: what the first spawn costs, how long ``evaluate`` takes on everyday commands, and
what the worst requests cost the event loop and memory.

Four parts:

* first spawn -- in a fresh process: importing the policy, the first ``ApprovalPolicy`` (it builds the
  rule-pack index), the first decision, and a policy for a second ``(rule_packs, allowed_hosts)`` (the
  index again, as a daemon sees new configurations); with the number of ``fnmatch`` calls made;
* everyday -- every command of the everyday corpora (tests/policy/adversarial.py, redteam.py,
  blindspots.py), judged with a workspace, ``--rounds`` times; p50 / p90 / p99 / max per command, and
  the same for the dangerous corpora;
* large -- adversarial shapes grown to ``INLINE_CHARS`` and to ``MAX_COMMAND_CHARS``;
* robustness -- every request of tests/policy/robustness.py judged by ``evaluate_async`` in a process
  of its own (memory limited to 2 GiB, 120 s), with a 1 ms ticker on the event loop: the decision, the
  time, the peak memory the request added and the loop's longest stall.

Prints a table and rewrites the "## Approval policy" section of ``docs/benchmarks.md``.

    .venv/bin/python bench/policy_eval.py [--rounds 5] [--no-write]

A benchmark, not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from _report import machine_lines, publish

from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, evaluate_command
from agent_fleet.policy.engine import INLINE_CHARS, MAX_COMMAND_CHARS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.policy import adversarial, blindspots, redteam, robustness

WORKSPACE = adversarial.WORKSPACE
EVERYDAY = [*adversarial.EVERYDAY, *redteam.EVERYDAY, *blindspots.EVERYDAY]
CORPORA = (adversarial, redteam, blindspots)
DANGEROUS = [c for corpus in CORPORA for cs in corpus.DANGEROUS.values() for c in cs]

SECTION = "## Approval policy"
FINDINGS = [
    "Findings:",
    "",
    "- The first policy no longer builds its pack index with `fnmatch` (798,015 calls and about 1.1 s",
    "  before issue 30; a second configuration cost as much again).",
    "- Every request over `INLINE_CHARS` is judged in a child process: the loop's longest stall is the",
    "  machine's scheduling, not the judge (before, in a worker thread: up to 6.5 s for a read of",
    "  10,000 paths, 1.2 s for a pipeline into `sh`, and the 256 KiB pipeline with options was killed",
    "  by the 2 GiB limit).",
    "- This machine is shared (see the load average): timings scale with the load.",
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

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))]

    return (
        f"p50 {statistics.median(ordered) * 1e3:.3f} ms, p90 {pick(0.9) * 1e3:.3f} ms, "
        f"p99 {pick(0.99) * 1e3:.3f} ms, max {ordered[-1] * 1e3:.3f} ms"
    )


_FIRST_SPAWN = """
import fnmatch, json, time
calls = 0
plain, case = fnmatch.fnmatch, fnmatch.fnmatchcase
def count(real):
    def counted(*args):
        global calls
        calls += 1
        return real(*args)
    return counted
fnmatch.fnmatch, fnmatch.fnmatchcase = count(plain), count(case)
t0 = time.perf_counter()
from agent_fleet.contract import PermissionConfig
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest
t1 = time.perf_counter()
policy = ApprovalPolicy()
t2 = time.perf_counter()
first = calls
policy.evaluate(ApprovalRequest(kind="command", command="git status && pytest -q", cwd="/work/ws"))
t3 = time.perf_counter()
ApprovalPolicy(PermissionConfig(allowed_hosts=("pypi.corp.example",)))
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "policy": t2 - t1, "decision": t3 - t2, "second": t4 - t3,
                  "fnmatch_first": first, "fnmatch_all": calls}))
"""


def _first_spawn() -> list[str]:
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", _FIRST_SPAWN], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout))
    best = {key: min(run[key] for run in runs) for key in runs[0]}
    return [
        "First spawn, in a fresh process (best of 3):",
        "",
        f"- import `agent_fleet.policy`: {best['import'] * 1e3:.1f} ms",
        f"- first `ApprovalPolicy()` (builds the rule-pack index): {best['policy'] * 1e3:.1f} ms,"
        f" {int(best['fnmatch_first'])} `fnmatch` calls",
        f"- first decision: {best['decision'] * 1e3:.1f} ms",
        f"- a policy for a second `(rule_packs, allowed_hosts)`: {best['second'] * 1e3:.1f} ms"
        f" ({int(best['fnmatch_all'])} `fnmatch` calls in all)",
    ]


def _child_kib(field: str) -> int:
    """A ``/proc/PID/status`` figure (``VmHWM``, ``VmRSS``) of the child judge, in KiB."""
    from agent_fleet.policy.engine._child import child_judge

    process = child_judge()._process
    if process is None:
        return 0
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _one(name: str) -> None:
    """Child mode: judge one robustness request with a 1 ms ticker on the loop (best of three tries:
    the load of a shared machine stalls a loop at random, the judge would every time); print what it
    cost, the child judge's peak memory included."""
    request = dict(robustness.requests())[name]
    policy = ApprovalPolicy()
    policy.evaluate(ApprovalRequest(kind="command", command="ls", cwd=WORKSPACE))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    async def judged() -> tuple[str, float, float, int]:
        warm = ApprovalRequest(kind="command", command="echo " + "x" * 4096, cwd=WORKSPACE)
        await policy.evaluate_async(warm)  # the child judge started and loaded
        child_before = _child_kib("VmRSS")
        worst = 0.0
        done = False

        async def ticker() -> None:
            nonlocal worst
            last = time.perf_counter()
            while not done:
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                worst = max(worst, now - last)
                last = now

        stalls: list[float] = []
        elapsed = 0.0
        rule = ""
        for _ in range(3):
            worst, done = 0.0, False
            task = asyncio.create_task(ticker())
            await asyncio.sleep(0.02)
            start = time.perf_counter()
            decision = await policy.evaluate_async(request)
            elapsed = time.perf_counter() - start
            done = True
            await task
            stalls.append(worst)
            rule = decision.rule or decision.action
        return rule, elapsed, min(stalls), _child_kib("VmHWM") - child_before

    rule, elapsed, worst, child = asyncio.run(judged())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {"rule": rule, "seconds": elapsed, "stall": worst, "added_kib": peak - before, "child_kib": child}
        )
    )


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _robustness() -> list[str]:
    lines = [
        "Robustness set (tests/policy/robustness.py), each request judged by `evaluate_async` in a fresh"
        " process (2 GiB limit, 120 s) with a 1 ms ticker on the loop, best of three tries; memory added"
        " to that process and to its child judge (peak):",
        "",
        "| request | decision | s | memory added | child judge's peak | loop's longest stall |",
        "|---|---|---:|---:|---:|---:|",
    ]
    worst = ("", 0.0)
    for name, _request in robustness.requests():
        try:
            out = subprocess.run(
                [sys.executable, __file__, "--one", name],
                capture_output=True,
                text=True,
                timeout=120,
                preexec_fn=_limit_memory,
                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent)},
            )
        except subprocess.TimeoutExpired:
            lines.append(f"| {name} | (over 120 s) | | | | |")
            continue
        if out.returncode != 0:
            tail = (out.stderr.strip().splitlines() or ["?"])[-1][:60]
            lines.append(f"| {name} | failed: exit {out.returncode}, {tail} | | | | |")
            continue
        got = json.loads(out.stdout.strip().splitlines()[-1])
        if got["stall"] > worst[1]:
            worst = (name, got["stall"])
        lines.append(
            f"| {name} | {got['rule']} | {got['seconds']:.2f} | {got['added_kib'] / 1024:.0f} MiB"
            f" | {got.get('child_kib', 0) / 1024:.0f} MiB | {got['stall'] * 1e3:.1f} ms |"
        )
    lines += ["", f"- longest stall: {worst[0]}, {worst[1] * 1e3:.1f} ms"]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--skip-large", action="store_true", help="leave out the large-input table")
    args = parser.parse_args()
    if args.one:
        _one(args.one)
        return

    spawn = _first_spawn()
    for command in EVERYDAY + DANGEROUS:  # warm: parser, regexes, caches
        evaluate_command(command, cwd=WORKSPACE)
    everyday = [
        _time(lambda c=c: evaluate_command(c, cwd=WORKSPACE)) for _ in range(args.rounds) for c in EVERYDAY
    ]
    hostile = [
        _time(lambda c=c: evaluate_command(c, cwd=WORKSPACE)) for _ in range(args.rounds) for c in DANGEROUS
    ]

    lines = [
        *machine_lines(codex=False),
        "",
        *spawn,
        "",
        f"Per command, {args.rounds} rounds, with a workspace:",
        "",
        f"- everyday corpora ({len(EVERYDAY)} commands): {_stats(everyday)}",
        f"- dangerous corpora ({len(DANGEROUS)} commands): {_stats(hostile)}",
    ]
    if not args.skip_large:
        lines += ["", *_large()]
    lines += ["", *_robustness()]
    publish(SECTION, lines, FINDINGS, write=not args.no_write)


def _large() -> list[str]:
    lines = [
        f"Large inputs (best of 3; ms, and ms per KiB): at `INLINE_CHARS` = {INLINE_CHARS}"
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
    return lines


if __name__ == "__main__":
    main()
