"""``serve_websocket``: a local ``codex exec-server`` listening on a websocket, for as long as needed."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager

from agent_fleet._codex_binary import find_codex
from agent_fleet.errors import ProviderUnavailable
from agent_fleet.execserver._transport import ChildTransport, spawn_child

__all__ = ["serve_websocket"]


@asynccontextmanager
async def serve_websocket(
    codex_bin: str | os.PathLike[str] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    startup_timeout: float = 30.0,
) -> AsyncIterator[str]:
    """Run ``codex exec-server --listen ws://host:port`` and yield its URL; kill it on exit.

    With ``port=0`` the server picks a free port and prints the bound URL (``ws://127.0.0.1:PORT``) as
    its first stdout line, which is what is yielded. Raises ``ProviderUnavailable`` if it does not
    start listening within ``startup_timeout`` seconds.
    """
    codex = find_codex(codex_bin)
    proc = await spawn_child(
        codex,
        ["exec-server", "--listen", f"ws://{host}:{port}", *args],
        env=env,
    )
    # ChildTransport drains stderr, and its close() stops (SIGTERM, then SIGKILL) the child.
    transport = ChildTransport(proc, stops_on_eof=False)
    assert proc.stdout is not None
    try:
        try:
            async with asyncio.timeout(startup_timeout):
                line = await proc.stdout.readline()
        except TimeoutError:
            line = b""
        url = line.decode(errors="replace").strip()
        if not url.startswith("ws://"):
            raise ProviderUnavailable(
                f"codex exec-server did not report a ws:// URL (got {url!r})",
                stderr_tail=transport.stderr_tail(),
            )

        async def drain_stdout() -> None:
            assert proc.stdout is not None
            while await proc.stdout.read(65536):
                pass

        drain = asyncio.get_running_loop().create_task(drain_stdout(), name="exec-server:stdout")
        try:
            yield url
        finally:
            drain.cancel()
    finally:
        await transport.close()
