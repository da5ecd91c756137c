"""The daemon's gate: the bearer token and the request size limit, as one pure ASGI middleware.

Every path but ``/healthz`` needs ``Authorization: Bearer <token>`` (or, for the dashboard in a
browser, the ``agent_fleet_token`` cookie set by ``POST /login``; a state-changing request carried by
the cookie alone must also send ``X-Agent-Fleet: 1``, which a cross-site form cannot). Tokens are
compared in constant time (``hmac.compare_digest``). A request body over ``max_body`` bytes is refused
with 413 when it declares its length; a streamed body is bounded where the app reads it.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import stat
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from agent_fleet.errors import UsageError

COOKIE = "agent_fleet_token"
OPEN_PATHS = frozenset({"/healthz", "/login"})


def _token_file_warnings(path: Path) -> list[str]:
    """Refuse a token file anybody on the machine can read or write (``UsageError``); warn about one
    its group can (a deliberate service group may need it; the operator should know)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return []
    if mode & 0o007:
        raise UsageError(
            f"the token file {str(path)!r} is readable or writable by every user (mode {mode:o}): "
            f"chmod 600 {str(path)!r}"
        )
    if mode & 0o070:
        return [f"the token file {str(path)!r} is accessible to its group (mode {mode:o}); chmod 600 it"]
    return []


def load_or_create_token(token_file: Path | None, state_dir: Path) -> tuple[str, Path, list[str]]:
    """The token, the file holding it and warnings about that file: ``token_file`` when given (must
    exist, be non-empty and not be readable by every user), else ``state_dir/token``, created with a new
    random token (mode 0600) when missing."""
    if token_file is not None:
        warnings = _token_file_warnings(token_file)
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UsageError(f"--token-file {str(token_file)!r}: {exc.strerror}") from exc
        if len(token) < 16:
            raise UsageError(f"--token-file {str(token_file)!r}: the token must be at least 16 characters")
        return token, token_file, warnings
    path = state_dir / "token"
    if path.exists():
        warnings = _token_file_warnings(path)
        token = path.read_text(encoding="utf-8").strip()
        if token:
            return token, path, warnings
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token, path, []


def token_matches(given: str, token: str) -> bool:
    """``given`` is the token (constant time: the comparison's duration says nothing about it)."""
    return hmac.compare_digest(given.strip().encode(), token.encode())


def _error(status: int, code: str, message: str) -> tuple[dict[str, Any], bytes]:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        + ([(b"www-authenticate", b"Bearer")] if status == 401 else []),
    }
    return start, body


class Guard:
    """ASGI middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, token: str, max_body: int = 1 << 20) -> None:
        self.app = app
        self._token = token.encode()
        self.max_body = max_body

    def _authorised(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"")
        scheme, _, value = auth.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), self._token):
            return True
        cookie_header = headers.get(b"cookie")
        if not cookie_header:
            return False
        cookie = SimpleCookie()
        try:
            cookie.load(cookie_header.decode("latin-1"))
        except Exception:
            return False
        morsel = cookie.get(COOKIE)
        if morsel is None or not hmac.compare_digest(morsel.value.encode(), self._token):
            return False
        # Cookie-only state changes need a header a cross-site form cannot send.
        return scope.get("method") in ("GET", "HEAD") or headers.get(b"x-agent-fleet") == b"1"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] not in OPEN_PATHS and not self._authorised(scope):
            await self._reply(send, *_error(401, "unauthorized", "missing or wrong bearer token"))
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await self._reply(send, *_error(413, "too_large", f"request body over {self.max_body} bytes"))
            return
        await self.app(scope, receive, send)  # a streamed body is bounded where it is read

    @staticmethod
    async def _reply(send: Send, start: dict[str, Any], body: bytes) -> None:
        await send(start)
        await send({"type": "http.response.body", "body": body})
