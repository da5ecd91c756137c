"""Fleet concurrency: 16 turns at once through the real codex binary, four ways, wall time and memory.

Every turn is scripted on one loopback model server (``agent_fleet.testing.ScriptedModelServer``): the
model answers after 200 ms with an ``exec_command("echo hi")`` call, then, given the command's output,
after another 200 ms with a text reply. The arms:

* ``ours`` -- one ``CodexProvider`` (one ``codex app-server``), 16 concurrent threads; commands go
  through the approval bridge (``approvalPolicy: "untrusted"``, default policy allows them);
* ``exec`` -- ``CodexExecProvider``: 16 ``codex exec --json`` processes at once;
* ``sdk`` -- the official ``openai_codex.AsyncCodex``: one app-server, 16 ``thread_start`` + ``run``
  gathered (the loop's default executor is widened to 32 threads, since the SDK waits for every
  event in ``asyncio.to_thread``);
* ``bare`` -- a hand-written JSON-RPC driver on one ``codex app-server`` with exactly ours' thread
  settings, accepting every approval request at once: what the binary itself needs.

Each arm runs in a child process (``--child``) with a fresh temporary ``CODEX_HOME`` and, unless
``--real-home``, an empty ``HOME`` (login shells then read /etc/profile only: a heavy ~/.bashrc
otherwise dominates and scatters the result). The parent samples the RSS of that child and all its
descendants every 50 ms and keeps the peak, and takes the tree's CPU time from the child's rusage.
Wall time is measured in the child, from before the provider/client starts to the 16th result. Every
turn must have run its commands (exit code 0); commands codex reports without their output are
counted. Arms alternate (A B C D A B C D ...). Prints a table and rewrites the "## Fleet concurrency"
section of ``docs/benchmarks.md``; ``--explore`` instead runs the bare driver under several thread
settings and rewrites "## Fleet thread settings". ``BENCH_DEBUG=1`` prints the peak's processes.

    .venv/bin/python bench/fleet_concurrency.py [--rounds 3] [--turns 16] [--commands 1]
        [-c features.shell_snapshot=false] [--real-home] [--arms ours,exec,sdk,bare] [--no-write]
    .venv/bin/python bench/fleet_concurrency.py --explore [--rounds 3] [--only SUBSTRING]

A benchmark, not a test: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _report import DOC, machine_lines, publish

from agent_fleet import Spec, ToolResult
from agent_fleet._codex_toml import config_args
from agent_fleet.codex import CodexExecProvider, CodexOptions, CodexProvider, find_codex
from agent_fleet.codex.mapping import OPT_OUT_NOTIFICATIONS
from agent_fleet.codex.translate import APPROVAL_POLICY
from agent_fleet.testing import RecordedRequest, Reply, ScriptedModelServer, exec_command, scripted_codex_env

SECTION = "## Fleet concurrency"
EXPLORE_SECTION = "## Fleet thread settings"
SAMPLE_EVERY = 0.05
CHILD_TIMEOUT = 180.0
DEBUG = bool(os.environ.get("BENCH_DEBUG"))

# Thread settings for every arm. The defaults are what bench runs use; --explore compares variants.
try:  # the config CodexProvider adds to every app-server it starts, if this version has any
    from agent_fleet.codex.appserver import APP_SERVER_DEFAULTS  # type: ignore[attr-defined]
except ImportError:
    APP_SERVER_DEFAULTS = {}

# Every arm runs with ours' thread settings, including the provider's own config defaults, so (a) and
# (d) compare clients, not settings. --explore compares settings.
DEFAULT_SETTINGS: dict[str, Any] = {
    "sandbox": None,
    "approval": APPROVAL_POLICY,
    "config": dict(APP_SERVER_DEFAULTS),
}
NO_LOGIN = {"allow_login_shell": False}
NO_SNAPSHOT = {"features.shell_snapshot": False}
EXPLORE: list[tuple[str, dict[str, Any]]] = [
    (
        "untrusted, read-only, codex's config defaults",
        {"approval": "untrusted", "sandbox": None, "config": {}},
    ),
    ("never, read-only", {"approval": "never", "sandbox": None, "config": {}}),
    ("untrusted, workspace-write", {"approval": "untrusted", "sandbox": "workspace-write", "config": {}}),
    (
        "untrusted, danger-full-access",
        {"approval": "untrusted", "sandbox": "danger-full-access", "config": {}},
    ),
    (
        "untrusted, read-only, `features.shell_snapshot=false`",
        {"approval": "untrusted", "sandbox": None, "config": NO_SNAPSHOT},
    ),
    (
        "untrusted, read-only, `allow_login_shell=false`",
        {"approval": "untrusted", "sandbox": None, "config": NO_LOGIN},
    ),
    (
        "untrusted, read-only, both off",
        {"approval": "untrusted", "sandbox": None, "config": {**NO_LOGIN, **NO_SNAPSHOT}},
    ),
    (
        "never, read-only, `features.shell_snapshot=false`",
        {"approval": "never", "sandbox": None, "config": NO_SNAPSHOT},
    ),
]


# -- the scripted model ---------------------------------------------------------------------------


def responder_for(delay: float, commands: int = 1) -> Any:
    """Stateless: a turn asks for ``echo hi`` until it has ``commands`` outputs, then answers "done"."""

    def respond(request: RecordedRequest) -> Reply:
        if len(request.tool_outputs()) >= commands:
            return Reply.text("done", delay=delay)
        return Reply(items=(exec_command("echo hi"),), delay=delay)

    return respond


# -- child side: one arm, one run -----------------------------------------------------------------


@dataclass
class Job:
    arm: str
    turns: int
    workspace: str
    config: dict[str, Any]  # model wiring + settings["config"], as codex -c overrides
    env: dict[str, str]  # CODEX_HOME and the dummy key
    sandbox: str | None
    approval: str
    commands: int


Command = tuple[int | None, str]  # (exit code, output) of one command codex ran


def _check(turns: list[list[Command]], job: Job) -> int:
    """Every turn ran its commands with exit code 0; returns how many of them came back without their
    output (codex 0.163.0 sometimes reports a fast command as completed with ``aggregatedOutput: null``)."""
    ok = sum(sum(code == 0 for code, _ in cmds) >= job.commands for cmds in turns)
    if ok != job.turns:
        raise SystemExit(
            f"{job.arm}: {ok}/{job.turns} turns ran `echo hi` {job.commands}x ({turns[:3]!r} ...)"
        )
    return sum(code == 0 and "hi" not in out.splitlines() for cmds in turns for code, out in cmds)


async def child_ours(job: Job) -> None:
    options = CodexOptions(config=job.config, env=job.env, cwd=job.workspace)
    async with CodexProvider(options) as provider:

        async def one(i: int) -> list[Command]:
            handle = await provider.spawn(Spec(prompt=f"task {i}", cwd=job.workspace, sandbox=job.sandbox))  # type: ignore[arg-type]
            return [
                (event.exit_code, event.output)
                async for event in handle.events()
                if isinstance(event, ToolResult) and not event.synthetic
            ]

        outputs = await asyncio.gather(*(one(i) for i in range(job.turns)))
        done = time.perf_counter()
    _report(done, _check(outputs, job))


async def child_exec(job: Job) -> None:
    options = CodexOptions(config=job.config, env=job.env, cwd=job.workspace, skip_git_repo_check=True)
    async with CodexExecProvider(options) as provider:

        async def one(i: int) -> list[Command]:
            handle = await provider.spawn(Spec(prompt=f"task {i}", cwd=job.workspace, sandbox=job.sandbox))  # type: ignore[arg-type]
            return [
                (event.exit_code, event.output)
                async for event in handle.events()
                if isinstance(event, ToolResult)
            ]

        outputs = await asyncio.gather(*(one(i) for i in range(job.turns)))
        done = time.perf_counter()
    _report(done, _check(outputs, job))


async def child_sdk(job: Job) -> None:
    from openai_codex import AsyncCodex, CodexConfig, Sandbox

    # AsyncCodex waits for each event in asyncio.to_thread: give it a thread per turn, not the
    # default min(32, cores + 4), so the SDK runs as concurrently as it can.
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=job.turns + 16))
    args = config_args(job.config)
    overrides = tuple(args[i + 1] for i in range(0, len(args), 2))
    config = CodexConfig(
        codex_bin=str(find_codex()), config_overrides=overrides, env=job.env, cwd=job.workspace
    )
    sandbox = {
        None: None,
        "read-only": Sandbox.read_only,
        "workspace-write": Sandbox.workspace_write,
        "danger-full-access": Sandbox.full_access,
    }[job.sandbox]
    async with AsyncCodex(config=config) as codex:

        async def one(i: int) -> list[Command]:
            thread = await codex.thread_start(cwd=job.workspace, sandbox=sandbox)
            result = await thread.run(f"task {i}")
            items = [item.model_dump(mode="json", by_alias=True) for item in result.items]
            return [
                (item.get("exitCode"), item.get("aggregatedOutput") or "")
                for item in items
                if item.get("type") == "commandExecution"
            ]

        outputs = await asyncio.gather(*(one(i) for i in range(job.turns)))
        done = time.perf_counter()
    _report(done, _check(outputs, job))


async def child_bare(job: Job) -> None:
    """One app-server, JSON-RPC by hand: initialize, N x (thread/start -> turn/start), accept every
    approval request, stop at N turn/completed. Same initialize capabilities and thread params as ours."""
    argv = [os.fspath(find_codex()), "app-server", *config_args(job.config)]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **job.env},
        cwd=job.workspace,
        limit=64 * 1024 * 1024,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def send(obj: dict[str, Any]) -> None:
        stdin.write(json.dumps(obj).encode() + b"\n")

    send(
        {
            "id": 0,
            "method": "initialize",
            "params": {
                "clientInfo": {"name": "bare", "title": "bare", "version": "0"},
                "capabilities": {
                    "experimentalApi": True,
                    "optOutNotificationMethods": list(OPT_OUT_NOTIFICATIONS),
                },
            },
        }
    )
    send({"method": "initialized"})
    thread_params: dict[str, Any] = {"approvalPolicy": job.approval, "cwd": job.workspace}
    if job.sandbox is not None:
        thread_params["sandbox"] = job.sandbox
    for i in range(job.turns):
        send({"id": 1000 + i, "method": "thread/start", "params": thread_params})
    outputs: dict[str, list[Command]] = {}
    completed = 0
    while completed < job.turns:
        line = await stdout.readline()
        if not line:
            raise SystemExit("bare: app-server closed stdout")
        msg = json.loads(line)
        rid, method = msg.get("id"), msg.get("method")
        if method is None:
            if isinstance(rid, int) and 1000 <= rid < 2000:
                tid = msg["result"]["thread"]["id"]
                outputs[tid] = []
                send(
                    {
                        "id": 2000 + rid,
                        "method": "turn/start",
                        "params": {
                            "threadId": tid,
                            "input": [{"type": "text", "text": f"task {rid - 1000}"}],
                        },
                    }
                )
        elif rid is not None:
            send({"id": rid, "result": {"decision": "acceptForSession"}})
        elif method == "item/completed":
            item = msg["params"]["item"]
            if item.get("type") == "commandExecution":
                command = (item.get("exitCode"), item.get("aggregatedOutput") or "")
                outputs[msg["params"]["threadId"]].append(command)
        elif method == "turn/completed":
            completed += 1
    done = time.perf_counter()
    stdin.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 5)
    if proc.returncode is None:
        proc.kill()
        await proc.wait()
    _report(done, _check(list(outputs.values()), job))


_T0 = 0.0
_CPU0 = 0.0


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _report(done: float, lost: int) -> None:
    # cpu0: what the child spent before the clock started (interpreter start, imports), so the parent
    # can leave it out of the process tree's CPU time.
    report = {"wall": done - _T0, "cpu0": _CPU0, "client_cpu": _cpu_self() - _CPU0, "lost": lost}
    print(json.dumps(report), flush=True)


def run_child(spec: str) -> int:
    global _T0, _CPU0
    job = Job(**json.loads(spec))
    arm = {"ours": child_ours, "exec": child_exec, "sdk": child_sdk, "bare": child_bare}[job.arm]
    if job.arm == "sdk":
        import openai_codex  # noqa: F401 - import before the clock starts, as agent_fleet already is
    _T0, _CPU0 = time.perf_counter(), _cpu_self()
    asyncio.run(arm(job))
    return 0


# -- parent side: children, memory sampling, table ------------------------------------------------


def children_cpu() -> float:
    """CPU seconds of every reaped descendant so far: a child's rusage includes what it reaped."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sample_peak_rss(pid: int, stop: threading.Event, out: list[int]) -> None:
    import psutil

    peak = 0
    peak_detail: list[tuple[int, str]] = []
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        out.append(0)
        return
    while not stop.is_set():
        total = 0
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        detail = []
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                rss = proc.memory_info().rss
                total += rss
                if DEBUG:
                    detail.append((rss, proc.name()))
        if total > peak and DEBUG:
            peak_detail[:] = detail
        peak = max(peak, total)
        stop.wait(SAMPLE_EVERY)
    out.append(peak)
    if DEBUG:
        by_name: dict[str, list[int]] = {}
        for rss, name in peak_detail:
            by_name.setdefault(name, []).append(rss)
        print(
            "peak by process: "
            + ", ".join(
                f"{n} x{len(v)} {mb(sum(v))}" for n, v in sorted(by_name.items(), key=lambda kv: -sum(kv[1]))
            ),
            file=sys.stderr,
        )


@dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float
    client_cpu: float
    peak: int
    lost: int


@dataclass
class Result:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)
    peak: list[int] = field(default_factory=list)
    lost: int = 0  # commands reported completed without their output

    def add(self, sample: Sample) -> None:
        self.wall.append(sample.wall)
        self.cpu.append(sample.cpu)
        self.client_cpu.append(sample.client_cpu)
        self.peak.append(sample.peak)
        self.lost += sample.lost


def run_arm(
    arm: str,
    server: ScriptedModelServer,
    turns: int,
    settings: Mapping[str, Any],
    tmp: Path,
    *,
    real_home: bool,
    commands: int = 1,
) -> Sample:
    home = Path(tempfile.mkdtemp(prefix=f"codex-home-{arm}-", dir=tmp))
    child_env = dict(os.environ)
    if not real_home:
        # An empty HOME: login shells read /etc/profile only, not this user's ~/.profile and ~/.bashrc.
        child_env["HOME"] = tempfile.mkdtemp(prefix=f"user-home-{arm}-", dir=tmp)
    workspace = Path(tempfile.mkdtemp(prefix=f"ws-{arm}-", dir=tmp))
    wiring = scripted_codex_env(server, home)
    job = Job(
        arm=arm,
        turns=turns,
        workspace=str(workspace),
        config={**wiring.config, **settings["config"]},
        env=dict(wiring.env),
        sandbox=settings["sandbox"],
        approval=settings["approval"],
        commands=commands,
    )
    cpu_before = children_cpu()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", json.dumps(job.__dict__)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env,
    )
    stop = threading.Event()
    peak: list[int] = []
    sampler = threading.Thread(target=sample_peak_rss, args=(proc.pid, stop, peak), daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise SystemExit(f"{arm}: timed out after {CHILD_TIMEOUT:g}s\n{err[-3000:]}") from None
    finally:
        stop.set()
        sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{arm}: child failed ({proc.returncode})\n{err[-3000:]}")
    report = json.loads(out.strip().splitlines()[-1])
    tree_cpu = children_cpu() - cpu_before - float(report["cpu0"])
    return Sample(float(report["wall"]), tree_cpu, float(report["client_cpu"]), peak[0], int(report["lost"]))


def mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB"


ARM_NAMES = {
    "ours": "(a) ours: one app-server, 16 threads (`CodexProvider`)",
    "exec": "(b) 16 `codex exec --json` processes (`CodexExecProvider`)",
    "sdk": "(c) official SDK: one app-server (`AsyncCodex`)",
    "bare": "(d) bare JSON-RPC driver, one app-server",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--turns", type=int, default=16, help="concurrent turns (default 16)")
    parser.add_argument("--delay", type=float, default=0.2, help="model latency per reply, s (default 0.2)")
    parser.add_argument("--commands", type=int, default=1, help="`echo hi` calls per turn (default 1)")
    parser.add_argument("--arms", default="ours,exec,sdk,bare", help="comma-separated subset")
    parser.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="extra codex config for every arm, e.g. -c features.shell_snapshot=false (repeatable)",
    )
    parser.add_argument("--only", default="", help="--explore: only settings whose name contains this")
    parser.add_argument("--explore", action="store_true", help="compare thread settings on the bare driver")
    parser.add_argument(
        "--real-home",
        action="store_true",
        help="keep $HOME for the arms (login shells then run your ~/.profile); default: an empty HOME",
    )
    parser.add_argument("--no-write", action="store_true", help=f"do not rewrite {DOC.name}")
    args = parser.parse_args()
    if args.child is not None:
        return run_child(args.child)

    with (
        ScriptedModelServer(responder=responder_for(args.delay, args.commands)) as server,
        tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp_name,
    ):
        tmp = Path(tmp_name)
        if args.explore:
            return explore(server, args, tmp)
        arms = args.arms.split(",")
        extra = dict(parse_config(item) for item in args.config)
        settings = {**DEFAULT_SETTINGS, "config": {**DEFAULT_SETTINGS["config"], **extra}}
        results = {arm: Result() for arm in arms}
        for r in range(args.rounds):
            for arm in arms:
                results[arm].add(
                    run_arm(
                        arm,
                        server,
                        args.turns,
                        settings,
                        tmp,
                        real_home=args.real_home,
                        commands=args.commands,
                    )
                )
            print(
                f"round {r + 1}/{args.rounds}: "
                + ", ".join(
                    f"{a} {results[a].wall[-1]:.2f}s {results[a].cpu[-1]:.1f}cpu-s {mb(results[a].peak[-1])}"
                    for a in arms
                ),
                file=sys.stderr,
            )

    rows = table(
        results,
        arms,
        ARM_NAMES,
        base=results.get("bare") or results[arms[0]],
        label="vs (d)",
        commands=args.commands * args.turns,
    )
    home = "the real" if args.real_home else "an empty"
    header = [
        "Generated by `bench/fleet_concurrency.py`: "
        f"{args.turns} turns at once, each scripted with {args.delay * 1000:.0f} ms of model latency per "
        f'reply, {args.commands} `exec_command("echo hi")` call(s) and a text reply, through the real codex '
        f"binary (fresh temporary `CODEX_HOME` per run, {home} `HOME`). Medians of {args.rounds} "
        "alternating rounds. Wall = "
        "client start to the last result. CPU = user + system time of the arm's whole process tree (client, "
        "codex, the commands it ran) after the client's own interpreter start-up: the work done, which a "
        "busy machine disturbs far less than wall time; client CPU = the Python client's share. Peak RSS = "
        "the largest sum of RSS over that tree "
        f"(sampled every {SAMPLE_EVERY * 1000:.0f} ms; pages shared between processes count in each).",
        "",
        *machine_lines(),
        f"- Thread settings (all arms): {describe(settings)}",
        "",
    ]
    lines = header + rows
    publish(SECTION, lines, FINDINGS, write=not args.no_write)
    return 0


def table(
    results: Mapping[str, Result],
    keys: list[str],
    names: Mapping[str, str],
    *,
    base: Result,
    label: str,
    commands: int,
) -> list[str]:
    """Median wall, CPU and peak RSS per row, each also as a ratio to ``base``."""
    base_wall, base_cpu = statistics.median(base.wall), statistics.median(base.cpu)
    base_peak = statistics.median(base.peak)
    rows = [
        f"| Arm | Wall (median) | Wall range | {label} | CPU (median) | {label} | Client CPU "
        f"| Peak RSS (median) | {label} | Output lost |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for key in keys:
        res = results[key]
        if not res.wall:
            continue
        wall, cpu, peak = statistics.median(res.wall), statistics.median(res.cpu), statistics.median(res.peak)
        rows.append(
            f"| {names[key]} | {wall:.2f} s | {min(res.wall):.2f}-{max(res.wall):.2f} s "
            f"| {wall / base_wall:.2f}x | {cpu:.1f} s | {cpu / base_cpu:.2f}x "
            f"| {statistics.median(res.client_cpu):.2f} s | {mb(peak)} | {peak / base_peak:.2f}x "
            f"| {res.lost}/{len(res.wall) * commands} |"
        )
    return rows


def parse_config(item: str) -> tuple[str, Any]:
    key, _, value = item.partition("=")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value  # a bare string


def describe(settings: Mapping[str, Any]) -> str:
    parts = [f"`approvalPolicy: {settings['approval']}`", f"sandbox `{settings['sandbox'] or 'default'}`"]
    parts += [f"`-c {k}={json.dumps(v)}`" for k, v in settings["config"].items()]
    return ", ".join(parts)


def explore(server: ScriptedModelServer, args: argparse.Namespace, tmp: Path) -> int:
    chosen = [(name, settings) for name, settings in EXPLORE if args.only in name or name == EXPLORE[0][0]]
    results = {name: Result() for name, _ in chosen}
    failures: dict[str, str] = {}
    for r in range(args.rounds):
        for name, settings in chosen:
            try:
                sample = run_arm(
                    "bare",
                    server,
                    args.turns,
                    settings,
                    tmp,
                    real_home=args.real_home,
                    commands=args.commands,
                )
            except SystemExit as exc:  # e.g. a setting under which the command never completes
                failures[name] = str(exc).splitlines()[0]
                print(f"round {r + 1}/{args.rounds}: {name}: failed: {failures[name]}", file=sys.stderr)
                continue
            results[name].add(sample)
            print(
                f"round {r + 1}/{args.rounds}: {name}: {sample.wall:.2f}s {mb(sample.peak)}", file=sys.stderr
            )
    names = {name: name for name, _ in chosen}
    rows = table(
        results,
        list(names),
        names,
        base=results[EXPLORE[0][0]],
        label="vs first row",
        commands=args.commands * args.turns,
    )
    rows[0] = rows[0].replace("| Arm |", "| Thread settings (bare driver, one app-server) |")
    rows += [
        f"| {name} | failed: {reason} | | | | | | | | |"
        for name, reason in failures.items()
        if not results[name].wall
    ]
    lines = [
        "Generated by `bench/fleet_concurrency.py --explore`: the bare driver (d) of the fleet benchmark "
        f"({args.turns} turns, {args.delay * 1000:.0f} ms model latency, `echo hi`) under several thread "
        f"settings, medians of {args.rounds} alternating rounds.",
        "",
        *machine_lines(),
        "",
        *rows,
    ]
    publish(EXPLORE_SECTION, lines, EXPLORE_FINDINGS, write=not args.no_write)
    return 0


# Static text: what the investigation behind this benchmark found (tables above are regenerated).
FINDINGS: list[str] = [
    "**Findings** (investigation of 2026-11-22, a 2-core machine shared with other heavy jobs, load "
    "average 10-50). The Python side is not where a fleet's time goes: for 16 turns our client uses "
    "about 0.06 CPU-seconds, the same as the bare driver (the official SDK about 0.2 s); everything "
    "else is codex and the commands it runs (a bubblewrap sandbox and a login shell per command). So "
    "(a) tracks (d) within the noise -- medians over several runs put it between 0.9x and 1.16x of (d) "
    "in wall time and 0.92x-1.13x in tree CPU -- and no change to our code was warranted here; "
    "profiling the event path is the throughput benchmark's job.",
    "",
    "The user's login profile dominated everything else on this machine: with the real `HOME` "
    "(`~/.bashrc` runs `pyenv init`, whose `rehash` takes a machine-wide lock that every login shell, "
    "including codex's per-thread shell snapshot outside the sandbox, contends for) 16 turns took "
    "6-24 s with wild variance; with an empty `HOME` 2-4.5 s. The benchmark therefore gives each arm "
    "an empty `HOME` by default (`--real-home` keeps yours).",
    "",
    "Memory: one app-server with 16 threads peaks at 0.3-0.5 GB for the whole tree, the same as the "
    "official SDK's; 16 `codex exec` processes peak at 2.6-3.2 GB (each codex process is 150-190 MB "
    "RSS). Most of a single app-server's peak is transient: the sandbox helpers and shells of the "
    "commands running at that moment. Targets: (a) within 1.05x of (d) -- met within the noise of this "
    "machine (median ratios 0.90x-1.03x in the quieter runs, one 1.16x under load); (a) no slower than "
    "(c) -- met (with an empty `HOME` ours' median was at or below the SDK's in every run; the SDK "
    "was 0.97x-1.3x of (d)); (a) at most a quarter of (b)'s peak memory -- met (0.13x-0.15x).",
    "",
    "codex 0.163.0 sometimes reports a fast command as completed, exit code 0, with "
    "`aggregatedOutput: null` -- its output is lost (the `Output lost` column; about 0.5-2 % of "
    "commands, in every arm and under every thread setting tried, more often the faster the shell "
    "starts). It is the binary's behaviour, seen by the bare driver too, not ours.",
    "",
    "Measured again on 2026-11-26 (after issues 27, 29 and 30 landed), at a load average of 11: the "
    "client's CPU is back to 0.10 s for 16 turns (it had grown to ~0.7 s while building the policy's rule "
    "packs matched every program with fnmatch, since fixed in the policy); wall 1.45x and tree CPU 1.32x "
    "of (d) in that run, where the targets above were met at a load of 2-5, so (a) against (d) needs a "
    "quieter machine to judge. One of two runs failed: 3 of 16 turns of arm (a) ran no `echo hi` (not "
    "seen again in the next run).",
]
EXPLORE_FINDINGS: list[str] = [
    "**Findings** (alternating runs on 2026-11-22, 1 and 5 commands per turn, empty and real `HOME`). "
    "With a light login profile the binary's thread settings move a 16-turn fleet by 20 % at most: "
    "`approvalPolicy: never` is no cheaper than `untrusted` (CPU 0.95x-1.04x; an approval is one "
    "local round trip, and our bridge needs `untrusted`); `workspace-write` costs up to 12 % more "
    "CPU than the read-only default; `danger-full-access` saves 10-18 % CPU by skipping bubblewrap "
    "but removes the "
    "sandbox, and with a real `~/.bashrc` its unsandboxed login shells stalled ~10 s on pyenv's rehash "
    "lock; `allow_login_shell=false` saves little (CPU 0.93x-1.02x: the per-thread shell "
    "snapshot still runs a login shell) and changes what commands see (no login profile at all).",
    "",
    "`features.shell_snapshot=false` is the one consistent gain: 0.73x-0.94x wall and 0.84x-0.98x CPU "
    "(one run under load 30: 1.04x wall), with 1 and 5 commands per turn, empty and real `HOME` alike; "
    "two back-to-back runs of the whole fleet benchmark with and without it (not alternated, so weaker "
    "evidence) showed 20-25 % less tree CPU for every arm. It is safe: commands still run as `bash -lc` "
    "and still source the login profile (visible in their output), so they see the same environment; "
    "what goes is the extra login shell per thread that codex starts outside the sandbox to take the "
    "snapshot, and that each thread's first command waits for. Recommended default for the "
    "app-server provider's threads: keep `approvalPolicy: untrusted` and the read-only sandbox, and "
    "pass `-c features.shell_snapshot=false` (a user's `config` still wins).",
]


if __name__ == "__main__":
    sys.exit(main())
