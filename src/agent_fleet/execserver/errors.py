"""Errors of the exec-server client, grafted onto the agent-fleet tree (``agent_fleet.errors``).

::

    RPCError
    └── ExecServerError            any JSON-RPC error answer from the exec-server (code, message, data)
        ├── InvalidRequestError    -32600: unknown process or session, duplicate processId, not a file
        ├── MethodNotFoundError    -32601: the server does not implement the method
        ├── InvalidParamsError     -32602: empty argv, malformed URI, missing field
        ├── InternalServerError    -32603: OS errors (spawn failure, not a directory, not empty, ...)
        └── NotFoundError          -32004: the path does not exist (filesystem methods)
    UsageError
    └── WriteRejected              process/write answered with a status other than "accepted" (status)
    RequestTimeout
    └── ProcessTimeout             run(timeout=...) expired; the process was terminated (stdout, stderr)

Transport failures stay ``TransportError`` / ``ConnectionClosed``; a peer that breaks the protocol raises
``RemoteProtocolError``. Decide on ``code`` or the class, never on message text.
"""

from __future__ import annotations

from typing import Any, Final

from agent_fleet.errors import RequestTimeout, RPCError, UsageError

__all__ = [
    "ExecServerError",
    "InternalServerError",
    "InvalidParamsError",
    "InvalidRequestError",
    "MethodNotFoundError",
    "NotFoundError",
    "ProcessTimeout",
    "WriteRejected",
]


class ExecServerError(RPCError):
    """A JSON-RPC error answer from the exec-server; ``code``, ``message``, ``data`` as received."""

    NOT_FOUND = -32004
    SESSION_ALREADY_ATTACHED = -32010


class InvalidRequestError(ExecServerError):
    """-32600: the request is not valid in the server's state (unknown process, duplicate id, ...)."""


class MethodNotFoundError(ExecServerError):
    """-32601: the server does not implement this method."""


class InvalidParamsError(ExecServerError):
    """-32602: malformed parameters (empty argv, a path that is not a ``file:`` URI, ...)."""


class InternalServerError(ExecServerError):
    """-32603: the operation failed on the server (usually an OS error)."""


class NotFoundError(ExecServerError):
    """-32004: the path does not exist."""


_BY_CODE: Final[dict[int, type[ExecServerError]]] = {
    RPCError.INVALID_REQUEST: InvalidRequestError,
    RPCError.METHOD_NOT_FOUND: MethodNotFoundError,
    RPCError.INVALID_PARAMS: InvalidParamsError,
    RPCError.INTERNAL_ERROR: InternalServerError,
    ExecServerError.NOT_FOUND: NotFoundError,
}


def translate_rpc_error(exc: RPCError) -> ExecServerError:
    """Map a generic ``RPCError`` from the connection onto the typed class for its code."""
    if isinstance(exc, ExecServerError):
        return exc
    cls = _BY_CODE.get(exc.code, ExecServerError)
    typed = cls(exc.code, exc.message, exc.data, method=exc.method)
    typed.__cause__ = exc
    return typed


class WriteRejected(UsageError):
    """``process/write`` was not accepted. ``status`` is the server's word for why:
    ``"stdinClosed"`` (started without ``tty``/``pipe_stdin``), ``"unknownProcess"`` (already gone) or
    ``"starting"``."""

    def __init__(self, process_id: str, status: str) -> None:
        super().__init__(f"process/write to {process_id!r} rejected: {status}")
        self.process_id = process_id
        self.status = status


class ProcessTimeout(RequestTimeout):
    """``run(..., timeout=...)`` expired. The process was terminated; ``stdout``/``stderr`` hold what
    arrived before that."""

    def __init__(self, argv: Any, timeout: float, *, stdout: bytes = b"", stderr: bytes = b"") -> None:
        super().__init__(f"run {argv!r}", timeout)
        self.argv = argv
        self.stdout = stdout
        self.stderr = stderr
