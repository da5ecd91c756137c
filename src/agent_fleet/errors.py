"""The agent-fleet error hierarchy: one root, a few branches, each carrying what a caller needs.

::

    AgentFleetError
    ├── UsageError                 local misuse (bad argument, wrong calling order)
    │   └── Unsupported            the provider cannot do this (e.g. inject on codex exec)
    ├── ProviderUnavailable        binary missing / broken, handshake failed (tried, stderr_tail)
    │   └── AuthenticationError    no usable credential, or the model provider refused it
    ├── TransportError             the peer process or socket failed (exit_code, stderr_tail)
    │   └── ConnectionClosed       the connection is closed; pending work fails with this (cause)
    ├── RemoteProtocolError        the peer sent something the protocol does not allow
    ├── RPCError                   a JSON-RPC error response (code, message, data)
    ├── RequestTimeout             a request got no answer in time (method, timeout); also a TimeoutError
    ├── StorageError               a file of the record could not be written, e.g. a full disk (path, what)
    └── TurnFailed                 a turn ended with an ``Error`` event (event)

Layers translate with ``raise ... from exc`` so the original cause is kept. Callers decide on the
structured fields, never on message text: every error has ``code`` (a short name of its kind, e.g.
``"transport"``; for a ``TurnFailed`` the ``Error`` event's code, e.g. ``"rate_limited"``; for an
``RPCError`` the JSON-RPC integer code as received) and ``retryable`` (whether the same call may
succeed later unchanged: a dropped transport or a timeout may, a misuse or a refused credential not),
plus their own fields (``exit_code``, ``stderr_tail``, ``event`` ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_fleet.events import Error

__all__ = [
    "AgentFleetError",
    "AuthenticationError",
    "ConnectionClosed",
    "ProviderUnavailable",
    "RPCError",
    "RemoteProtocolError",
    "RequestTimeout",
    "StorageError",
    "TransportError",
    "TurnFailed",
    "Unsupported",
    "UsageError",
]


class AgentFleetError(Exception):
    """Root of every error agent-fleet raises on purpose. ``code`` names its kind and ``retryable`` says
    whether trying the same call again later may work (see the module docstring); subclasses set both,
    an instance may refine them."""

    code: str = "agent_fleet_error"
    retryable: bool = False


class UsageError(AgentFleetError, ValueError):
    """The caller misused the API: a bad argument or a call in the wrong state."""

    code = "usage"


class Unsupported(UsageError):
    """The provider cannot perform this operation (see its ``Capabilities``)."""

    code = "unsupported"


class ProviderUnavailable(AgentFleetError):
    """The provider cannot start: binary missing or broken, handshake failed or timed out.

    ``tried`` lists the places or steps attempted; ``stderr_tail`` is the end of the child's stderr.
    Not ``retryable`` by default (a missing or broken binary stays so); ``retryable=True`` where the
    cause is passing (a handshake that timed out, a daemon that is restarting).
    """

    code = "provider_unavailable"

    def __init__(
        self,
        message: str,
        *,
        tried: Sequence[str] = (),
        stderr_tail: str = "",
        retryable: bool | None = None,
    ) -> None:
        if retryable is not None:
            self.retryable = retryable
        self.tried = tuple(tried)
        self.stderr_tail = stderr_tail
        full = message
        if self.tried:
            full += "; tried: " + ", ".join(self.tried)
        if stderr_tail:
            full += f"\nstderr (tail):\n{stderr_tail}"
        super().__init__(full)
        self.message = message


class AuthenticationError(ProviderUnavailable):
    """No usable credential was found, or the model provider rejected it."""

    code = "auth_failed"


class TransportError(AgentFleetError):
    """The transport under a connection failed: the child exited, a pipe broke, a socket dropped.
    ``retryable``: a new connection (a restarted child) may work."""

    code = "transport"
    retryable = True

    def __init__(self, message: str, *, exit_code: int | None = None, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail


class ConnectionClosed(TransportError):
    """The connection is closed. ``cause`` is the exception that closed it, if any."""

    code = "connection_closed"

    def __init__(
        self,
        message: str = "connection closed",
        *,
        cause: BaseException | None = None,
        exit_code: int | None = None,
        stderr_tail: str = "",
    ) -> None:
        super().__init__(message, exit_code=exit_code, stderr_tail=stderr_tail)
        self.cause = cause


class RemoteProtocolError(AgentFleetError):
    """The peer violated the protocol (malformed message, impossible state)."""

    code = "protocol_error"


class RPCError(AgentFleetError):
    """A JSON-RPC error response: ``code``, ``message`` and optional ``data`` exactly as received."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603

    code: int  # type: ignore[assignment]  # the JSON-RPC code as received, not a kind name

    def __init__(self, code: int, message: str, data: Any = None, *, method: str | None = None) -> None:
        where = f" ({method})" if method else ""
        super().__init__(f"JSON-RPC error {code}{where}: {message}")
        self.code = code
        self.message = message
        self.data = data
        self.method = method


class RequestTimeout(AgentFleetError, TimeoutError):
    """A request got no response within ``timeout`` seconds."""

    code = "timeout"
    retryable = True

    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(f"{method}: no response within {timeout:g}s")
        self.method = method
        self.timeout = timeout


class StorageError(AgentFleetError):
    """A file of a batch's record (the ledger, a transcript, the summary, the report) could not be
    written: ``path`` and ``what`` name it, ``errno`` says why (``ENOSPC``: the disk is full). The
    record written so far stays true. ``retryable``: once there is room, resuming continues."""

    code = "storage_error"
    retryable = True

    def __init__(self, path: str, what: str, cause: OSError | None = None) -> None:
        reason = (cause.strerror or str(cause)) if cause is not None else "write failed"
        super().__init__(f"cannot write {what} ({path}): {reason}")
        self.path = path
        self.what = what
        self.errno = cause.errno if cause is not None else None
        self.reason = reason


class TurnFailed(AgentFleetError):
    """A turn ended with an ``Error`` event; ``event`` carries its code, message and retryability (also
    as this error's ``code`` and ``retryable``)."""

    def __init__(self, event: Error) -> None:
        super().__init__(f"turn failed ({event.code}): {event.message}")
        self.event = event
        self.code = event.code
        self.retryable = event.retryable
