"""The daemon's pages: the dashboard (``GET /``), a session's page (``GET /sessions/{id}``) and the sign-in
form (``/login``), rendered with autoescaping Jinja2 templates.

A page is its template, the data it shows as a JSON data block (``<script type="application/json">``,
escaped so that no text in it can end the element), one stylesheet and one script that ship in the
package (``templates/*.css``, ``*.js``; no CDN, nothing fetched from elsewhere). The script builds the
page from the data and keeps it current from the daemon's updates (``serve._feed``) and, on a session's
page, from the session's event stream. Every URL a page uses is relative to it, so a reverse proxy may
serve the daemon under a path (``https://example.com/fleet/``).

Every page the daemon serves (these, and a batch's report) goes out with a ``Content-Security-Policy``
that allows only its own inline scripts and styles, by their SHA-256 (computed once from the packaged
files, never from a rendered page: a value that slipped into a page could not make itself allowed), no
framing (``frame-ancestors 'none'``, with ``X-Frame-Options: DENY`` from the guard: a page on another
port of 127.0.0.1 is the same site and could otherwise frame the signed-in dashboard under a click),
requests only to the daemon itself, and forms posted only to it.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from importlib import resources
from typing import Any, Final

import jinja2
from markupsafe import Markup
from starlette.responses import HTMLResponse

_env = jinja2.Environment(
    loader=jinja2.PackageLoader("agent_fleet.serve", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def _asset(name: str) -> str:
    return resources.files("agent_fleet.serve").joinpath("templates", name).read_text(encoding="utf-8")


_CSS: Final = _asset("style.css")
_JS: Final = {
    "dashboard": _asset("common.js") + "\n" + _asset("dashboard.js"),
    "session": _asset("common.js") + "\n" + _asset("session.js"),
}

_LOGIN = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Sign in · agent-fleet serve</title>
<style>{css}</style></head>
<body><header class="top"><h1>agent-fleet serve</h1></header><main>
<h2>Sign in</h2>{error}<form method="post" action="login" class="filters">
<input type="hidden" name="next" value="{next}">
<label>Token <input type="password" name="token" size="48" autocomplete="current-password" autofocus></label>
<button type="submit" class="primary">Sign in</button></form>
<p class="muted small">The token is in the file <code>agent-fleet serve</code> named when it started
(<code>&lt;state dir&gt;/token</code>, or its <code>--token-file</code>).</p></main></body></html>"""

_MISSING = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Not found · agent-fleet serve</title><style>{css}</style></head><body>
<header class="top"><h1><a href="../">agent-fleet serve</a></h1></header>
<main><p>{message}</p><p><a href="../">the dashboard</a></p></main></body></html>"""

# Where the sign-in form may send a browser back to: a page of this daemon, relative (never another site).
_NEXT: Final = re.compile(r"(sessions/[A-Za-z0-9._:-]{1,200})?(\?[A-Za-z0-9._~%=&+,:-]{0,2000})?")


def safe_next(raw: str | None) -> str:
    """``raw`` when it names a page of the daemon, relative (``sessions/ID``, a query); else ``""``."""
    return raw if raw is not None and _NEXT.fullmatch(raw) else ""


def _fill(template: str, **values: str) -> str:
    # Not str.format: the stylesheet is full of braces.
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


def login_page(error: str | None = None, next_page: str = "") -> str:
    return _fill(
        _LOGIN,
        error=f'<p role="alert" class="flash">{html.escape(error)}</p>' if error else "",
        next=html.escape(next_page, quote=True),
        css=_CSS,
    )


def missing_page(message: str) -> str:
    return _fill(_MISSING, message=html.escape(message), css=_CSS)


def _data(value: Any) -> Markup:
    """``value`` as JSON that is safe inside ``<script type="application/json">``: no ``<``, ``>`` or
    ``&`` (so no ``</script>``), nor the line separators JavaScript once took as line ends."""
    text = json.dumps(value, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return Markup(text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def render_dashboard(data: dict[str, Any]) -> str:
    """The dashboard for ``data`` (what ``App.dashboard`` gathers: a page of sessions, the batches, the
    approvals, the filters, the updates' cursor)."""
    return _env.get_template("dashboard.html.j2").render(
        css=Markup(_CSS),
        js=Markup(_JS["dashboard"]),
        data=_data(data),
        version=data.get("version", ""),
        provider=data.get("provider", ""),
        states=data.get("states", ()),
        providers=data.get("providers", ()),
    )


def render_session(data: dict[str, Any]) -> str:
    """A session's page for ``data`` (its ``describe``, its pending approvals, the updates' cursor)."""
    session = data["session"]
    prompt = session.get("prompt") or ""
    return _env.get_template("session.html.j2").render(
        css=Markup(_CSS),
        js=Markup(_JS["session"]),
        data=_data(data),
        session_id=session["session_id"],
        short=session["session_id"][:8],
        prompt=prompt,
        prompt_line=prompt.split("\n")[0][:300],
    )


_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _policy(scripts: list[str], styles: list[str]) -> str:
    none = "'none'"
    return "; ".join(
        [
            "default-src 'none'",
            f"script-src {' '.join(scripts) or none}",
            f"style-src {' '.join(styles) or none}",
            "connect-src 'self'",
            "img-src 'self' data:",
            "form-action 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ]
    )


def csp(source: str) -> str:
    """The Content-Security-Policy of a page whose inline scripts and styles are those of ``source`` (a
    page written elsewhere and served as it is: a batch's report)."""
    hashes: dict[str, list[str]] = {"script": [], "style": []}
    for tag, body in _INLINE.findall(source):
        hashes[tag].append(_hash(body))
    return _policy(hashes["script"], hashes["style"])


#: Computed once from the packaged script and stylesheet (see the module docstring).
_PAGE_CSP: Final = {
    "dashboard": _policy([_hash(_JS["dashboard"])], [_hash(_CSS)]),
    "session": _policy([_hash(_JS["session"])], [_hash(_CSS)]),
    "login": _policy([], [_hash(_CSS)]),
    "missing": _policy([], [_hash(_CSS)]),
}


def page(content: str, *, status_code: int = 200, kind: str | None = None) -> HTMLResponse:
    """``content`` as an HTML response with its Content-Security-Policy: a known page's (from its packaged
    script and stylesheet) or, for a page written elsewhere (a batch's report), from the page itself."""
    policy = _PAGE_CSP[kind] if kind is not None else csp(content)
    return HTMLResponse(content, status_code=status_code, headers={"content-security-policy": policy})
