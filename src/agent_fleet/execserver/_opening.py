"""``Opening``: what ``ExecServerClient.connect``/``spawn`` return, awaitable or an async context."""

from __future__ import annotations

from collections.abc import Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_fleet.execserver.client import ExecServerClient

__all__ = ["Opening"]


class Opening:
    """What ``connect``/``spawn`` return: ``await`` it for an open client, or ``async with`` it."""

    __slots__ = ("_client",)

    def __init__(self, client: ExecServerClient) -> None:
        self._client = client

    def __await__(self) -> Generator[Any, None, ExecServerClient]:
        return self._open().__await__()

    async def _open(self) -> ExecServerClient:
        try:
            await self._client.open()
        except BaseException:
            await self._client.close()
            raise
        return self._client

    async def __aenter__(self) -> ExecServerClient:
        return await self._open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._client.close()
