"""The daemon's app-server memory over 2,000 sessions: finished threads let go, so memory follows the
sessions that are loaded, not the history.

An ``agent-fleet serve`` daemon (in this process, uvicorn on loopback) runs ``--sessions`` sessions
through its HTTP API (``--clients`` at a time: POST /v1/sessions, read the event stream to its
``Result``) on its one codex app-server, against the loopback scripted model (each turn answered at
once with a short text), with a fresh temporary ``CODEX_HOME``. At most ``--max-live`` finished
sessions stay loaded (``ServeConfig.max_live_sessions``); the daemon archives the threads it evicts
(``Provider.archive_session``). The app-server's RSS (``VmRSS``) is read when 500, 1,000 and 2,000
sessions have finished.

Two runs side by side: **archived** (the daemon as it is) and **kept** (``archive_session`` a no-op on
the daemon's provider: an evicted thread stays loaded in the app-server, as before issue 28;
``--kept-sessions``, default 500). Then a session evicted long ago is resumed (brought back from the
archive) to show it still continues.

    nice -n 10 .venv/bin/python bench/serve_memory.py [--sessions 2000] [--kept-sessions 500]

Prints a table and rewrites the "## Daemon memory" section of ``docs/benchmarks.md`` (``--no-write``
to only print). A benchmark, not a test: the numbers depend on the machine, its load and codex.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _report import machine_lines, publish
from httpx_sse import aconnect_sse

from agent_fleet.codex import CodexOptions
from agent_fleet.serve import Daemon, ServeConfig
from agent_fleet.testing import Reply, ScriptedModelServer, Text, scripted_codex_env

MARKS = (500, 1000, 2000)
TOKEN = "bench-token-0123456789abcdef"


@dataclass
class Run:
    mode: str
    sessions: int
    seconds: float = 0.0
    start_rss_mb: float = 0.0
    rss_mb: dict[int, float] = field(default_factory=dict)
    resumed: str = "—"


def _rss_mb(pid: int | None) -> float:
    if pid is None:
        return 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def _session(http: httpx.AsyncClient, cwd: Path, n: int) -> str:
    created = await http.post("/v1/sessions", json={"prompt": f"session {n}: say done", "cwd": str(cwd)})
    created.raise_for_status()
    sid = str(created.json()["session_id"])
    async with aconnect_sse(http, "GET", f"/v1/sessions/{sid}/events") as source:
        async for sse in source.aiter_sse():
            if '"type":"Result"' in sse.data or '"type":"Error"' in sse.data:
                break
    return sid


async def one(server: ScriptedModelServer, mode: str, size: int, clients: int, max_live: int) -> Run:
    run = Run(mode=mode, sessions=size)
    with tempfile.TemporaryDirectory(prefix="bench-servemem-") as tmp:
        root = Path(tmp)
        env = scripted_codex_env(server, root / "codex-home")
        options = CodexOptions(config=dict(env.config), env=dict(env.env))
        work = root / "work"
        work.mkdir()
        token = root / "token"
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(TOKEN + "\n")
        config = ServeConfig(
            state_dir=root / "state",
            token_file=token,
            options={"codex": options},
            allow_roots=(work,),
            max_live_sessions=max_live,
        )
        async with Daemon(config) as daemon:
            provider: Any = await daemon.sessions.provider("codex")
            if mode == "kept":
                provider.archive_session = _no_archive  # evicted threads stay in the app-server
            run.start_rss_mb = _rss_mb(provider.pid)
            headers = {"Authorization": f"Bearer {TOKEN}"}
            limits = httpx.Limits(max_connections=clients * 2)
            timeout = httpx.Timeout(120)
            async with httpx.AsyncClient(
                base_url=daemon.url, headers=headers, limits=limits, timeout=timeout
            ) as http:
                started = time.monotonic()
                done = 0
                first: str | None = None
                queue = iter(range(size))

                async def worker() -> None:
                    nonlocal done, first
                    for n in queue:
                        sid = await _session(http, work, n)
                        first = first or sid
                        done += 1
                        if done in MARKS or done == size:
                            run.rss_mb[done] = _rss_mb(provider.pid)
                            print(
                                f"{mode}: {done} finished, app-server {run.rss_mb[done]:.0f} MB",
                                file=sys.stderr,
                            )

                await asyncio.gather(*(worker() for _ in range(clients)))
                run.seconds = time.monotonic() - started
                if first is not None:  # evicted (and archived) long ago: it still continues
                    turn = await http.post(f"/v1/sessions/{first}/turns", json={"prompt": "still there?"})
                    run.resumed = "yes" if turn.status_code == 200 else f"no ({turn.status_code})"
                    if turn.status_code == 200:
                        async with aconnect_sse(
                            http,
                            "GET",
                            f"/v1/sessions/{first}/events",
                            headers={"Last-Event-ID": str(turn.json()["last_event_id"])},
                        ) as source:
                            async for sse in source.aiter_sse():
                                if '"type":"Result"' in sse.data or '"type":"Error"' in sse.data:
                                    run.resumed = "yes" if '"type":"Result"' in sse.data else "failed"
                                    break
    return run


async def _no_archive(session_id: str) -> None:
    return None


async def amain(args: argparse.Namespace) -> list[Run]:
    runs = []
    with ScriptedModelServer() as server:
        server.responder = lambda request: Reply(items=(Text(text="done"),))
        runs.append(await one(server, "archived", args.sessions, args.clients, args.max_live))
        if args.kept_sessions:
            runs.append(await one(server, "kept", args.kept_sessions, args.clients, args.max_live))
    return runs


def _cell(values: dict[int, float], mark: int) -> str:
    value = values.get(mark)
    return f"{value:.0f} MB" if value is not None else "—"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--kept-sessions", type=int, default=500, help="0: skip the run that keeps threads")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--max-live", type=int, default=64)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    runs = asyncio.run(amain(args))
    lines = [
        *machine_lines(),
        f"- `agent-fleet serve` (in process), {args.clients} clients over HTTP, each session one turn "
        f"answered at once by the scripted model; at most {args.max_live} finished sessions loaded",
        "",
        "| evicted threads | app-server at start | "
        + " | ".join(f"{m:,} finished" for m in MARKS)
        + " | 2,000 / 500 | sessions/s | first session continued |",
        "|---|---:|" + "---:|" * len(MARKS) + "---:|---:|---|",
    ]
    for r in runs:
        ratio = (
            f"{r.rss_mb[MARKS[-1]] / r.rss_mb[MARKS[0]]:.2f}x"
            if MARKS[-1] in r.rss_mb and MARKS[0] in r.rss_mb
            else "—"
        )
        lines.append(
            f"| {r.mode} | {r.start_rss_mb:.0f} MB | "
            + " | ".join(_cell(r.rss_mb, m) for m in MARKS)
            + f" | {ratio} | {r.sessions / r.seconds:.1f} | {r.resumed} |"
        )
    findings = [
        "The daemon unloads the least recently finished sessions beyond `max_live_sessions` and archives "
        "their threads, so the app-server holds memory for the loaded sessions only; a turn sent to an "
        "unloaded session brings its thread back (`unarchive_session`) and resumes it.",
    ]
    publish("## Daemon memory", lines, findings, write=not args.no_write)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
