"""Overload: how many of N simultaneous spawns on one ``codex app-server`` succeed.

One ``CodexProvider`` (one app-server child) against one loopback scripted model server; N sessions
are spawned at once (``thread/start`` + ``turn/start`` each), then every turn is awaited. codex refuses
requests its ingress queue has no room for with JSON-RPC -32001 ("Server overloaded"); the provider
retries those (``agent_fleet.codex.retry_on_overload``: backoff with jitter, bounded by
``rpc_timeout``). Reports failed spawns, failed turns, the refusals retried (requests written beyond one
per session) and the wall time. Rewrites the "## Spawn overload" section of ``docs/benchmarks.md``.

    cd bench && nice -n 10 ../.venv/bin/python spawn_overload.py [--sessions 1024] [--rpc-timeout S]

A benchmark, not a test: timings depend on the machine and its load; the counts are the result.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from _report import machine_lines, publish

from agent_fleet import Result, Spec
from agent_fleet.codex import CodexHandle, CodexOptions, CodexProvider
from agent_fleet.testing import Reply, ScriptedModelServer, scripted_codex_env

SECTION = "## Spawn overload"
FINDINGS = [
    'Issue 32 saw ~20 % of 512 simultaneous `thread/start`s refused with -32001 ("Server overloaded")',
    "and no retry of `turn/start`. Every refusal is now retried (`retry_on_overload`: jittered",
    "exponential backoff, 50 ms doubling to 2 s, within the request's `rpc_timeout`). Over stdio codex",
    "0.163 refused none here; what failed was the queue: with all 1,024 `thread/start`s sent at once,",
    "235 had no answer after 600 s (they waited behind the others inside codex until their timeout ran",
    "out). The provider now keeps at most 32 thread starts (start, resume, fork) in",
    "flight, so each gets its whole `rpc_timeout` inside codex: 0 failed spawns.",
]


async def run(sessions: int, tmp: Path, rpc_timeout: float) -> list[str]:
    with ScriptedModelServer(default=Reply.text("ok")) as server:
        env = scripted_codex_env(server, tmp / "home")
        options = CodexOptions(config=env.config, env=env.env, rpc_timeout=rpc_timeout)
        work = tmp / "work"
        work.mkdir()
        async with CodexProvider(options) as provider:
            started = time.perf_counter()
            spawned = await asyncio.gather(
                *(
                    provider.spawn(Spec(prompt=f"task {n}", cwd=work, idle_timeout=None))
                    for n in range(sessions)
                ),
                return_exceptions=True,
            )
            spawn_time = time.perf_counter() - started
            handles = [h for h in spawned if isinstance(h, CodexHandle)]
            failed_spawns = [h for h in spawned if not isinstance(h, CodexHandle)]
            results = await asyncio.gather(*(h.wait() for h in handles), return_exceptions=True)
            total = time.perf_counter() - started
            sent = provider.connection.requests_sent
    ok = sum(isinstance(r, Result) for r in results)
    errors = sorted({f"{type(e).__name__}: {e}"[:120] for e in failed_spawns})
    return [
        *machine_lines(),
        "",
        "| sessions | failed spawns | failed turns | thread/start sent | turn/start sent | spawn wall "
        "| all turns |",
        "|---|---|---|---|---|---|---|",
        f"| {sessions} | {len(failed_spawns)} | {len(handles) - ok} | {sent['thread/start']} | "
        f"{sent['turn/start']} | {spawn_time:.1f} s | {total:.1f} s |",
        *([""] + [f"- spawn error: `{e}`" for e in errors] if errors else []),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1024)
    parser.add_argument("--rpc-timeout", type=float, default=600.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agent-fleet-bench-") as tmp:
        lines = asyncio.run(run(args.sessions, Path(tmp), args.rpc_timeout))
    publish(SECTION, lines, FINDINGS, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
