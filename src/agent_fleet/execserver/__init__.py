"""A client for ``codex exec-server``: run processes and touch files on a (possibly remote) host.

Theory of operation
-------------------
``codex exec-server`` speaks JSON-RPC (the Codex dialect: no ``"jsonrpc"`` field) over a websocket
(``--listen ws://IP:PORT``; one message per frame) or stdio (``--listen stdio``; JSON Lines). After the
``initialize`` / ``initialized`` handshake the client starts processes (``process/start``) and the
server *pushes* their events, numbered per process by ``seq``: ``process/output`` chunks, one
``process/exited`` (with ``sandboxDenied``) and finally ``process/closed``.

A process completes from those pushed events alone: a complete, in-order stream costs zero
``process/read`` calls (one round trip fewer per command than reading the final state). Reads are the
fallback -- one when ``exited`` lacks ``sandboxDenied`` (an older server), one per sequence gap, one per
process after notifications were lost (a reconnection) -- and they recover output byte-exact from the
server's retained window (1 MiB per process), or report ``truncated=True`` when it no longer holds it.

Layers: ``_assembly`` (pure ordering/completion logic, no I/O) <- ``process`` (``RemoteProcess``:
timers and reads) <- ``client`` (``ExecServerClient``: connection, handshake, reconnection) over
``agent_fleet.jsonrpc``; ``fs`` wraps the ``fs/*`` methods.

Example::

    async with ExecServerClient.spawn() as client:          # or .connect("ws://127.0.0.1:PORT")
        result = await client.run(["git", "status"], cwd="/repo")
        assert client.stats.read_calls == 0
"""

from agent_fleet.execserver._assembly import Stream
from agent_fleet.execserver._transport import WebSocketTransport
from agent_fleet.execserver._websocket_server import serve_websocket
from agent_fleet.execserver.client import ExecServerClient, ExecServerStats
from agent_fleet.execserver.errors import (
    ExecServerError,
    InternalServerError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    NotFoundError,
    ProcessTimeout,
    WriteRejected,
)
from agent_fleet.execserver.fs import DirectoryEntry, FileMetadata, FileSystem
from agent_fleet.execserver.process import ProcessResult, RemoteProcess

__all__ = [
    "DirectoryEntry",
    "ExecServerClient",
    "ExecServerError",
    "ExecServerStats",
    "FileMetadata",
    "FileSystem",
    "InternalServerError",
    "InvalidParamsError",
    "InvalidRequestError",
    "MethodNotFoundError",
    "NotFoundError",
    "ProcessResult",
    "ProcessTimeout",
    "RemoteProcess",
    "Stream",
    "WebSocketTransport",
    "WriteRejected",
    "serve_websocket",
]
