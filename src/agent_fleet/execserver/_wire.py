"""Wire shapes of the exec-server protocol: ``file:`` URIs, base64 and decoding of results and events.

Pure helpers; every decoder raises ``RemoteProtocolError`` on a shape the protocol does not allow.

The protocol as spoken by the pinned codex 0.163.0 (checked against the binary, not only the README)
----------------------------------------------------------------------------------------------------
* Start: ``codex exec-server --listen stdio`` (JSON Lines on stdin/stdout; exits, killing its
  processes, at stdin EOF) or ``--listen ws://IP:PORT`` (one JSON message per websocket frame; with
  port 0 the bound ``ws://127.0.0.1:PORT`` is the first stdout line). Messages omit ``"jsonrpc"``.
* ``initialize {clientName, resumeSessionId?}`` -> ``{sessionId, environmentInfo: {shell, cwd (URI),
  executorVersion, platformOs, userHomeDir, ...}}``, then notification ``initialized``. A detached
  websocket session is kept ~30 s; ``resumeSessionId`` re-attaches it (unknown id: -32600; still
  attached: -32010) and its notifications flow to the new connection.
* ``process/start {processId, argv, cwd (file: URI), env, envPolicy?, tty, pipeStdin, arg0}`` ->
  ``{processId, sandboxType}``. ``env`` is the exact environment unless ``envPolicy {inherit: all|core|
  none, ignoreDefaultExcludes, exclude, set, includeOnly}`` is given. Empty argv: -32602; duplicate id:
  -32600; unspawnable program or cwd: -32603.
* Notifications ``process/output {processId, seq, stream: stdout|stderr|pty, chunk (base64)}``,
  ``process/exited {processId, seq, exitCode, sandboxDenied}``, ``process/closed {processId, seq}``;
  one seq counter per process covers all three; output may follow ``exited``.
* ``process/read {processId, afterSeq, maxBytes?, waitMs?}`` -> ``{chunks: [{seq, stream, chunk}],
  nextSeq, exited, exitCode, closed, failure, sandboxDenied}``; retained output is the last 1 MiB per
  process, and a closed process stays readable ~30 s. Quirk: with ``maxBytes`` cutting the answer,
  ``nextSeq`` is one past the last chunk even when ``closed`` is true -- so this client never sends it.
* ``process/write {processId, chunk (base64), writeId}`` (``writeId`` is required) -> ``{status:
  accepted|unknownProcess|stdinClosed|starting}``; ``process/terminate {processId}`` -> ``{running}``;
  ``process/signal {processId, signal: "interrupt"}`` -> ``{}``.
* ``fs/readFile|writeFile|createDirectory|getMetadata|readDirectory|remove|copy|canonicalize`` take
  ``file:`` URIs (native paths: -32602). A missing path is -32004; ``fs/copy`` requires ``recursive``;
  ``fs/remove`` defaults to recursive and forced when the flags are omitted.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote_to_bytes, urlsplit

from agent_fleet.errors import RemoteProtocolError, UsageError
from agent_fleet.execserver._assembly import Chunk, ReadSnapshot, Stream

__all__ = [
    "b64decode",
    "b64encode",
    "decode_chunk",
    "decode_closed",
    "decode_exited",
    "decode_read",
    "from_uri",
    "to_uri",
]

_STREAMS: dict[str, Stream] = {"stdout": "stdout", "stderr": "stderr", "pty": "pty"}


def to_uri(path: str | os.PathLike[str]) -> str:
    """A native absolute path (or a ``file:`` URI, passed through) as the ``file:`` URI the server wants.

    The path names a file on the exec-server's host, so a relative path has no meaning: ``UsageError``.
    """
    raw = os.fspath(path)
    if raw.startswith("file:"):
        return raw
    posix = PurePosixPath(raw)
    if not posix.is_absolute():
        raise UsageError(f"exec-server paths must be absolute, got {raw!r}")
    return posix.as_uri()


def from_uri(uri: str) -> str:
    """A ``file:`` URI from the server as a native path string."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        raise RemoteProtocolError(f"expected a file: URI, got {uri!r}")
    return os.fsdecode(unquote_to_bytes(parts.path))


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise RemoteProtocolError(f"{what}: expected a base64 string, got {type(text).__name__}")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RemoteProtocolError(f"{what}: invalid base64: {exc}") from exc


def _int(obj: dict[str, Any], key: str, what: str) -> int:
    value = obj.get(key)
    if type(value) is not int:
        raise RemoteProtocolError(f"{what}: {key} must be an integer, got {value!r}")
    return value


def _opt_bool(obj: dict[str, Any], key: str, what: str) -> bool | None:
    value = obj.get(key)
    if value is None or type(value) is bool:
        return value
    raise RemoteProtocolError(f"{what}: {key} must be a boolean, got {value!r}")


def _object(obj: Any, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise RemoteProtocolError(f"{what}: expected an object, got {type(obj).__name__}")
    return obj


def decode_chunk(obj: Any, what: str) -> Chunk:
    """``{"seq", "stream", "chunk"}`` (a read chunk or ``process/output`` params) as a ``Chunk``."""
    obj = _object(obj, what)
    stream = _STREAMS.get(str(obj.get("stream")))
    if stream is None:
        raise RemoteProtocolError(f"{what}: unknown stream {obj.get('stream')!r}")
    return Chunk(_int(obj, "seq", what), stream, b64decode(obj.get("chunk"), what))


def decode_read(result: Any) -> ReadSnapshot:
    """A ``process/read`` result as a ``ReadSnapshot``."""
    what = "process/read result"
    obj = _object(result, what)
    chunks = obj.get("chunks")
    if not isinstance(chunks, list):
        raise RemoteProtocolError(f"{what}: chunks must be a list")
    exit_code = obj.get("exitCode")
    if exit_code is not None and type(exit_code) is not int:
        raise RemoteProtocolError(f"{what}: exitCode must be an integer or null")
    failure = obj.get("failure")
    if failure is not None and not isinstance(failure, str):
        failure = str(failure)
    return ReadSnapshot(
        chunks=tuple(decode_chunk(c, what) for c in chunks),
        next_seq=_int(obj, "nextSeq", what),
        exited=bool(_opt_bool(obj, "exited", what)),
        exit_code=exit_code,
        closed=bool(_opt_bool(obj, "closed", what)),
        failure=failure,
        sandbox_denied=_opt_bool(obj, "sandboxDenied", what),
    )


def decode_exited(params: dict[str, Any]) -> tuple[int, int, bool | None]:
    """``process/exited`` params as ``(seq, exit_code, sandbox_denied or None when absent)``."""
    what = "process/exited"
    return _int(params, "seq", what), _int(params, "exitCode", what), _opt_bool(params, "sandboxDenied", what)


def decode_closed(params: dict[str, Any]) -> int:
    """``process/closed`` params as its seq."""
    return _int(params, "seq", "process/closed")
