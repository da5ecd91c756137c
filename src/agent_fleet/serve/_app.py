"""The daemon's HTTP API (Starlette): routes over ``Sessions``, ``ApprovalQueue`` and ``Batches``.

Errors are JSON ``{"error": {"code", "message"}}``: 400 a bad request (``UsageError``), 401 no or a
wrong token (``_guard``), 403 a ``cwd`` outside the allowed roots or a request the daemon's floor
refuses (``serve._floor``), 404 an unknown id, 409 an operation the provider cannot do
(``Unsupported``), 413 a body too large, 502 the provider failed, 503 the provider is unavailable.
Every response is built from redacted records, error messages included; no token or credential is
ever echoed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from agent_fleet import __version__
from agent_fleet._event_json import spec_from_json
from agent_fleet.errors import AgentFleetError, ProviderUnavailable, Unsupported, UsageError
from agent_fleet.remote import CURSOR_HEADER, SESSION_HEADER
from agent_fleet.runner import PROVIDER_NAMES, Redactor, provider_entry
from agent_fleet.serve._approvals import ApprovalQueue, asked
from agent_fleet.serve._batches import SHOWN_TASKS, Batches
from agent_fleet.serve._dashboard import (
    login_page,
    missing_page,
    page,
    render_dashboard,
    render_session,
    safe_next,
)
from agent_fleet.serve._event_stream import EventStream
from agent_fleet.serve._feed import Feed
from agent_fleet.serve._guard import COOKIE, BodyTooLarge, Guard, Hosts, token_matches
from agent_fleet.serve._openapi import OPENAPI
from agent_fleet.serve._sessions import STATES, NotFound, Sessions
from agent_fleet.serve._stream import Batch

logger = logging.getLogger(__name__)

Endpoint = Callable[[Request], Awaitable[Response]]
_ALL_TASKS = 1 << 30
_DASHBOARD_SESSIONS = 50  # sessions per page of the dashboard (GET /v1/sessions pages through all)
_DASHBOARD_BATCHES = 20


# str.isdigit() takes "²" (int() then fails inside the stream) and SQLite integers stop at 2**63:
# an event id is ASCII digits, at most 15 of them (more events than a session ever has).
_EVENT_ID = re.compile(r"[0-9]{1,15}")


_LIMIT = re.compile(r"[1-9][0-9]{0,2}|1000")
_FILTER_TEXT = 200  # the most characters a text filter (?q) takes
_NO_BODY: Final[dict[str, Any]] = {}  # what an empty body reads as (checked by identity)
_FLAGS: Final = {"1": True, "true": True, "0": False, "false": False}
_NULLABLE: Final = frozenset({"spec", "gate_cmd"})  # a batch's: null is the daemon's default (the document)


def _known(query: Any, names: tuple[str, ...]) -> None:
    """``UsageError`` for a query parameter the route does not take (a typo is not silently ignored)."""
    unknown = set(query.keys()) - set(names)
    if unknown:
        raise UsageError(f"unknown query parameter(s): {', '.join(sorted(unknown))}")


def _flag(query: Any, name: str) -> bool:
    raw = query.get(name)
    if raw is None:
        return False
    if raw not in _FLAGS:
        raise UsageError(f"{name} must be 1, 0, true or false, not {raw!r}")
    return _FLAGS[raw]


def _event_id(raw: str) -> int:
    if not _EVENT_ID.fullmatch(raw):
        raise UsageError("Last-Event-ID (or ?after) must be a non-negative integer of at most 15 digits")
    return int(raw)


def _route(path: str, **handlers: Endpoint) -> Route:
    """One route per path, whatever its methods: a method it does not take is a 405 whose ``Allow``
    names every method it does (with one route per method, Starlette named only the first's)."""

    async def dispatch(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await handlers[method](request)

    return Route(path, dispatch, methods=list(handlers))


def _errors(fn: Endpoint, redactor: Redactor) -> Endpoint:
    """Map the library's errors to HTTP statuses (see the module docstring); messages redacted (they
    may quote what the client sent, or what the provider said about it)."""

    def err(status: int, code: str, message: str) -> JSONResponse:
        body = {"error": {"code": code, "message": redactor.text(message)}}
        return JSONResponse(body, status_code=status)

    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request)
        except BodyTooLarge as exc:
            return err(413, "too_large", str(exc))
        except NotFound as exc:
            return err(404, "not_found", f"no such id: {exc.args[0] if exc.args else ''}")
        except PermissionError as exc:
            return err(403, "forbidden", str(exc))
        except Unsupported as exc:
            return err(409, "unsupported", str(exc))
        except UsageError as exc:
            return err(400, "bad_request", str(exc))
        except ProviderUnavailable as exc:
            return err(503, "provider_unavailable", str(exc))
        except AgentFleetError as exc:
            logger.warning("%s %s failed: %s", request.method, request.url.path, type(exc).__name__)
            return err(502, "provider_error", str(exc))

    return wrapped


class App:
    """Builds the ASGI application. ``max_body`` bounds every request body (bytes)."""

    def __init__(
        self,
        *,
        sessions: Sessions,
        approvals: ApprovalQueue,
        batches: Batches,
        token: str,
        provider: str,
        redactor: Redactor | None = None,
        max_body: int = 1 << 20,
        secure_cookie: bool = False,
        hosts: Hosts | None = None,
        feed: Feed | None = None,
        boxes: Path | None = None,
    ) -> None:
        self.sessions = sessions
        self.feed = feed if feed is not None else Feed(session_row=sessions.row, batch_row=batches.row)
        self._token = token
        self.redactor = redactor if redactor is not None else Redactor(extra=(token,))
        self.secure_cookie = secure_cookie
        self.approvals = approvals
        self.batches = batches
        self.provider = provider
        self.max_body = max_body
        self.boxes = boxes
        g = self._guarded
        routes = [
            _route("/healthz", GET=self.healthz),
            _route("/login", GET=g(self.login), POST=g(self.login)),
            _route("/", GET=g(self.dashboard)),
            _route("/sessions/{sid}", GET=g(self.session_page)),
            _route("/v1/updates", GET=g(self.updates)),
            _route("/v1/openapi.json", GET=self.openapi),
            _route("/v1/info", GET=self.info),
            _route("/v1/sessions", GET=g(self.list_sessions), POST=g(self.create_session)),
            _route("/v1/sessions/{sid}", GET=g(self.get_session)),
            _route("/v1/sessions/{sid}/events", GET=g(self.events)),
            _route("/v1/sessions/{sid}/turns", POST=g(self.turn)),
            _route("/v1/sessions/{sid}/inject", POST=g(self.inject)),
            _route("/v1/sessions/{sid}/stop", POST=g(self.stop)),
            _route("/v1/approvals", GET=g(self.list_approvals)),
            _route("/v1/approvals/{aid}", POST=g(self.decide)),
            _route("/v1/batches", GET=g(self.list_batches), POST=g(self.create_batch)),
            _route("/v1/batches/attach", POST=g(self.attach_batch)),
            _route("/v1/batches/{bid}", GET=g(self.get_batch)),
            _route("/v1/batches/{bid}/notices", POST=g(self.batch_notices)),
            _route("/v1/batches/{bid}/stop", POST=g(self.stop_batch)),
            _route("/v1/batches/{bid}/report", GET=g(self.batch_report)),
            _route("/v1/batches/{bid}/resume", POST=g(self.resume_batch)),
        ]
        self.starlette = Starlette(routes=routes)
        self.asgi = Guard(self.starlette, token=token, max_body=max_body, hosts=hosts)

    def _guarded(self, fn: Endpoint) -> Endpoint:
        return _errors(fn, self.redactor)

    async def _json(self, request: Request) -> Any:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body:
                raise BodyTooLarge(f"request body over {self.max_body} bytes")
        if not body:
            return _NO_BODY
        try:
            return json.loads(body)
        except ValueError as exc:
            raise UsageError(f"the body is not JSON: {exc}") from exc

    async def _object(self, request: Request, keys: tuple[str, ...]) -> dict[str, Any]:
        """The body as a JSON object with only ``keys``, none of them null (a key is left out for its
        default, as the OpenAPI document says). Every route that takes a body requires it."""
        data = await self._json(request)
        if data is _NO_BODY:
            raise UsageError(f"the request needs a body: a JSON object (keys: {', '.join(keys)})")
        if not isinstance(data, dict):
            raise UsageError(f"the body must be a JSON object (keys: {', '.join(keys)})")
        unknown = set(data) - set(keys)
        if unknown:
            raise UsageError(f"unknown key(s) in the body: {', '.join(sorted(map(str, unknown)))}")
        nulls = sorted(key for key, value in data.items() if value is None and key not in _NULLABLE)
        if nulls:
            raise UsageError(f"{', '.join(nulls)} must not be null (leave it out for the default)")
        return data

    @staticmethod
    def _text(data: dict[str, Any], name: str) -> str:
        value = data.get(name)
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"the body must be a JSON object with a non-empty string {name!r}")
        return value

    # -- open ----------------------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"ok": True, "draining": self.sessions.draining})

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            return page(login_page(next_page=safe_next(request.query_params.get("next"))), kind="login")
        try:
            form = await request.form(max_files=0, max_fields=2)
        except HTTPException as exc:  # too many fields, a multipart body: the form is a token (and next)
            raise UsageError(f"the sign-in form takes the fields token and next ({exc.detail})") from None
        token = form.get("token")
        raw_next = form.get("next")
        next_page = safe_next(raw_next if isinstance(raw_next, str) else None)
        if not isinstance(token, str) or not token_matches(token, self._token):
            # Checked here, not only on later requests: a cookie is never set from a wrong value.
            return page(login_page(error="wrong token", next_page=next_page), status_code=401, kind="login")
        # Relative: behind a proxy that serves the daemon under a path, the browser stays under it.
        response = RedirectResponse("./" + next_page, status_code=303)
        response.set_cookie(
            COOKIE, token.strip(), httponly=True, samesite="strict", secure=self.secure_cookie
        )
        return response

    # -- reference -------------------------------------------------------------------------------------

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(OPENAPI)

    async def info(self, request: Request) -> Response:
        try:
            caps: dict[str, Any] | None = dataclasses.asdict(provider_entry(self.provider).capabilities())
        except AgentFleetError:
            caps = None
        # ``boxes``: where a client's batch makes its boxes (``batch --server``): the floor takes them
        return JSONResponse(
            {
                "version": __version__,
                "provider": self.provider,
                "api": "v1",
                "capabilities": caps,
                "boxes": str(self.boxes) if self.boxes is not None else None,
            }
        )

    # -- sessions --------------------------------------------------------------------------------------

    async def create_session(self, request: Request) -> Response:
        query = request.query_params
        _known(query, ("provider", "resume", "stream"))
        provider = query.get("provider", self.provider)
        if provider not in PROVIDER_NAMES:
            raise UsageError(f"provider must be one of {', '.join(PROVIDER_NAMES)}, not {provider!r}")
        resume = query.get("resume") or None
        stream = _flag(query, "stream")
        spec = spec_from_json(await self._json(request))
        session, cursor = await self.sessions.create(spec, provider, resume=resume)
        if not stream:
            return JSONResponse({"session_id": session.id, "last_event_id": cursor}, status_code=201)
        # stream=1: the answer is the session's event stream, as GET .../events after `cursor` would be
        # (one exchange where a client needed two); the ids are in headers, sent before the first event.
        sid = quote(session.id, safe="")  # (a header is Latin-1; an id a client resumed may be anything)
        headers = {SESSION_HEADER: sid, CURSOR_HEADER: str(cursor)}
        return self._event_stream(self.sessions.stream(session.id, cursor, follow=False), 201, headers)

    @staticmethod
    def _session_filters(query: Any) -> dict[str, Any]:
        """``state`` (comma-separated), ``batch``, ``provider`` and ``q`` (a text) of a session list."""
        states = tuple(s for value in query.getlist("state") for s in value.split(",") if s)
        provider = query.get("provider") or None
        if provider is not None and provider not in PROVIDER_NAMES:
            raise UsageError(f"provider must be one of {', '.join(PROVIDER_NAMES)}, not {provider!r}")
        text = query.get("q") or None
        if text is not None and len(text) > _FILTER_TEXT:
            raise UsageError(f"q takes at most {_FILTER_TEXT} characters")
        if unknown := set(states) - set(STATES):
            raise UsageError(f"state must be among {', '.join(STATES)}, not {', '.join(sorted(unknown))}")
        return {"states": states, "batch": query.get("batch") or None, "provider": provider, "text": text}

    async def list_sessions(self, request: Request) -> Response:
        query = request.query_params
        _known(query, ("limit", "before", "state", "batch", "provider", "q"))
        raw_limit = query.get("limit", "100")
        if not _LIMIT.fullmatch(raw_limit):
            raise UsageError("limit must be a whole number from 1 to 1000")
        before = query.get("before") or None
        rows, cursor = self.sessions.rows(limit=int(raw_limit), before=before, **self._session_filters(query))
        return JSONResponse({"sessions": rows, "next": cursor})

    async def get_session(self, request: Request) -> Response:
        return JSONResponse(self.sessions.describe(request.path_params["sid"]))

    async def events(self, request: Request) -> Response:
        sid = request.path_params["sid"]
        query = request.query_params
        _known(query, ("after", "follow", "watch"))
        after = _event_id(request.headers.get("last-event-id") or query.get("after") or "0")
        follow = _flag(query, "follow")
        # A watcher (the dashboard) is not the session's client: it keeps no orphan running.
        watch = _flag(query, "watch")
        batches = self.sessions.stream(sid, after, follow=follow, watch=watch)  # NotFound: 404 at once
        return self._event_stream(batches)

    @staticmethod
    def _event_stream(
        batches: AsyncIterator[Batch], status: int = 200, headers: dict[str, str] | None = None
    ) -> Response:
        async def content() -> AsyncIterator[bytes]:
            # Everything already recorded goes out in one write (records are single-line JSON).
            async for batch in batches:
                yield b"".join(b"id: %d\nevent: event\ndata: %s\n\n" % (seq, record) for seq, record in batch)

        return EventStream(content(), status_code=status, headers=headers)

    async def turn(self, request: Request) -> Response:
        sid = request.path_params["sid"]
        data = await self._object(request, ("prompt", "images", "output_schema"))
        prompt = self._text(data, "prompt")
        images = data.get("images") or []
        if not isinstance(images, list) or not all(isinstance(i, str) for i in images):
            raise UsageError("'images' must be a list of paths or URLs (strings)")
        schema = data.get("output_schema")
        if schema is not None and not isinstance(schema, dict):
            raise UsageError("'output_schema' must be a JSON object (a JSON Schema)")
        cursor = await self.sessions.send(sid, prompt, images=images, output_schema=schema)
        return JSONResponse({"session_id": sid, "last_event_id": cursor})

    async def inject(self, request: Request) -> Response:
        text = self._text(await self._object(request, ("text",)), "text")
        await self.sessions.inject(request.path_params["sid"], text)
        return JSONResponse({"ok": True})

    async def stop(self, request: Request) -> Response:
        await self.sessions.stop(request.path_params["sid"])
        return JSONResponse({"ok": True})

    # -- approvals -------------------------------------------------------------------------------------

    async def list_approvals(self, request: Request) -> Response:
        _known(request.query_params, ("session",))
        return JSONResponse({"approvals": self.approvals.pending(request.query_params.get("session"))})

    async def decide(self, request: Request) -> Response:
        aid = request.path_params["aid"]
        data = await self._object(request, ("decision", "reason"))
        decision, reason = data.get("decision"), data.get("reason")
        if not isinstance(decision, str) or not isinstance(reason, str | None):  # (null: _object)
            raise UsageError(
                'the body must be {"decision": "allow_once" | "allow_for_session" | ..., "reason"?}'
            )
        try:
            pending = self.approvals.decide(aid, decision, reason)
        except KeyError:
            raise NotFound(aid) from None
        if decision in ("decline", "cancel") and reason and reason.strip() and pending.session_id:
            # codex's approvals carry no reason back: the running turn is told (steered) instead, so the
            # model reads why (after a cancel, codex's bridge continues the turn with it already).
            told = f"A person declined {asked(pending.request)}. Their reason: {reason.strip()}"
            await self.sessions.tell(pending.session_id, told)
        return JSONResponse({"ok": True})

    # -- batches ---------------------------------------------------------------------------------------

    async def create_batch(self, request: Request) -> Response:
        keys = ("tasks", "spec", "jobs", "gate_cmd", "max_followups", "provider", "worktrees")
        data = await self._object(request, keys)
        batch_id = await self.batches.create(data, default_provider=self.provider)
        return JSONResponse({"batch_id": batch_id}, status_code=201)

    async def resume_batch(self, request: Request) -> Response:
        batch_id = request.path_params["bid"]
        await self.batches.resume(batch_id, await self._object(request, ("rerun",)))
        return JSONResponse({"batch_id": batch_id, "state": "running"})

    async def list_batches(self, request: Request) -> Response:
        return JSONResponse({"batches": self.batches.rows()})

    async def attach_batch(self, request: Request) -> Response:
        data = await self._object(request, ("name", "total", "provider"))
        batch_id = self.batches.attach(data, default_provider=self.provider)
        return JSONResponse({"batch_id": batch_id}, status_code=201)

    async def batch_notices(self, request: Request) -> Response:
        data = await self._object(request, ("notices", "state", "reason"))
        return JSONResponse(self.batches.notices(request.path_params["bid"], data))

    async def stop_batch(self, request: Request) -> Response:
        self.batches.stop(request.path_params["bid"])
        return JSONResponse({"ok": True})

    # -- updates ---------------------------------------------------------------------------------------

    async def updates(self, request: Request) -> Response:
        query = request.query_params
        _known(query, ("after", "session"))
        after = _event_id(request.headers.get("last-event-id") or query.get("after") or "0")
        reads = self.feed.read(after, session=query.get("session") or None)

        async def content() -> AsyncIterator[bytes]:
            async for batch in reads:
                yield b"".join(update.sse() for update in batch)

        return EventSourceResponse(content(), ping=15)

    async def get_batch(self, request: Request) -> Response:
        return JSONResponse(self.batches.describe(request.path_params["bid"], tasks=_ALL_TASKS))

    async def batch_report(self, request: Request) -> Response:
        return page(self.batches.report(request.path_params["bid"]))

    # -- dashboard -------------------------------------------------------------------------------------

    async def dashboard(self, request: Request) -> Response:
        query = request.query_params
        _known(query, ("before", "state", "batch", "provider", "q"))
        filters = self._session_filters(query)
        before = query.get("before") or None
        now = time.time()  # before the page is read: a session started after it is newer
        sessions, cursor = self.sessions.rows(limit=_DASHBOARD_SESSIONS, before=before, **filters)
        self.feed.expect_reader()
        data = {
            "now": now,
            "version": __version__,
            "provider": self.provider,
            "providers": list(PROVIDER_NAMES),
            "states": list(STATES),
            "filters": {
                "state": ",".join(filters["states"]),
                "batch": filters["batch"] or "",
                "provider": filters["provider"] or "",
                "q": filters["text"] or "",
            },
            "before": before,
            "next": cursor,
            "offset": self.sessions.newer(before, **filters) if before is not None else 0,
            "limit": _DASHBOARD_SESSIONS,
            "sessions": sessions,
            "total": self.sessions.count(**filters),
            "running": self.sessions.count(("running",)),
            "batches": self.batches.rows(tasks=SHOWN_TASKS, limit=_DASHBOARD_BATCHES),
            "approvals": self.approvals.pending(),
            "feed": self.feed.seq,
        }
        return page(render_dashboard(data), kind="dashboard")

    async def session_page(self, request: Request) -> Response:
        sid = request.path_params["sid"]
        try:
            session = self.sessions.describe(sid)
        except NotFound:
            return page(missing_page(f"no session {sid!r} on this daemon"), status_code=404, kind="missing")
        self.feed.expect_reader()
        data = {
            "version": __version__,
            "session": session,
            "approvals": self.approvals.pending(sid),
            "feed": self.feed.seq,
        }
        return page(render_session(data), kind="session")
