"""The OpenAPI 3.1 description served at ``/v1/openapi.json`` (kept beside the routes; a test checks that
every route is described, and CI runs schemathesis against it with every check on).

The schemas are as strict as the server: what they allow, the server takes (or refuses for a reason a
schema cannot say: a ``cwd`` outside the allowed roots is a 403, a regular expression that does not
compile a 400), and what they forbid, the server refuses with 400.
"""

from __future__ import annotations

from typing import Any, Final

from agent_fleet._event_json import MAX_NARROWED
from agent_fleet.remote import CURSOR_HEADER, SESSION_HEADER
from agent_fleet.runner import PROVIDER_NAMES
from agent_fleet.runner._tasks_file import KEYS as TASK_KEYS
from agent_fleet.runner.review import PRIORITY_NAMES
from agent_fleet.serve._batches import MAX_TOTAL, RUNNER_NOTICES

_ERRORS: Final = {
    "400": "bad request",
    "401": "missing or wrong bearer token",
    "403": "a path outside the allowed roots, or refused by the daemon's floor (its policy and trust)",
    "404": "unknown id",
    "409": "not supported by the provider",
    "413": "body too large",
    "502": "the provider failed",
    "503": "the provider is unavailable",
}
_ERROR_BODY: Final = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}

_TEXT: Final = {"type": "string", "minLength": 1, "pattern": r"\S"}  # not blank
_STRINGS: Final = {"type": "array", "items": {"type": "string"}}
_PATH: Final = {"type": "string", "pattern": "^[^\\u0000]*$"}  # no NUL: a path
_PATHS: Final = {"type": "array", "items": _PATH}
_REGEXES: Final = {"type": "array", "items": {"type": "string", "format": "regex"}}
_SECONDS: Final = {"type": "number", "exclusiveMinimum": 0}
_PATTERN: Final = {"type": "string", "format": "regex", "minLength": 1}
_ENV: Final = {
    "type": "object",
    "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
    "additionalProperties": {"type": "string", "pattern": "^[^\\u0000]*$"},
}
_ANSWERS: Final = {
    "type": "object",
    "additionalProperties": {"oneOf": [{"type": "string"}, _STRINGS]},
}
_SANDBOX: Final = {"enum": ["read-only", "workspace-write", "danger-full-access"]}
_HTML: Final = {"description": "a page", "content": {"text/html": {"schema": {"type": "string"}}}}
_SIGN_IN: Final = {"description": "a browser without the token: to the sign-in form (relative Location)"}


def _op(
    summary: str,
    *,
    body: str | None = None,
    ok: str = "200",
    params: tuple[str, ...] = (),
    query: tuple[dict[str, Any], ...] = (),
    errors: tuple[str, ...] = (),
    answer: str | None = None,
) -> dict[str, Any]:
    """An operation; every one may answer 400 and 401, ``errors`` lists the others it may."""
    success: dict[str, Any] = {"description": "success"}
    if answer is not None:
        success["content"] = {"application/json": {"schema": {"$ref": f"#/components/schemas/{answer}"}}}
    op: dict[str, Any] = {"summary": summary, "responses": {ok: success}}
    json_error = {"content": {"application/json": {"schema": _ERROR_BODY}}}
    op["responses"].update(
        {code: {"description": _ERRORS[code], **json_error} for code in ("400", "401", *errors)}
    )
    if body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
        }
    parameters = [{"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params]
    parameters += [{"in": "query", **q} for q in query]
    if parameters:
        op["parameters"] = parameters
    return op


_EVENT_ID: Final = {"type": "string", "pattern": "^[0-9]{1,15}$"}
_FLAG: Final = {"enum": ["0", "1", "true", "false"]}
_EVENTS = _op(
    "Server-sent events of the session, one per agent-fleet event",
    params=("sid",),
    query=(
        {"name": "after", "schema": _EVENT_ID, "description": "as Last-Event-ID"},
        {"name": "follow", "schema": _FLAG, "description": "past Result/Error"},
        {"name": "watch", "schema": _FLAG, "description": "a watcher, not the session's client"},
    ),
    errors=("404",),
)
_EVENTS["parameters"].append(
    {"name": "Last-Event-ID", "in": "header", "schema": _EVENT_ID, "description": "resume after"}
)
_EVENTS["responses"]["200"] = {"description": "text/event-stream", "content": {"text/event-stream": {}}}
_UPDATES = _op(
    "Server-sent events of what changes on the daemon (the dashboard's): session, batch, approval, "
    "approval_decided, note, reset",
    query=(
        {"name": "after", "schema": _EVENT_ID, "description": "as Last-Event-ID"},
        {"name": "session", "schema": {"type": "string"}, "description": "only this session's updates"},
    ),
)
_UPDATES["parameters"].append(
    {"name": "Last-Event-ID", "in": "header", "schema": _EVENT_ID, "description": "resume after"}
)
_UPDATES["responses"]["200"] = {"description": "text/event-stream", "content": {"text/event-stream": {}}}
_STATES: Final = "(running|idle|stopped|failed|interrupted)"
_SESSION_FILTERS: Final = (
    {
        "name": "state",
        "schema": {"type": "string", "pattern": f"^({_STATES}(,{_STATES})*)?$"},
        "description": "comma-separated; empty: any (as a filter form sends it)",
    },
    {"name": "batch", "schema": {"type": "string"}, "description": "sessions of this batch"},
    {"name": "provider", "schema": {"enum": ["", *PROVIDER_NAMES]}, "description": "empty: any"},
    {
        "name": "q",
        "schema": {"type": "string", "maxLength": 200},
        "description": "a text in the id, task, batch, prompt, cwd or model (ASCII case ignored)",
    },
)
_PAGE_ERRORS: Final = {"404": {**_HTML, "description": "no such session (a page)"}}

_PERMISSION_FIELDS: Final[dict[str, Any]] = {
    "allow_patterns": _REGEXES,
    "disallow_patterns": _REGEXES,
    "default": {"enum": ["allow", "deny", "ask"]},
    "rule_packs": _PATHS,
    "allowed_hosts": _STRINGS,
    "mcp_tools": _STRINGS,
    "tool_allow_patterns": _REGEXES,
    "tool_disallow_patterns": _REGEXES,
    "profile": {"enum": ["default", "strict"]},
    "escalation_patterns": _REGEXES,
}


def _permission(narrowed: int) -> dict[str, Any]:
    """A ``PermissionConfig`` whose ``narrowed_by`` nests at most ``narrowed`` levels (the server takes
    ``MAX_NARROWED``: a schema cannot count a recursive reference, so the levels are spelled out)."""
    properties = dict(_PERMISSION_FIELDS)
    if narrowed:
        properties["narrowed_by"] = _permission(narrowed - 1)
    return {"type": "object", "properties": properties, "additionalProperties": False}


_PERMISSION: Final[dict[str, Any]] = {
    **_permission(MAX_NARROWED),
    "description": "A floor applies: the daemon's own is never weakened (docs/api.md).",
}

_TASK_LINE_FIELDS: Final[dict[str, Any]] = {
    "id": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"},
    "prompt": _TEXT,
    "cwd": _PATH,
    "gate_cmd": {"type": "string"},
    "gate_timeout": _SECONDS,
    "require_commit": {"type": "boolean"},
    "model": _TEXT,
    "effort": _TEXT,
    "sandbox": _SANDBOX,
    "allow": {"oneOf": [_PATTERN, {"type": "array", "items": _PATTERN}]},
    "deny": {"oneOf": [_PATTERN, {"type": "array", "items": _PATTERN}]},
    "env": _ENV,
    "provider": {"enum": list(PROVIDER_NAMES)},
    "review": {
        "oneOf": [
            {"type": "boolean"},
            {"enum": list(PRIORITY_NAMES)},
            {
                "type": "object",
                "properties": {"threshold": {"enum": list(PRIORITY_NAMES)}, "model": {"type": "string"}},
                "additionalProperties": False,
            },
        ]
    },
    "timeout": _SECONDS,
    "idle_timeout": {"type": "number", "minimum": 0},
    "model_timeout": {"type": "number", "minimum": 0},
    "max_followups": {"type": "integer", "minimum": 0},
    "answers": _ANSWERS,
}
_NULL: Final = {"type": "null"}
# Every key the runner takes is described (a test holds the two together); a tasks file's null is the
# key left out, as the runner reads it, except for the two every line needs.
_TASK_LINE: Final = {
    "type": "object",
    "required": ["id", "prompt"],
    "properties": {
        key: field if key in ("id", "prompt") else {"anyOf": [field, _NULL]}
        for key, field in sorted(_TASK_LINE_FIELDS.items())
        if key in TASK_KEYS
    },
    "additionalProperties": False,
}

OPENAPI: Final[dict[str, Any]] = {
    "openapi": "3.1.0",
    "info": {"title": "agent-fleet serve", "version": "1"},
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {
            "Spec": {
                "type": "object",
                "required": ["prompt"],
                "properties": {
                    "prompt": _TEXT,
                    "cwd": _PATH,
                    "model": {"type": "string"},
                    "base_instructions": {"type": "string"},
                    "developer_instructions": {"type": "string"},
                    "reasoning_effort": {"type": "string"},
                    "sandbox": _SANDBOX,
                    "mode": {"enum": ["build", "plan", "chat"]},
                    "permission": {"$ref": "#/components/schemas/PermissionConfig"},
                    "mcp_servers": {"type": "object", "additionalProperties": {"type": "object"}},
                    "output_schema": {"type": "object"},
                    "images": _PATHS,
                    "config": {"type": "object"},
                    "timeout": _SECONDS,
                    "idle_timeout": {"type": "number", "minimum": 0},
                    "answers": _ANSWERS,
                    "env": _ENV,
                    "max_turns": {"type": "integer", "minimum": 1},
                    "max_cost_usd": _SECONDS,
                    "temp_dir": _PATH,
                },
                "additionalProperties": False,
            },
            "BatchSpec": {
                "description": "A batch's template Spec: its prompt is optional",
                "allOf": [{"$ref": "#/components/schemas/Spec"}],
            },
            "PermissionConfig": _PERMISSION,
            "Prompt": {
                "type": "object",
                "required": ["prompt"],
                "properties": {"prompt": _TEXT, "images": _PATHS, "output_schema": {"type": "object"}},
                "additionalProperties": False,
            },
            "Text": {
                "type": "object",
                "required": ["text"],
                "properties": {"text": _TEXT},
                "additionalProperties": False,
            },
            "Decision": {
                "type": "object",
                "required": ["decision"],
                "properties": {
                    "decision": {"enum": ["allow_once", "allow_for_session", "decline", "cancel"]},
                    "reason": {"type": "string"},
                },
                "additionalProperties": False,
            },
            "Resume": {
                "type": "object",
                "properties": {
                    "rerun": {"enum": ["failed"], "description": "also run the failed tasks again"}
                },
                "additionalProperties": False,
            },
            "TaskLine": _TASK_LINE,
            "Turn": {
                "type": "object",
                "properties": {
                    "turn": {"type": "integer"},
                    "prompt": {"type": "string"},
                    "status": {"enum": ["running", "completed", "cancelled", "failed", "interrupted"]},
                    "text": {"type": ["string", "null"]},
                    "error": {"type": ["object", "null"]},
                    "usage": {"type": ["object", "null"]},
                    "started": {"type": "number"},
                    "ended": {"type": ["number", "null"]},
                    "first_event_id": {"type": "integer"},
                },
            },
            "Session": {
                "type": "object",
                "properties": {
                    "session_id": {"type": "string"},
                    "provider": {"type": "string"},
                    "state": {"enum": ["running", "idle", "stopped", "failed", "interrupted"]},
                    "spec": {"type": "object", "description": "the client's spec, as sent (redacted)"},
                    "floor": {"type": ["object", "null"], "description": "the daemon's permission"},
                    "turns": {"type": "integer"},
                    "usage": {"type": ["object", "null"]},
                    "step": {"type": "string"},
                    "clients": {"type": "integer", "description": "readers of its events (loaded only)"},
                    "orphan_deadline": {
                        "type": ["number", "null"],
                        "description": "running with no client: when its turn is stopped unless one returns",
                    },
                    "loaded": {"type": "boolean"},
                    "archived": {"type": "boolean"},
                    "prompt": {"type": ["string", "null"], "description": "its first prompt (redacted)"},
                    "cwd": {"type": ["string", "null"]},
                    "task_id": {"type": ["string", "null"], "description": "the batch task it runs"},
                    "batch_id": {"type": ["string", "null"]},
                    "model": {"type": ["string", "null"], "description": "the model it runs"},
                    "model_provider": {"type": ["string", "null"], "description": "who serves the model"},
                    "scripted": {"type": "boolean", "description": "agent_fleet.testing's scripted model"},
                    "model_label": {"type": ["string", "null"], "description": "the model, as people see it"},
                    "created": {"type": "number"},
                    "updated": {"type": "number"},
                    "ended": {"type": ["number", "null"], "description": "when its last turn ended"},
                    "duration": {"type": "number", "description": "seconds, start to end (or now)"},
                    "tokens": {"type": ["integer", "null"]},
                    "cost": {"type": ["number", "null"], "description": "reported, or from --prices"},
                    "currency": {"type": "string"},
                    "notes": {"type": "array", "items": {"type": "object"}, "description": "a runner's"},
                    "last_event_id": {"type": "integer"},
                    "history": {"type": "array", "items": {"$ref": "#/components/schemas/Turn"}},
                },
            },
            "SessionPage": {
                "type": "object",
                "required": ["sessions", "next"],
                "properties": {
                    "sessions": {"type": "array", "items": {"$ref": "#/components/schemas/Session"}},
                    "next": {"type": ["string", "null"], "description": "?before= for the next page"},
                },
            },
            "BatchState": {
                "type": "object",
                "properties": {
                    "batch_id": {"type": "string"},
                    "kind": {"enum": ["daemon", "client"], "description": "run here, or by batch --server"},
                    "name": {"type": ["string", "null"]},
                    "stop_asked": {"type": "boolean"},
                    "provider": {"type": "string"},
                    "state": {"enum": ["running", "succeeded", "failed", "stopped", "interrupted", "error"]},
                    "reason": {"type": ["string", "null"]},
                    "total": {"type": "integer"},
                    "done": {"type": "integer"},
                    "ok": {"type": "integer"},
                    "states": {"type": "object", "description": "tasks per state and finished:<status>"},
                    "tasks": {"type": "array", "items": {"type": "object"}},
                    "summary": {"type": ["object", "null"]},
                },
            },
            "Attach": {
                "type": "object",
                "required": ["name", "total"],
                "properties": {
                    "name": {"type": "string", "pattern": "^[^\\u0000-\\u001f\\u007f]{1,200}$"},
                    "total": {"type": "integer", "minimum": 0, "maximum": MAX_TOTAL},
                    "provider": {"enum": list(PROVIDER_NAMES)},
                },
                "additionalProperties": False,
            },
            "Notices": {
                "type": "object",
                "properties": {
                    "notices": {
                        "type": "array",
                        "maxItems": 1000,
                        "items": {
                            "type": "object",
                            "required": ["task_id", "subtype"],
                            "properties": {
                                "task_id": _TASK_LINE_FIELDS["id"],
                                "subtype": {"enum": sorted(RUNNER_NOTICES)},
                                "data": {"type": "object"},
                            },
                            "additionalProperties": False,
                        },
                    },
                    "state": {"enum": ["succeeded", "failed", "stopped"], "description": "the batch ended"},
                    "reason": {"type": "string"},
                },
                "additionalProperties": False,
            },
            "Batch": {
                "type": "object",
                "required": ["tasks"],
                "properties": {
                    "tasks": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"$ref": "#/components/schemas/TaskLine"},
                        "description": "the tasks file's lines (or its text: one JSON object a line)",
                    },
                    "spec": {
                        "type": ["object", "null"],
                        "description": "the template Spec, its prompt optional",
                    },
                    "jobs": {"type": "integer", "minimum": 1, "maximum": 64},
                    "gate_cmd": {"oneOf": [_TEXT, {"type": "null"}]},
                    "max_followups": {"type": "integer", "minimum": 0},
                    "provider": {"enum": list(PROVIDER_NAMES)},
                    "worktrees": {
                        "type": "boolean",
                        "description": "each task in its own git worktree on branch agent-fleet/<id>, in "
                        "the daemon's <state dir>/boxes",
                    },
                },
                "additionalProperties": False,
            },
        },
    },
    "security": [{"bearer": []}],
    "paths": {
        "/healthz": {"get": {**_op("Liveness (no token needed)"), "security": []}},
        "/v1/openapi.json": {"get": _op("This document")},
        "/v1/info": {"get": _op("Version and default provider")},
        "/v1/updates": {"get": _UPDATES},
        "/v1/sessions": {
            "get": _op(
                "A page of sessions, newest first",
                query=(
                    {"name": "limit", "schema": {"type": "string", "pattern": "^([1-9][0-9]{0,2}|1000)$"}},
                    {"name": "before", "schema": {"type": "string"}, "description": "next of the last page"},
                    *_SESSION_FILTERS,
                ),
                answer="SessionPage",
                errors=("404",),
            ),
            "post": _op(
                "Start a session (or continue one: resume)",
                body="Spec",
                ok="201",
                query=(
                    {"name": "provider", "schema": {"enum": list(PROVIDER_NAMES)}},
                    {
                        "name": "resume",
                        "schema": {"type": "string"},
                        "description": "the session to continue",
                    },
                    {
                        "name": "stream",
                        "schema": _FLAG,
                        "description": "answer with the session's event stream (ids in headers)",
                    },
                ),
                errors=("403", "404", "413", "502", "503"),
            ),
        },
        "/v1/sessions/{sid}": {
            "get": _op(
                "State, usage and per-turn history of a session",
                params=("sid",),
                errors=("404",),
                answer="Session",
            )
        },
        "/v1/sessions/{sid}/events": {"get": _EVENTS},
        "/v1/sessions/{sid}/turns": {
            "post": _op(
                "Start a follow-up turn (a stopped, failed or unloaded session is resumed)",
                body="Prompt",
                params=("sid",),
                errors=("403", "404", "413", "502", "503"),
            )
        },
        "/v1/sessions/{sid}/inject": {
            "post": _op(
                "Steer the running turn", body="Text", params=("sid",), errors=("404", "409", "413", "502")
            )
        },
        "/v1/sessions/{sid}/stop": {
            "post": _op(
                "Stop the running turn; the session can be continued", params=("sid",), errors=("404", "502")
            )
        },
        "/v1/approvals": {
            "get": _op(
                "Pending deferred approvals with their context (redacted)",
                query=({"name": "session", "schema": {"type": "string"}, "description": "of this session"},),
            )
        },
        "/v1/approvals/{aid}": {
            "post": _op("Decide a pending approval", body="Decision", params=("aid",), errors=("404", "413"))
        },
        "/v1/batches": {
            "get": _op("Every batch"),
            "post": _op("Start a batch", body="Batch", ok="201", errors=("403", "413", "502", "503")),
        },
        "/v1/batches/attach": {
            "post": _op(
                "Show a batch a client runs (batch --server) on the dashboard; its tasks come as notices",
                body="Attach",
                ok="201",
                errors=("413",),
            )
        },
        "/v1/batches/{bid}/notices": {
            "post": _op(
                "A client's report on its batch (its runner's notices, its end); answers whether to stop",
                body="Notices",
                params=("bid",),
                errors=("404", "413"),
            )
        },
        "/v1/batches/{bid}/stop": {
            "post": _op(
                "Stop a running batch: no task starts, running turns are interrupted (it can be resumed)",
                params=("bid",),
                errors=("404",),
            )
        },
        "/v1/batches/{bid}": {
            "get": _op(
                "State, progress per task and summary of a batch",
                params=("bid",),
                errors=("404",),
                answer="BatchState",
            )
        },
        "/v1/batches/{bid}/report": {
            "get": {
                **_op("The batch's report page", params=("bid",), errors=("404",)),
                "responses": {**_op("", errors=("404",))["responses"], "200": _HTML},
            }
        },
        "/v1/batches/{bid}/resume": {
            "post": _op(
                "Continue a batch that is not running, with the template and settings in its ledger",
                body="Resume",
                params=("bid",),
                errors=("403", "404", "413", "502", "503"),
            )
        },
        "/": {
            "get": {
                **_op(
                    "The dashboard (a browser without the token is sent to the sign-in form: 303)",
                    query=({"name": "before", "schema": {"type": "string"}}, *_SESSION_FILTERS),
                ),
                "responses": {**_op("", errors=("404",))["responses"], "200": _HTML, "303": _SIGN_IN},
            }
        },
        "/sessions/{sid}": {
            "get": {
                **_op("A session's page: its conversation as it happens", params=("sid",)),
                "responses": {**_op("")["responses"], "200": _HTML, "303": _SIGN_IN, **_PAGE_ERRORS},
            }
        },
        "/login": {
            "get": {
                "summary": "The dashboard's sign-in form",
                "security": [],
                "responses": {"200": _HTML, "400": _op("")["responses"]["400"]},
            },
            "post": {
                "summary": "Check the token (form field token) and set the dashboard's cookie",
                "security": [],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "properties": {"token": {"type": "string"}},
                                "additionalProperties": False,
                            }
                        }
                    },
                },
                "responses": {
                    "303": {"description": "signed in: to the dashboard, with the cookie"},
                    "400": _op("")["responses"]["400"],
                    "401": {**_HTML, "description": "wrong token: the form again"},
                    "413": _op("", errors=("413",))["responses"]["413"],
                },
            },
        },
    },
}
OPENAPI["paths"]["/v1/sessions"]["post"]["responses"]["201"] = {
    "description": "started: {session_id, last_event_id} as JSON, or with stream=1 the session's event "
    "stream (as GET .../events after last_event_id), the ids in headers (percent-encoded)",
    "headers": {
        SESSION_HEADER: {"schema": {"type": "string"}, "description": "with stream=1"},
        CURSOR_HEADER: {"schema": {"type": "string"}, "description": "with stream=1"},
    },
    "content": {"application/json": {}, "text/event-stream": {}},
}
