"""The served OpenAPI document and the server agree, body by body (issue 28 item 14), hermetic and fast:
each body below is checked against its schema with ``jsonschema`` and sent to a daemon on a provider
double; a body the schema allows is never a 400, and one it forbids is always a 400. The cases are
the ones schemathesis found between its runs (nulls the server took as "left out", ``spec: false`` on a
batch, ``narrowed_by`` nested deeper than the server takes, a resume without its body, whole numbers
written ``1.0``): schemathesis samples, this table keeps each of them checked on every run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jsonschema
import pytest

from agent_fleet.serve import Daemon
from agent_fleet.serve._openapi import OPENAPI

from .conftest import MakeDaemon, client
from .fakes import fake_providers

_SCHEMAS = OPENAPI["components"]["schemas"]
_SPEC_FIELDS = [name for name in _SCHEMAS["Spec"]["properties"] if name != "prompt"]
_PERMISSION_FIELDS = list(_SCHEMAS["PermissionConfig"]["properties"])
_TASK_FIELDS = [key for key in _SCHEMAS["TaskLine"]["properties"] if key not in ("id", "prompt")]


def _valid(schema: str, body: Any) -> bool:
    document = {"$ref": f"#/components/schemas/{schema}", "components": OPENAPI["components"]}
    return jsonschema.Draft202012Validator(document).is_valid(body)


def _nested(levels: int) -> dict[str, Any]:
    permission: dict[str, Any] = {}
    for _ in range(levels):
        permission = {"narrowed_by": permission}
    return permission


def _agrees(schema: str, body: Any, status: int) -> bool:
    """Allowed and not refused as malformed, or forbidden and refused as malformed (404 and 403 are
    about ids and the floor, which no schema says)."""
    return (status != 400) if _valid(schema, body) else (status == 400)


@pytest.fixture
async def http(make_daemon: MakeDaemon) -> AsyncIterator[httpx.AsyncClient]:
    daemon: Daemon = await make_daemon(providers=fake_providers)
    async with client(daemon) as c:
        yield c


SPECS: list[dict[str, Any]] = [
    *({"prompt": "hi", name: None} for name in _SPEC_FIELDS),
    *({"prompt": "hi", "permission": {name: None}} for name in _PERMISSION_FIELDS),
    *({"prompt": "hi", "permission": _nested(levels)} for levels in range(7)),
    {"prompt": "hi", "max_turns": 2.0},
    {"prompt": "hi", "max_turns": 2.5},
]


async def test_a_session_body_is_refused_exactly_when_its_schema_forbids_it(http: httpx.AsyncClient) -> None:
    wrong = []
    for body in SPECS:
        response = await http.post("/v1/sessions", json=body)
        if not _agrees("Spec", body, response.status_code):
            wrong.append((json.dumps(body), _valid("Spec", body), response.status_code, response.text[:200]))
    assert not wrong, "\n".join(map(str, wrong))


_LINE: dict[str, Any] = {"id": "a", "prompt": "p"}
BATCHES: list[dict[str, Any]] = [
    *({"tasks": [_LINE], "spec": value} for value in (False, 0, "", [], None, {}, {"model": "m"})),
    *({"tasks": [_LINE], "jobs": value} for value in (None, True, 0, 65, 1.0, 2.5)),
    *({"tasks": [_LINE], "max_followups": value} for value in (None, -1, True, 1.0)),
    *({"tasks": [_LINE], "gate_cmd": value} for value in (None, "", " ", 1)),
    *({"tasks": [_LINE], "worktrees": value} for value in (True, False, None, 1)),
    *({"tasks": [{**_LINE, key: None}]} for key in _TASK_FIELDS),
    {"tasks": [{**_LINE, "max_followups": 1.0}]},
    {"tasks": [{**_LINE, "model_timeout": -1}]},
    {"tasks": [{**_LINE, "model_timeout": 0}]},
    {"tasks": [{**_LINE, "future_key": 1}]},
]


async def test_a_batch_body_is_refused_exactly_when_its_schema_forbids_it(http: httpx.AsyncClient) -> None:
    wrong = []
    for body in BATCHES:
        response = await http.post("/v1/batches", json=body)
        if not _agrees("Batch", body, response.status_code):
            wrong.append((json.dumps(body), _valid("Batch", body), response.status_code, response.text[:200]))
    assert not wrong, "\n".join(map(str, wrong))


async def test_turn_decision_and_resume_bodies_agree_with_their_schemas(http: httpx.AsyncClient) -> None:
    sid = (await http.post("/v1/sessions", json={"prompt": "hi"})).json()["session_id"]
    wrong = []
    for body in (
        {"prompt": "x", "images": None},
        {"prompt": "x", "output_schema": None},
        {"prompt": "x", "images": []},
        {"prompt": "x"},
    ):
        async with http.stream("GET", f"/v1/sessions/{sid}/events", params={"after": "0"}) as events:
            await events.aread()  # the turn before has ended: the next one may start
        response = await http.post(f"/v1/sessions/{sid}/turns", json=body)
        if not _agrees("Prompt", body, response.status_code):
            wrong.append((json.dumps(body), response.status_code, response.text[:200]))
    batch = (await http.post("/v1/batches", json={"tasks": [_LINE]})).json()["batch_id"]
    for body in ({"decision": "decline", "reason": None}, {"decision": "decline", "reason": "no"}):
        response = await http.post("/v1/approvals/1", json=body)  # no such approval: 404 when well-formed
        if not _agrees("Decision", body, response.status_code):
            wrong.append((json.dumps(body), response.status_code, response.text[:200]))
    assert not wrong, "\n".join(map(str, wrong))
    # A resume says what it resumes: its body is required (issue 28 item 14), by the server and the schema.
    operation = OPENAPI["paths"]["/v1/batches/{bid}/resume"]["post"]
    assert operation["requestBody"]["required"] is True
    refused = await http.post(f"/v1/batches/{batch}/resume")
    assert refused.status_code == 400, refused.text
    assert "body" in refused.json()["error"]["message"]
    assert (await http.post("/v1/sessions", params={"resume": sid})).status_code == 400
    assert OPENAPI["paths"]["/v1/sessions"]["post"]["requestBody"]["required"] is True


def test_every_key_of_a_task_line_is_described() -> None:
    """A key the runner takes must be in the document, with its type (it was "anything": issue 28 14)."""
    from agent_fleet.runner._tasks_file import KEYS

    line = OPENAPI["components"]["schemas"]["TaskLine"]
    assert set(line["properties"]) == set(KEYS)
    assert all(line["properties"][key] for key in KEYS)
