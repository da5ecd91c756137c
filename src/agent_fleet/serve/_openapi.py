"""The OpenAPI 3.1 description served at ``/v1/openapi.json`` (kept beside the routes; a test checks that
every route is described)."""

from __future__ import annotations

from typing import Any, Final


def _op(
    summary: str, *, body: str | None = None, ok: str = "200", params: tuple[str, ...] = ()
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {ok: {"description": "success"}}}
    op["responses"].update(
        {"401": {"description": "missing or wrong bearer token"}, "400": {"description": "bad request"}}
    )
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


_EVENTS = _op("Server-sent events of the session, one per agent-fleet event", params=("sid",))
_EVENTS["parameters"] += [
    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer"}, "description": "resume after"},
    {"name": "after", "in": "query", "schema": {"type": "integer"}, "description": "as Last-Event-ID"},
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
                },
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
            "post": _op("Start a session (query: provider, resume)", body="Spec", ok="201"),
        },
        "/v1/sessions/{sid}": {"get": _op("State, usage and history of a session", params=("sid",))},
        "/v1/sessions/{sid}/events": {"get": _EVENTS},
        "/v1/sessions/{sid}/turns": {"post": _op("Start a follow-up turn", body="Prompt", params=("sid",))},
        "/v1/sessions/{sid}/inject": {"post": _op("Steer the running turn", body="Text", params=("sid",))},
        "/v1/sessions/{sid}/stop": {"post": _op("Interrupt the running turn", params=("sid",))},
        "/v1/approvals": {"get": _op("Pending deferred approvals")},
        "/v1/approvals/{aid}": {"post": _op("Decide a pending approval", body="Decision", params=("aid",))},
        "/v1/batches": {"get": _op("Every batch"), "post": _op("Start a batch", body="Batch", ok="201")},
        "/v1/batches/{bid}": {"get": _op("Progress and summary of a batch", params=("bid",))},
        "/v1/batches/{bid}/report": {"get": _op("The batch's report page (HTML)", params=("bid",))},
        "/": {"get": _op("The dashboard (HTML)")},
        "/login": {"post": {**_op("Set the dashboard's token cookie (form field token)"), "security": []}},
    },
}
