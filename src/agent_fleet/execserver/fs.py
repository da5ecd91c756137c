"""``FileSystem``: the exec-server's ``fs/*`` methods with native paths and bytes.

Paths name files on the *server's* host and must be absolute; they travel as ``file:`` URIs (the
server rejects native paths with -32602). File contents travel as base64. Errors are typed by code:
``NotFoundError`` (-32004) for a missing path, ``InvalidRequestError`` (-32600) e.g. for reading a
directory, ``InternalServerError`` (-32603) for other OS errors (exists, not empty, not a directory).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent_fleet.errors import RemoteProtocolError
from agent_fleet.execserver._wire import b64decode, b64encode, from_uri, to_uri

__all__ = ["DirectoryEntry", "FileMetadata", "FileSystem"]

_Request = Callable[[str, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileMetadata:
    """``fs/getMetadata``: kind, size in bytes, and times in milliseconds since the epoch (0 if unknown)."""

    is_directory: bool
    is_file: bool
    is_symlink: bool
    size: int
    created_at_ms: int
    modified_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectoryEntry:
    """One ``fs/readDirectory`` entry."""

    file_name: str
    is_directory: bool
    is_file: bool


def _obj(result: Any, method: str) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise RemoteProtocolError(f"{method}: expected an object result, got {type(result).__name__}")
    return result


def _field(obj: dict[str, Any], key: str, kind: type, method: str) -> Any:
    value = obj.get(key)
    if type(value) is not kind:
        raise RemoteProtocolError(f"{method}: {key} must be {kind.__name__}, got {value!r}")
    return value


class FileSystem:
    """Filesystem operations on the exec-server's host; reached as ``ExecServerClient.fs``."""

    def __init__(self, request: _Request) -> None:
        self._request = request

    async def read_file(self, path: str | os.PathLike[str]) -> bytes:
        """The whole file's bytes."""
        result = _obj(await self._request("fs/readFile", {"path": to_uri(path)}), "fs/readFile")
        return b64decode(result.get("dataBase64"), "fs/readFile")

    async def write_file(self, path: str | os.PathLike[str], data: bytes) -> None:
        """Create or replace the file with ``data`` (the parent directory must exist)."""
        await self._request("fs/writeFile", {"path": to_uri(path), "dataBase64": b64encode(data)})

    async def create_directory(self, path: str | os.PathLike[str], *, recursive: bool = False) -> None:
        """Create a directory; ``recursive`` creates missing parents and tolerates an existing one."""
        await self._request("fs/createDirectory", {"path": to_uri(path), "recursive": recursive})

    async def get_metadata(self, path: str | os.PathLike[str]) -> FileMetadata:
        m = "fs/getMetadata"
        r = _obj(await self._request(m, {"path": to_uri(path)}), m)
        return FileMetadata(
            is_directory=_field(r, "isDirectory", bool, m),
            is_file=_field(r, "isFile", bool, m),
            is_symlink=_field(r, "isSymlink", bool, m),
            size=_field(r, "size", int, m),
            created_at_ms=_field(r, "createdAtMs", int, m),
            modified_at_ms=_field(r, "modifiedAtMs", int, m),
        )

    async def read_directory(self, path: str | os.PathLike[str]) -> list[DirectoryEntry]:
        """The directory's entries (without ``.`` and ``..``), in the server's order."""
        m = "fs/readDirectory"
        r = _obj(await self._request(m, {"path": to_uri(path)}), m)
        entries = r.get("entries")
        if not isinstance(entries, list):
            raise RemoteProtocolError(f"{m}: entries must be a list")
        out = []
        for entry in entries:
            e = _obj(entry, m)
            out.append(
                DirectoryEntry(
                    file_name=_field(e, "fileName", str, m),
                    is_directory=_field(e, "isDirectory", bool, m),
                    is_file=_field(e, "isFile", bool, m),
                )
            )
        return out

    async def remove(
        self, path: str | os.PathLike[str], *, recursive: bool = False, force: bool = False
    ) -> None:
        """Remove a file or directory. A non-empty directory needs ``recursive``; a missing path is
        ``NotFoundError`` unless ``force``. (The server's own defaults, when the flags are omitted,
        are recursive and forced; this method always sends both.)"""
        await self._request("fs/remove", {"path": to_uri(path), "recursive": recursive, "force": force})

    async def copy(
        self, src: str | os.PathLike[str], dst: str | os.PathLike[str], *, recursive: bool = False
    ) -> None:
        """Copy a file (or, with ``recursive``, a directory tree) from ``src`` to ``dst``."""
        await self._request(
            "fs/copy",
            {"sourcePath": to_uri(src), "destinationPath": to_uri(dst), "recursive": recursive},
        )

    async def canonicalize(self, path: str | os.PathLike[str]) -> str:
        """The canonical absolute path (symlinks and ``..`` resolved) as a native path."""
        r = _obj(await self._request("fs/canonicalize", {"path": to_uri(path)}), "fs/canonicalize")
        return from_uri(_field(r, "path", str, "fs/canonicalize"))
