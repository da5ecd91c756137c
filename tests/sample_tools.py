"""Tool definitions shared by the codex and Claude ``Spec.tools`` tests: one definition, both providers."""

from __future__ import annotations

import asyncio
import struct
import zlib
from typing import Any

from agent_fleet.tools import Image


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def lookup(key: str, default: str = "none") -> dict[str, Any]:
    """Look a key up in a tiny table."""
    await asyncio.sleep(0)
    table = {"colour": "blue"}
    return {"key": key, "value": table.get(key, default)}


def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"exploded: {reason}")


def _png() -> bytes:
    """A valid 1x1 red PNG (codex decodes images before it sends them on)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def picture() -> list[Any]:
    """A caption and a picture."""
    return ["a red pixel", Image(data=_png(), mime_type="image/png")]
