"""Stored threads and the model catalogue (``CodexProvider``'s): ``thread/list``, ``thread/read``,
``thread/archive`` / ``thread/unarchive`` (a fleet lets go of finished threads to bound the
app-server's memory, and brings one back to resume it) and ``model/list``."""

from __future__ import annotations

from typing import Any

from agent_fleet.codex import _overload
from agent_fleet.codex._records import model_info, session_info
from agent_fleet.codex.options import CodexOptions
from agent_fleet.contract import ModelInfo, SessionInfo
from agent_fleet.errors import RPCError
from agent_fleet.jsonrpc import Connection

__all__ = ["StoredMixin"]


class StoredMixin:
    """Mixed into ``CodexProvider`` (which defines ``options``, ``_default_efforts`` and
    ``_connection``)."""

    options: CodexOptions
    _default_efforts: dict[str | None, str | None]

    async def _connection(self) -> Connection:
        raise NotImplementedError

    async def list_sessions(self, *, limit: int | None = None, archived: bool = False) -> list[SessionInfo]:
        """Stored threads, newest first (``thread/list``, following pages up to ``limit``)."""
        conn = await self._connection()
        out: list[SessionInfo] = []
        cursor: str | None = None
        while limit is None or len(out) < limit:
            params: dict[str, Any] = {"archived": archived}
            if limit is not None:
                params["limit"] = limit - len(out)
            if cursor:
                params["cursor"] = cursor
            page = await _overload.request(conn, "thread/list", params, timeout=self.options.rpc_timeout)
            out += [session_info(t) for t in page.get("data") or [] if isinstance(t, dict)]
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return out if limit is None else out[:limit]

    async def read_session(self, session_id: str) -> SessionInfo:
        """Thread ``session_id`` with its turns in ``raw["turns"]`` (``thread/read``)."""
        conn = await self._connection()
        result = await _overload.request(
            conn,
            "thread/read",
            {"threadId": session_id, "includeTurns": True},
            timeout=self.options.rpc_timeout,
        )
        thread = result.get("thread") if isinstance(result, dict) else None
        if not isinstance(thread, dict):
            raise RPCError(-32603, f"thread/read without a thread: {result!r}")
        return session_info(thread)

    async def archive_session(self, session_id: str) -> None:
        """Archive thread ``session_id`` (``thread/archive``): codex unloads it and moves its rollout
        aside, so a finished session no longer holds app-server memory. ``resume()`` brings it back.
        Raises ``RPCError`` when codex has no such (unarchived) thread."""
        conn = await self._connection()
        await _overload.request(
            conn, "thread/archive", {"threadId": session_id}, timeout=self.options.rpc_timeout
        )

    async def unarchive_session(self, session_id: str) -> None:
        """Bring archived thread ``session_id`` back (``thread/unarchive``). Raises ``RPCError`` when
        it is not archived (``resume()`` unarchives by itself when it has to)."""
        conn = await self._connection()
        await _overload.request(
            conn, "thread/unarchive", {"threadId": session_id}, timeout=self.options.rpc_timeout
        )

    async def list_models(self, *, include_hidden: bool = False) -> list[ModelInfo]:
        """Every model from ``model/list`` (following ``nextCursor`` pages) as ``ModelInfo``."""
        return [model_info(m) for m in await self._model_records(include_hidden)]

    async def default_effort(self, model: str | None) -> str | None:
        """The reasoning effort ``model`` uses when none is set (``model/list``; looked up once)."""
        if model not in self._default_efforts:
            records = await self._model_records(include_hidden=True)
            for record in records:
                effort = record.get("defaultReasoningEffort")
                self._default_efforts[str(record.get("model") or record.get("id"))] = (
                    effort if isinstance(effort, str) else None
                )
            self._default_efforts.setdefault(model, None)
        return self._default_efforts[model]

    async def _model_records(self, include_hidden: bool) -> list[dict[str, Any]]:
        conn = await self._connection()
        models: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"includeHidden": include_hidden}
            if cursor:
                params["cursor"] = cursor
            page = await _overload.request(conn, "model/list", params, timeout=self.options.rpc_timeout)
            models += [m for m in page.get("data") or [] if isinstance(m, dict)]
            cursor = page.get("nextCursor")
            if not cursor:
                return models
