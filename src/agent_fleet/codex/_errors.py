"""How a failed codex turn is classified: ``codexErrorInfo`` (and the HTTP status it carries or names)
to an ``Error`` code and whether running the turn again may help."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from agent_fleet.events import ErrorCode

__all__ = ["error_code_for", "http_status", "stream_retry_data"]

# codexErrorInfo (string variants) -> (code, retryable). Anything else codex adds later: turn_failed.
_INFO_CODES: Final[dict[str, tuple[ErrorCode, bool]]] = {
    "unauthorized": ("auth_failed", False),
    "rateLimitExceeded": ("rate_limited", True),
    "serverOverloaded": ("server_error", True),
    "internalServerError": ("server_error", True),
    "contextWindowExceeded": ("context_window_exceeded", False),
    "usageLimitExceeded": ("usage_limit_exceeded", False),
    "sessionBudgetExceeded": ("usage_limit_exceeded", False),
    "badRequest": ("bad_request", False),
}
# The API's own ``error.code`` in an HTTP error body codex forwards without classifying it.
_API_CODES: Final[dict[str, ErrorCode]] = {
    "context_length_exceeded": "context_window_exceeded",
    "insufficient_quota": "usage_limit_exceeded",
    "model_not_found": "model_not_found",
    "rate_limit_exceeded": "rate_limited",
}


def _api_error_body(message: Any) -> dict[str, Any] | None:
    """The API's ``{"error": {...}}`` body when codex forwarded it verbatim as the message.

    codex reports an HTTP 400 as ``codexErrorInfo: "other"`` with the response body as the message;
    that body is the only structured record of what the API said, so it is parsed (as JSON, never
    matched as text).
    """
    if not isinstance(message, str) or not message.startswith("{"):
        return None
    try:
        body = json.loads(message)
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else None


# codexErrorInfo object variants that say the model API could not be reached or its stream broke
# (codex 0.163's TurnError schema); each carries the HTTP status when there was one.
_CONNECTION_KINDS: Final = frozenset(
    {
        "httpConnectionFailed",
        "responseStreamConnectionFailed",
        "responseStreamDisconnected",
        "responseTooManyFailedAttempts",
    }
)


def _for_status(status: Any, *, connection: bool) -> tuple[ErrorCode, bool]:
    if status in (401, 403):
        return "auth_failed", False
    if status == 404:
        return "model_not_found", False
    if status == 429:
        return "rate_limited", True
    if isinstance(status, int) and status >= 500:
        return "server_error", True
    if isinstance(status, int) and 400 <= status < 500:
        return "bad_request", False
    if connection:  # no status: the API could not be reached, or its stream dropped before completing
        return "connection_failed", True
    # A kind this version does not know, without a status to go by: running the turn again is not known
    # to help (e.g. ``activeTurnNotSteerable``), so it is not retried (fail safe).
    return "turn_failed", False


# How codex words an HTTP error it did not classify (``UnexpectedResponseError``), the only place the
# status exists when ``codexErrorInfo`` is the catch-all ``"other"`` (every codex before 0.163 for a
# 401, 404 or 503): read only at the start of the message, only for that kind.
_UNEXPECTED_STATUS: Final = re.compile(r"unexpected status (\d{3})\b")


def http_status(error: dict[str, Any] | None) -> int | None:
    """The HTTP status of a codex ``TurnError``: an object variant's ``httpStatusCode``, or for
    ``"other"`` the status codex names in its ``unexpected status NNN`` message; None when none is."""
    error = error or {}
    info = error.get("codexErrorInfo")
    if isinstance(info, dict) and info:
        detail = next(iter(info.values()))
        status = detail.get("httpStatusCode") if isinstance(detail, dict) else None
        return status if isinstance(status, int) and not isinstance(status, bool) else None
    message = error.get("message")
    if info == "other" and isinstance(message, str):
        match = _UNEXPECTED_STATUS.match(message)
        return int(match.group(1)) if match else None
    return None


def error_code_for(error: dict[str, Any] | None) -> tuple[ErrorCode, bool]:
    """Classify a codex ``TurnError`` by its structured fields: (code, retryable).

    ``codexErrorInfo`` decides: a string variant by its name, an object variant by the HTTP status it
    carries, else by its kind (a connection or stream failure is retryable; a kind this version does
    not know is not: fail safe); for ``"other"`` (codex's catch-all, which covers both a refused
    request and a dropped stream) the HTTP status decides where codex names one (older versions send
    401, 404 and 503 so: an authentication or a not-found is never retried), else the API error body
    codex forwards as the message: present means the API refused the request (HTTP 4xx, never
    retryable), absent means a transport or stream failure (retryable).
    """
    error = error or {}
    info = error.get("codexErrorInfo")
    if isinstance(info, str):
        if info in _INFO_CODES:
            return _INFO_CODES[info]
        if info == "other":
            status = http_status(error)
            if status is not None:
                return _for_status(status, connection=False)
            body = _api_error_body(error.get("message"))
            if body is None:
                return "connection_failed", True
            code = _API_CODES.get(str(body.get("code")), "bad_request")
            return code, code == "rate_limited"
        return "turn_failed", False
    if isinstance(info, dict) and info:
        kind = next(iter(info))
        return _for_status(http_status(error), connection=kind in _CONNECTION_KINDS)
    return "turn_failed", False


# codex names a stream retry's attempt only in its message ("Reconnecting... 3/5"): no field carries it.
_ATTEMPT: Final = re.compile(r"(\d+)\s*/\s*(\d+)")


def stream_retry_data(error: dict[str, Any] | None) -> dict[str, Any]:
    """``System(stream_retry)``'s data from the ``TurnError`` of an ``error`` notification codex retries:
    ``message``; ``cause`` (codex's ``additionalDetails``, e.g. "stream disconnected before completion:
    ..."); ``kind`` (the ``codexErrorInfo`` variant) and ``http_status`` when there is one; ``attempt`` and
    ``max_attempts`` (codex gives up after ``max_attempts``) when its message names them."""
    error = error or {}
    message = error.get("message")
    data: dict[str, Any] = {"message": message if isinstance(message, str) else ""}
    details = error.get("additionalDetails")
    if isinstance(details, str) and details:
        data["cause"] = details
    info = error.get("codexErrorInfo")
    kind = next(iter(info), None) if isinstance(info, dict) else info
    if isinstance(kind, str):
        data["kind"] = kind
    status = http_status(error)
    if status is not None:
        data["http_status"] = status
    found = _ATTEMPT.search(data["message"])
    if found:
        data["attempt"], data["max_attempts"] = int(found.group(1)), int(found.group(2))
    return data
