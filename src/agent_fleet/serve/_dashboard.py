"""The dashboard page (``GET /``): sessions, batches and pending approvals, rendered on the server with
an autoescaping Jinja2 template and a little inline script (no CDN) that refreshes it and posts decisions."""

from __future__ import annotations

import html
from typing import Any

import jinja2

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
    *, sessions: list[dict[str, Any]], batches: list[dict[str, Any]], approvals: list[dict[str, Any]]
) -> str:
    return _env.get_template("dashboard.html.j2").render(
        sessions=sessions, batches=batches, approvals=approvals
    )
