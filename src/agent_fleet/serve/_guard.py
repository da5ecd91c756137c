"""The daemon's gate: the Host header, the bearer token, the request size limit and the security headers
of every response, as one pure ASGI middleware.

A request whose ``Host`` is not a name the daemon serves is refused with 400 before anything else (DNS
rebinding: a page of ``evil.example`` that resolves to 127.0.0.1 must not reach the API): the daemon
serves the loopback names (``localhost``, 127.0.0.0/8, ``::1``), the address it listens on, any IP
address when it listens on all of them (a literal address cannot be rebound), and the names given with
``--allowed-host`` (a proxy's). Every path but ``/healthz`` and ``/login`` then needs
``Authorization: Bearer <token>`` (or, for the dashboard in a browser, the ``agent_fleet_token`` cookie
set by ``POST /login``; a state-changing request carried by the cookie alone must also send
``X-Agent-Fleet: 1``, which a cross-site form cannot). A browser that opens a page (``/``, a session's
page) without either is sent to the sign-in form (``303``, to a relative URL so that a proxy serving
the daemon under a path keeps it; ``next`` says where it was going); any other client gets ``401``.
Tokens are compared in constant time (``hmac.compare_digest``). A request body over ``max_body``
bytes is refused with 413, whether it declares its length or is sent in chunks (counted as it is read).
Every response says ``X-Frame-Options: DENY``, ``X-Content-Type-Options: nosniff`` and
``Referrer-Policy: no-referrer``, and carries a ``Content-Security-Policy`` with ``frame-ancestors
'none'`` (pages set their own, which allows only their own inline scripts and styles, by hash).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
import stat
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any, Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_fleet.errors import UsageError

COOKIE = "agent_fleet_token"
OPEN_PATHS = frozenset({"/healthz", "/login"})


def is_page(path: str) -> bool:
    """A page a browser opens (the dashboard, a session's page)."""
    return path == "/" or (path.startswith("/sessions/") and path.count("/") == 2)


def sign_in_redirect(scope: Scope) -> tuple[dict[str, Any], bytes] | None:
    """For a browser opening a page without the token: a ``303`` to the sign-in form, relative to the
    page (None: not a page, or not a browser)."""
    path = scope["path"]
    headers = dict(scope.get("headers") or [])
    if scope.get("method") not in ("GET", "HEAD") or not is_page(path):
        return None
    if b"text/html" not in headers.get(b"accept", b""):
        return None
    target = path[1:] + (f"?{scope['query_string'].decode('latin-1')}" if scope.get("query_string") else "")
    back = f"?next={urllib.parse.quote(target)}" if target else ""
    location = "../" * (path.count("/") - 1) + "login" + back
    body = b"sign in first"
    start = {
        "type": "http.response.start",
        "status": 303,
        "headers": [
            (b"location", location.encode("latin-1")),
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
        ],
    }
    return start, body


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


class BodyTooLarge(UsageError):
    """A request body over the daemon's ``--max-body`` (HTTP 413)."""


_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.", "ip6-localhost"})
_WILDCARDS: Final = frozenset({"0.0.0.0", "::", ""})
#: Headers every response gets (a page's own Content-Security-Policy is kept).
_SECURITY_HEADERS: Final = (
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
_DEFAULT_CSP: Final = b"default-src 'none'; frame-ancestors 'none'"


class Hosts:
    """The ``Host`` names a daemon listening on ``bind`` serves (see the module docstring)."""

    def __init__(self, bind: str, extra: Sequence[str] = ()) -> None:
        self.bind = bind.strip("[]").lower()
        self.names = frozenset(name.strip().lower().rstrip(".") for name in extra if name.strip())

    @staticmethod
    def _name(header: str) -> str:
        header = header.strip().lower()
        if header.startswith("["):  # [::1]:8765
            return header[1 : header.find("]")] if "]" in header else ""
        name, colon, port = header.rpartition(":")
        return name if colon and port.isdigit() and ":" not in name else header

    def allows(self, header: bytes | None) -> bool:
        if header is None:
            return False
        try:
            name = self._name(header.decode("ascii")).rstrip(".")
        except UnicodeDecodeError:
            return False
        if not name:
            return False
        if name in _LOOPBACK_NAMES or name in self.names or name == self.bind.rstrip("."):
            return True
        try:
            address = ipaddress.ip_address(name)
        except ValueError:
            return False
        return address.is_loopback or self.bind in _WILDCARDS


class Guard:
    """ASGI middleware (see the module docstring)."""

    def __init__(
        self, app: ASGIApp, *, token: str, max_body: int = 1 << 20, hosts: Hosts | None = None
    ) -> None:
        self.app = app
        self._token = token.encode()
        self.max_body = max_body
        self.hosts = hosts if hosts is not None else Hosts("127.0.0.1")

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
        started = False

        async def secured(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers") or [])
                names = {name.lower() for name, _ in headers}
                headers += [(k, v) for k, v in _SECURITY_HEADERS if k not in names]
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", _DEFAULT_CSP))
                message = {**message, "headers": headers}
            await send(message)

        headers = dict(scope.get("headers") or [])
        if not self.hosts.allows(headers.get(b"host")):
            shown = (headers.get(b"host") or b"").decode("latin-1")[:100]
            message = f"Host {shown!r} is not a name this daemon serves (see --allowed-host)"
            await self._reply(secured, *_error(400, "bad_host", message))
            return
        if scope["path"] not in OPEN_PATHS and not self._authorised(scope):
            redirect = sign_in_redirect(scope)
            await self._reply(
                secured, *(redirect or _error(401, "unauthorized", "missing or wrong bearer token"))
            )
            return
        declared = headers.get(b"content-length")
        too_large = _error(413, "too_large", f"request body over {self.max_body} bytes")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await self._reply(secured, *too_large)
            return
        read = 0

        async def bounded() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.max_body:
                    raise BodyTooLarge(f"request body over {self.max_body} bytes")
            return message

        try:
            await self.app(scope, bounded, secured)
        except BodyTooLarge:  # a chunked body, found too large where a route reads it
            if started:
                raise
            await self._reply(secured, *too_large)

    @staticmethod
    async def _reply(send: Callable[[Message], Awaitable[None]], start: dict[str, Any], body: bytes) -> None:
        await send(start)
        await send({"type": "http.response.body", "body": body})
