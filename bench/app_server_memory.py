"""App-server memory over a long batch: one codex app-server, 2,000 tasks, its RSS as tasks finish.

``run_batch`` runs the tasks on ONE ``CodexProvider`` (one ``codex app-server`` child) against the
loopback scripted model (every turn answered at once with a short text), ``--jobs`` at a time, with a
fresh temporary ``CODEX_HOME``. The app-server's RSS (``/proc/PID/status`` ``VmRSS``) is read when 500,
1,000 and 2,000 tasks have finished.

Two runs side by side:

* **archived** (what the runner does): each finished session is archived (``thread/archive``), so
  the app-server holds memory for its live sessions only. Flat means the RSS at 2,000 finished tasks
  is within 20 % of the RSS at 500.
* **kept** (before issue 29): the same provider with ``archive_session`` turned into a no-op, so
  every finished thread stays loaded (``--kept-tasks``, default 1,000: it grows by about a megabyte
  a task).

Prints a table and rewrites the "## App-server memory" section of ``docs/benchmarks.md``
(``--no-write`` to only print).

    nice -n 10 .venv/bin/python bench/app_server_memory.py [--tasks 2000] [--kept-tasks 1000] [--jobs 16]

A benchmark, not a test: the numbers depend on the machine, its load and the codex version.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from _report import machine_lines, publish

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.runner import Task, run_batch
from agent_fleet.runner.batch import BatchEntry, BatchTask
from agent_fleet.testing import Reply, ScriptedModelServer, Text, scripted_codex_env

MARKS = (500, 1000, 2000)


class _Kept(CodexProvider):
    """The provider as it was before issue 29: finished threads stay loaded."""

    async def archive_session(self, session_id: str) -> None:
        return None


@dataclass
class Run:
    mode: str
    tasks: int
    seconds: float = 0.0
    start_rss_mb: float = 0.0
    rss_mb: dict[int, float] = field(default_factory=dict)
    succeeded: int = 0


def _rss_mb(pid: int | None) -> float:
    if pid is None:
        return 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def one(server: ScriptedModelServer, mode: str, size: int, jobs: int) -> Run:
    run = Run(mode=mode, tasks=size)
    with tempfile.TemporaryDirectory(prefix="bench-appmem-") as tmp:
        root = Path(tmp)
        env = scripted_codex_env(server, root / "codex-home")
        options = CodexOptions(config=dict(env.config), env=dict(env.env))
        work = root / "work"
        work.mkdir()
        provider = (_Kept if mode == "kept" else CodexProvider)(options)
        tasks = (BatchTask(id=f"t{n:05d}", prompt=f"task {n}: say done", line=n + 1) for n in range(size))
        finished = 0

        def on_result(entry: BatchEntry) -> None:
            nonlocal finished
            finished += 1
            run.succeeded += entry.result.ok
            if finished in MARKS or finished == size:
                run.rss_mb[finished] = _rss_mb(provider.pid)
                print(
                    f"{mode}: {finished} finished, app-server {run.rss_mb[finished]:.0f} MB", file=sys.stderr
                )

        async with provider:
            run.start_rss_mb = _rss_mb(provider.pid)
            started = time.monotonic()
            await run_batch(
                tasks,
                template=Task(spec=Spec(prompt="-", cwd=work), retries=0),
                out_dir=root / "out",
                jobs=jobs,
                provider=provider,
                on_result=on_result,
            )
            run.seconds = time.monotonic() - started
    return run


async def amain(args: argparse.Namespace) -> list[Run]:
    runs = []
    with ScriptedModelServer() as server:
        server.responder = lambda request: Reply(items=(Text(text="done"),))
        runs.append(await one(server, "archived", args.tasks, args.jobs))
        if args.kept_tasks:
            runs.append(await one(server, "kept", args.kept_tasks, args.jobs))
    return runs


def _cell(run: Run, mark: int) -> str:
    value = run.rss_mb.get(mark)
    return f"{value:.0f} MB" if value is not None else "—"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--kept-tasks", type=int, default=1000, help="0: skip the run without archiving")
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    runs = asyncio.run(amain(args))
    print(json.dumps([r.__dict__ for r in runs], default=str), file=sys.stderr)
    lines = [
        *machine_lines(),
        f"- `run_batch -j {args.jobs}` on one `CodexProvider` (one app-server), scripted model answering "
        "each turn at once with a short text; the app-server's RSS as tasks finish",
        "",
        "| finished sessions | start | " + " | ".join(f"{m:,} finished" for m in MARKS) + " | 2,000 / 500 | "
        "tasks/s |",
        "|---|---:|" + "---:|" * len(MARKS) + "---:|---:|",
    ]
    for r in runs:
        ratio = (
            f"{r.rss_mb[MARKS[-1]] / r.rss_mb[MARKS[0]]:.2f}x"
            if MARKS[-1] in r.rss_mb and MARKS[0] in r.rss_mb
            else "—"
        )
        lines.append(
            f"| {r.mode} | {r.start_rss_mb:.0f} MB | "
            + " | ".join(_cell(r, m) for m in MARKS)
            + f" | {ratio} | {r.tasks / r.seconds:.1f} |"
        )
    findings = [
        "**Findings.** codex keeps every thread it ran loaded until it is archived or the app-server "
        "ends (issue 29: a real 1,000-task batch ended at 1,337 MB). `run_task` on a shared provider now "
        "archives each session that finished (`Provider.archive_session`, `thread/archive`) and each "
        "review's; a stopped task's session stays loaded for its resume, and `resume` of an archived one "
        "unarchives it first. Flat: within 20 % between 500 and 2,000 finished tasks.",
    ]
    publish("## App-server memory", lines, findings, write=not args.no_write)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
