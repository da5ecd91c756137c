"""The dashboard page (``GET /``): sessions, batches and pending approvals, rendered on the server with
an autoescaping Jinja2 template and a little inline script (no CDN) that refreshes it and posts decisions.

Every page the daemon serves (the dashboard, the sign-in form, a batch's report) goes out with a
``Content-Security-Policy`` that allows only its own inline scripts and styles, by their SHA-256 (the
page's template has them as fixed text), no framing (``frame-ancestors 'none'``, with
``X-Frame-Options: DENY`` from the guard: a page on another port of 127.0.0.1 is the same site and could
otherwise frame the signed-in dashboard under a click), requests only to the daemon itself, and forms
posted only to it.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from typing import Any, Final

import jinja2
from starlette.responses import HTMLResponse

_env = jinja2.Environment(
    loader=jinja2.PackageLoader("agent_fleet.serve", "templates"),
    autoescape=True,
    undefined=jinja2.ChainableUndefined,
)

_LOGIN = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>agent-fleet serve</title></head>
<body><h1>agent-fleet serve</h1>{error}<form method="post" action="/login">
<label>Token <input type="password" name="token" autocomplete="current-password"></label>
<button type="submit">Sign in</button></form></body></html>"""


def login_page(error: str | None = None) -> str:
    return _LOGIN.format(error=f'<p role="alert">{html.escape(error)}</p>' if error else "")


def render_dashboard(
    *,
    sessions: list[dict[str, Any]],
    batches: list[dict[str, Any]],
    approvals: list[dict[str, Any]],
    total_sessions: int | None = None,
) -> str:
    return _env.get_template("dashboard.html.j2").render(
        sessions=sessions,
        batches=batches,
        approvals=approvals,
        total_sessions=len(sessions) if total_sessions is None else total_sessions,
    )


_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


def csp(source: str) -> str:
    """The Content-Security-Policy of a page whose inline scripts and styles are those of ``source``."""
    hashes: dict[str, list[str]] = {"script": [], "style": []}
    for tag, body in _INLINE.findall(source):
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        hashes[tag].append(f"'sha256-{digest}'")
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src {' '.join(hashes['script']) or chr(39) + 'none' + chr(39)}",
            f"style-src {' '.join(hashes['style']) or chr(39) + 'none' + chr(39)}",
            "connect-src 'self'",
            "img-src 'self' data:",
            "form-action 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ]
    )


def _template_source(name: str) -> str:
    loader = _env.loader
    assert loader is not None
    return loader.get_source(_env, name)[0]


#: Computed once from the templates: their scripts and styles are fixed text.
_PAGE_CSP: Final = {"dashboard": csp(_template_source("dashboard.html.j2")), "login": csp(_LOGIN)}


def page(content: str, *, status_code: int = 200, kind: str | None = None) -> HTMLResponse:
    """``content`` as an HTML response with its Content-Security-Policy: a known page's (computed from
    its template) or, for a page written elsewhere (a batch's report), from the page itself."""
    policy = _PAGE_CSP[kind] if kind is not None else csp(content)
    return HTMLResponse(content, status_code=status_code, headers={"content-security-policy": policy})
