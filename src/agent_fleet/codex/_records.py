"""codex's thread and model records as the contract's ``SessionInfo`` and ``ModelInfo``."""

from __future__ import annotations

from typing import Any

from agent_fleet.contract import ModelInfo, SessionInfo

__all__ = ["model_info", "session_info"]


def model_info(record: dict[str, Any]) -> ModelInfo:
    effort = record.get("defaultReasoningEffort")
    return ModelInfo(
        id=str(record.get("model") or record.get("id")),
        name=str(record.get("displayName") or ""),
        description=str(record.get("description") or ""),
        default_effort=str(effort) if effort else None,
        is_default=bool(record.get("isDefault")),
        hidden=bool(record.get("hidden")),
        raw=record,
    )


def session_info(thread: dict[str, Any]) -> SessionInfo:
    def _num(key: str) -> float | None:
        value = thread.get(key)
        return float(value) if isinstance(value, int | float) else None

    cwd = thread.get("cwd")
    return SessionInfo(
        id=str(thread.get("id")),
        preview=str(thread.get("preview") or ""),
        cwd=cwd if isinstance(cwd, str) else None,
        model=thread.get("model") if isinstance(thread.get("model"), str) else None,
        created_at=_num("createdAt"),
        updated_at=_num("updatedAt"),
        forked_from=thread.get("forkedFromId") if isinstance(thread.get("forkedFromId"), str) else None,
        name=thread.get("name") if isinstance(thread.get("name"), str) else None,
        turns=tuple(t for t in thread.get("turns") or () if isinstance(t, dict)),
        raw=thread,
    )
