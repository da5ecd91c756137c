"""The OpenAPI 3.1 description served at ``/v1/openapi.json`` (kept beside the routes; a test checks that
every route is described)."""

from __future__ import annotations

from typing import Any, Final

_ERRORS: Final = {
    "400": "bad request",
    "401": "missing or wrong bearer token",
    "403": "a cwd outside the allowed roots, or refused by the daemon's floor (its policy and trust)",
    "404": "unknown id",
    "409": "not supported by the provider",
    "413": "body too large",
    "502": "the provider failed",
    "503": "the provider is unavailable",
}


def _op(
    summary: str,
    *,
    body: str | None = None,
    ok: str = "200",
    params: tuple[str, ...] = (),
    errors: tuple[str, ...] = (),
    answer: str | None = None,
) -> dict[str, Any]:
    """An operation; every one may answer 400 and 401, ``errors`` lists the others it may."""
    success: dict[str, Any] = {"description": "success"}
    if answer is not None:
        success["content"] = {"application/json": {"schema": {"$ref": f"#/components/schemas/{answer}"}}}
    op: dict[str, Any] = {"summary": summary, "responses": {ok: success}}
    op["responses"].update({code: {"description": _ERRORS[code]} for code in ("400", "401", *errors)})
    if body is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
        }
    if params:
        op["parameters"] = [
            {"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in params
        ]
    return op


_EVENTS = _op(
    "Server-sent events of the session, one per agent-fleet event", params=("sid",), errors=("404",)
)
_EVENT_ID = {"type": "string", "pattern": "^[0-9]{1,15}$"}
_EVENTS["parameters"] += [
    {"name": "Last-Event-ID", "in": "header", "schema": _EVENT_ID, "description": "resume after"},
    {"name": "after", "in": "query", "schema": _EVENT_ID, "description": "as Last-Event-ID"},
    {"name": "follow", "in": "query", "schema": {"type": "integer"}, "description": "1: past Result/Error"},
]
_EVENTS["responses"]["200"] = {"description": "text/event-stream", "content": {"text/event-stream": {}}}

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
                    "prompt": {"type": "string"},
                    "cwd": {"type": "string"},
                    "model": {"type": "string"},
                    "base_instructions": {"type": "string"},
                    "developer_instructions": {"type": "string"},
                    "reasoning_effort": {"type": "string"},
                    "sandbox": {"enum": ["read-only", "workspace-write", "danger-full-access"]},
                    "mode": {"enum": ["build", "plan", "chat"]},
                    "permission": {"$ref": "#/components/schemas/PermissionConfig"},
                    "mcp_servers": {"type": "object"},
                    "output_schema": {"type": "object"},
                    "images": {"type": "array", "items": {"type": "string"}},
                    "config": {"type": "object"},
                    "timeout": {"type": "number"},
                    "idle_timeout": {"type": "number"},
                    "answers": {"type": "object"},
                },
                "additionalProperties": False,
            },
            "PermissionConfig": {
                "type": "object",
                "properties": {
                    "allow_patterns": {"type": "array", "items": {"type": "string"}},
                    "disallow_patterns": {"type": "array", "items": {"type": "string"}},
                    "default": {"enum": ["allow", "deny", "ask"]},
                    "rule_packs": {"type": "array", "items": {"type": "string"}},
                    "allowed_hosts": {"type": "array", "items": {"type": "string"}},
                    "mcp_tools": {"type": "array", "items": {"type": "string"}},
                    "tool_allow_patterns": {"type": "array", "items": {"type": "string"}},
                    "tool_disallow_patterns": {"type": "array", "items": {"type": "string"}},
                    "profile": {"enum": ["default", "strict"]},
                },
                "additionalProperties": False,
                "description": "A floor applies: the daemon's own is never weakened (docs/api.md).",
            },
            "Prompt": {
                "type": "object",
                "required": ["prompt"],
                "properties": {"prompt": {"type": "string"}},
            },
            "Text": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
            "Decision": {
                "type": "object",
                "required": ["decision"],
                "properties": {
                    "decision": {"enum": ["allow_once", "allow_for_session", "decline", "cancel"]},
                    "reason": {"type": "string"},
                },
            },
            "Resume": {
                "type": "object",
                "properties": {
                    "rerun": {"enum": ["failed"], "description": "also run the failed tasks again"}
                },
            },
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
                    "spec": {"type": "object", "description": "the spec it runs with (redacted)"},
                    "turns": {"type": "integer"},
                    "usage": {"type": ["object", "null"]},
                    "step": {"type": "string"},
                    "last_event_id": {"type": "integer"},
                    "history": {"type": "array", "items": {"$ref": "#/components/schemas/Turn"}},
                },
            },
            "BatchState": {
                "type": "object",
                "properties": {
                    "batch_id": {"type": "string"},
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
            "Batch": {
                "type": "object",
                "required": ["tasks"],
                "properties": {
                    "tasks": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]},
                    "spec": {"type": "object"},
                    "jobs": {"type": "integer", "minimum": 1, "maximum": 64},
                    "gate_cmd": {"type": "string"},
                    "max_followups": {"type": "integer", "minimum": 0},
                    "provider": {"type": "string"},
                    "worktrees": {
                        "type": "boolean",
                        "description": "each task in its own git worktree on branch agent-fleet/<id>, in "
                        "the daemon's <state dir>/boxes",
                    },
                },
            },
        },
    },
    "security": [{"bearer": []}],
    "paths": {
        "/healthz": {"get": {**_op("Liveness (no token needed)"), "security": []}},
        "/v1/openapi.json": {"get": _op("This document")},
        "/v1/info": {"get": _op("Version and default provider")},
        "/v1/sessions": {
            "get": _op("Every session (live and recorded)"),
            "post": _op(
                "Start a session (query: provider, resume)",
                body="Spec",
                ok="201",
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
                "Start a follow-up turn (a session not loaded is resumed)",
                body="Prompt",
                params=("sid",),
                errors=("403", "404", "502", "503"),
            )
        },
        "/v1/sessions/{sid}/inject": {
            "post": _op("Steer the running turn", body="Text", params=("sid",), errors=("404", "409"))
        },
        "/v1/sessions/{sid}/stop": {
            "post": _op("Interrupt the running turn", params=("sid",), errors=("404",))
        },
        "/v1/approvals": {"get": _op("Pending deferred approvals (redacted)")},
        "/v1/approvals/{aid}": {
            "post": _op("Decide a pending approval", body="Decision", params=("aid",), errors=("404",))
        },
        "/v1/batches": {
            "get": _op("Every batch"),
            "post": _op("Start a batch", body="Batch", ok="201", errors=("403", "413", "502", "503")),
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
            "get": _op("The batch's report page (HTML)", params=("bid",), errors=("404",))
        },
        "/v1/batches/{bid}/resume": {
            "post": _op(
                "Continue a batch that is not running, with the template and settings in its ledger",
                body="Resume",
                params=("bid",),
                errors=("403", "404", "502", "503"),
            )
        },
        "/": {"get": _op("The dashboard (HTML)")},
        "/login": {
            "get": {**_op("The dashboard's sign-in form (HTML)"), "security": []},
            "post": {
                **_op("Check the token (form field token) and set the dashboard's cookie"),
                "security": [],
            },
        },
    },
}
