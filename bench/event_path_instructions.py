"""Instructions per streamed event through our event path, counted by valgrind: exact and repeatable.

Wall and CPU time on a small shared machine vary by +-25 % between identical runs, which hides any
single change worth a few percent. Instruction counts do not vary, so this is the tool for judging one
change to the hot path (``bench/event_throughput.py`` is the one for the result, side by side with the
official SDK).

The pipeline runs in one process, without a child: a pre-rendered turn of N
``item/agentMessage/delta`` notifications (``_fake_stream_server.render_burst``) is fed in 64 KiB
chunks through ``Connection`` -> ``CodexHandle`` -> ``handle.events()``, the same code a real
``CodexProvider`` runs per event. It is run under ``valgrind --tool=cachegrind`` at two sizes;
(instructions at N - instructions at N/10) / (0.9 N) cancels interpreter start-up and imports.

    .venv/bin/python bench/event_path_instructions.py [--deltas 20000] [--src path/to/other/src]

``--src`` measures another checkout's ``src`` (e.g. a ``git worktree`` of an older commit) with the
same harness. Needs valgrind (``apt-get install valgrind``). Prints; writes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


async def _pipeline(burst: bytes, n: int) -> None:
    from _fake_stream_server import THREAD_ID, TURN_ID

    from agent_fleet import Spec, TextDelta
    from agent_fleet.codex.appserver import _route
    from agent_fleet.codex.handle import CodexHandle

    try:
        from agent_fleet.codex._turn import AppServerTurn
    except ImportError:  # a checkout from before the turn's state moved to its own module (--src)
        from agent_fleet.codex.handle import _AppServerTurn as AppServerTurn  # type: ignore[attr-defined,no-redef]
    from agent_fleet.codex.options import CodexOptions
    from agent_fleet.jsonrpc import Connection
    from agent_fleet.policy import ApprovalPolicy

    chunks = [burst[i : i + 65536] for i in range(0, len(burst), 65536)]

    class Transport:
        async def receive(self) -> bytes:
            await asyncio.sleep(0)  # a read from a pipe yields to the loop too
            if chunks:
                return chunks.pop(0)
            await asyncio.Event().wait()
            return b""

        async def send(self, data: bytes) -> None:
            pass

        async def close(self) -> None:
            pass

    class Provider:  # what a handle reads of its provider
        options = CodexOptions()
        closed = False

    class Host:  # what a handle asks of its host
        def spawn_task(self, coro: object, name: str) -> asyncio.Future[object]:
            return asyncio.ensure_future(coro)  # type: ignore[arg-type]

        def forget(self, handle: object) -> None:
            pass

        def rekey(self, handle: object, new_id: str) -> None:
            pass

    conn = Connection(Transport(), route_key=_route)
    spec = Spec(prompt="x")
    handle = CodexHandle(Provider(), Host(), conn, THREAD_ID, spec, ApprovalPolicy(), "/tmp")  # type: ignore[arg-type]
    turn = AppServerTurn(THREAD_ID, structured=False, bound=None)
    turn.turn_id = turn.mapper.turn_id = TURN_ID
    if getattr(spec, "idle_timeout", None):  # as start_turn arms it (checkouts that have one)
        from agent_fleet._provider.watchdog import IdleWatchdog

        turn.watchdog = IdleWatchdog(spec.idle_timeout, lambda: None)
    handle._turn = turn
    conn.start()
    seen = 0
    async for event in handle.events():
        seen += type(event) is TextDelta
    await conn.close()
    if seen != n:
        raise SystemExit(f"{seen} deltas, expected {n}")


def _count(src: Path | None, burst: Path, n: int) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(src) if src else "", str(HERE)]))}
    out = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            str(burst),
            str(n),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stderr
    match = re.search(r"I\s+refs:\s+([\d,]+)", out)
    if match is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{out[-2000:]}")
    return int(match.group(1).replace(",", ""))


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        asyncio.run(_pipeline(Path(sys.argv[2]).read_bytes(), int(sys.argv[3])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=20_000, help="deltas in the larger run (default 20000)")
    parser.add_argument("--src", type=Path, help="the src directory of another checkout to measure")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    sys.path.insert(0, str(HERE))
    from _fake_stream_server import render_burst

    big, small = args.deltas, args.deltas // 10
    with tempfile.TemporaryDirectory(prefix="bench-instr-") as tmp:
        counts = {}
        for n in (small, big):
            path = Path(tmp) / f"burst{n}.bin"
            path.write_bytes(render_burst(n))
            counts[n] = _count(args.src, path, n)
    per = (counts[big] - counts[small]) / (big - small)
    print(f"{per:,.0f} instructions per delta ({args.src or 'this checkout'}; {small:,} vs {big:,} deltas)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
