"""Events and specs as JSON, both ways: what the daemon (``serve``) sends and ``RemoteProvider`` reads.

An event's record is ``{"type": <class name>, <its fields>...}`` — the same fields as a transcript or
``--json`` record (``runner.transcript.event_record``), which adds ``ts``, ``task_id`` and ``source``.
``event_from_record`` ignores keys it does not know, so a newer daemon never crashes an older client;
a record of an unknown type becomes ``UnknownEvent(raw=record)``.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from agent_fleet.contract import PermissionConfig, Spec
from agent_fleet.errors import Unsupported, UsageError
from agent_fleet.events import ERROR_CODES, Error, Event, UnknownEvent

__all__ = ["event_from_record", "event_to_record", "permission_to_json", "spec_from_json", "spec_to_json"]

# Every member of the ``Event`` union, by class name: a new event type is carried with no change here.
_TYPES: Final[dict[str, type[Any]]] = {cls.__name__: cls for cls in typing.get_args(Event)}
# Transcript envelope keys; a field of the same name is stored as ``event_<name>``.
_ENVELOPE: Final = frozenset({"ts", "task_id", "source", "type"})


def event_to_record(event: Event) -> dict[str, Any]:
    """``{"type": ..., **fields}`` for ``event`` (JSON-ready)."""
    record: dict[str, Any] = {"type": type(event).__name__}
    for key, value in dataclasses.asdict(event).items():
        if key == "agent" and value is None:  # the session's own event: no sub-agent to name
            continue
        record[key if key not in _ENVELOPE else f"event_{key}"] = value
    return record


def event_from_record(record: Mapping[str, Any]) -> Event:
    """The event ``record`` describes (see the module docstring).

    Fields are converted by their declared types (nested ``TokenUsage``, ``PlanStep``, tuples) and keys
    this version does not know are ignored. A record that does not fit its type becomes an
    ``UnknownEvent``, except a terminal ``Error`` whose ``code`` is newer than this version: it stays an
    ``Error`` (code ``protocol_error``, the daemon's code in ``data["code"]``) so the turn still ends."""
    cls = _TYPES.get(str(record.get("type")))
    if cls is None:
        return UnknownEvent(raw=dict(record))
    fields: dict[str, Any] = {}
    for key, value in record.items():
        if key in _ENVELOPE:
            continue
        name = key.removeprefix("event_") if key.removeprefix("event_") in _ENVELOPE else key
        fields[name] = value
    if cls is Error and fields.get("code") not in ERROR_CODES and isinstance(fields.get("message"), str):
        given = fields.get("data")
        data: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        return Error(
            code="protocol_error",
            message=fields["message"],
            retryable=fields.get("retryable") is True,
            data={**data, "code": fields.get("code")},
        )
    try:
        event: Event = msgspec.convert(fields, cls, strict=False)
    except msgspec.ValidationError:
        return UnknownEvent(raw=dict(record))
    return event


_LOCAL_ONLY: Final = frozenset({"tools"})  # Python callables: never on the wire
_SPEC_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(Spec)) - _LOCAL_ONLY
_PERMISSION_FIELDS: Final = frozenset(f.name for f in dataclasses.fields(PermissionConfig))


def permission_to_json(config: PermissionConfig) -> dict[str, Any]:
    """``config`` as a JSON object (every field; ``narrowed_by`` nested, or left out when None)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(PermissionConfig):
        value = getattr(config, f.name)
        if f.name == "narrowed_by":
            if value is not None:
                out[f.name] = permission_to_json(value)
        else:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def spec_to_json(spec: Spec) -> dict[str, Any]:
    """``spec`` as a JSON object (only the fields that differ from the defaults, paths as strings)."""
    if getattr(spec, "tools", ()):
        raise Unsupported("Spec.tools are functions of this process: they cannot be sent to a daemon")
    out: dict[str, Any] = {"prompt": spec.prompt}
    default = Spec(prompt="")
    for f in dataclasses.fields(Spec):
        value = getattr(spec, f.name)
        if f.name == "prompt" or value == getattr(default, f.name):
            continue
        if f.name == "permission":
            assert isinstance(value, PermissionConfig)
            value = permission_to_json(value)
        elif f.name == "cwd":
            value = str(value)
        elif f.name == "images":
            value = [str(v) for v in value]
        elif isinstance(value, Mapping):
            value = dict(value)
        out[f.name] = value
    return out


_MAX_NARROWED: Final = 4  # nested ``narrowed_by`` levels a JSON spec may carry


def _permission_from_json(data: Any, where: str, depth: int = 0) -> PermissionConfig:
    if not isinstance(data, Mapping) or set(data) - _PERMISSION_FIELDS:
        raise UsageError(f"{where} must be an object with fields {sorted(_PERMISSION_FIELDS)}")
    fields = dict(data)
    narrower = fields.get("narrowed_by")
    if narrower is not None:
        if depth >= _MAX_NARROWED:
            raise UsageError(f"{where}: narrowed_by nests more than {_MAX_NARROWED} levels")
        fields["narrowed_by"] = _permission_from_json(narrower, f"{where}.narrowed_by", depth + 1)
    for name, value in fields.items():
        if name not in ("default", "profile", "narrowed_by") and not (
            isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)
        ):
            raise UsageError(f"{where}.{name} must be a list of strings")
    try:
        return PermissionConfig(**fields)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{where}: {exc}") from exc


_STR: Final = ("cwd", "model", "base_instructions", "developer_instructions", "reasoning_effort", "sandbox")
_OBJECTS: Final = ("mcp_servers", "output_schema", "config", "answers", "env")
_NUMBERS: Final = ("timeout", "idle_timeout", "max_cost_usd")


def _check_types(fields: Mapping[str, Any]) -> None:
    """``UsageError`` for a spec field of the wrong JSON type (before ``Spec`` trips over it)."""
    for name, value in fields.items():
        if value is None:
            continue
        if name in (*_STR, "mode", "temp_dir") and not isinstance(value, str):
            raise UsageError(f"spec.{name} must be a string")
        if name in _OBJECTS and not isinstance(value, Mapping):
            raise UsageError(f"spec.{name} must be an object")
        if name in _NUMBERS and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise UsageError(f"spec.{name} must be a number")
        if name == "max_turns" and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (isinstance(value, float) and not value.is_integer())
        ):
            raise UsageError("spec.max_turns must be a whole number")
        if name == "images" and not (isinstance(value, list) and all(isinstance(i, str) for i in value)):
            raise UsageError("spec.images must be a list of strings")
    for server in (fields.get("mcp_servers") or {}).values():
        if not isinstance(server, Mapping):
            raise UsageError("spec.mcp_servers must map names to objects")


def spec_from_json(data: Any) -> Spec:
    """A ``Spec`` from a JSON object; ``UsageError`` naming what is wrong."""
    if not isinstance(data, Mapping):
        raise UsageError("a spec must be a JSON object")
    unknown = set(data) - _SPEC_FIELDS - _LOCAL_ONLY
    if "tools" in data:
        raise UsageError("spec.tools cannot be sent: tools are functions of the caller's process")
    if unknown:
        raise UsageError(f"unknown spec field(s): {', '.join(sorted(unknown))}")
    if not isinstance(data.get("prompt"), str) or not data["prompt"].strip():
        raise UsageError("spec.prompt must be a non-empty string")
    fields = dict(data)
    _check_types(fields)
    if isinstance(fields.get("max_turns"), float):  # 3.0: JSON says nothing about int and float
        fields["max_turns"] = int(fields["max_turns"])
    permission = fields.get("permission")
    if permission is not None:
        fields["permission"] = _permission_from_json(permission, "spec.permission")
    if "images" in fields:
        fields["images"] = tuple(fields["images"] or ())
    try:
        return Spec(**fields)
    except (TypeError, ValueError, AttributeError) as exc:  # a field of the wrong JSON type
        raise UsageError(f"bad spec: {exc}") from exc
