"""Claude Code's stored sessions, listed with ``claude-agent-sdk``'s ``list_sessions``.

The SDK reads the sessions where ``CLAUDE_CONFIG_DIR`` (else ``~/.claude``) of *this* process's
environment points, while the provider's CLIs run with ``ClaudeOptions.env`` over it. So the listing
runs in a short child Python process with the CLIs' environment: the SDK's own reading of its files,
and no change to this process's environment (which other threads and children share).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from typing import Any, Final

from agent_fleet.contract import SessionInfo
from agent_fleet.errors import ProviderUnavailable

__all__ = ["list_sessions"]

_TIMEOUT: Final = 60.0
_SCRIPT: Final = """\
import dataclasses, json, sys
from claude_agent_sdk import list_sessions
limit = json.loads(sys.argv[1])
json.dump([dataclasses.asdict(s) for s in list_sessions(limit=limit)], sys.stdout)
"""


def _seconds(value: Any) -> float | None:
    return value / 1000 if isinstance(value, int | float) and not isinstance(value, bool) else None


def session_info(row: Mapping[str, Any]) -> SessionInfo:
    """A ``SessionInfo`` from the SDK's ``SDKSessionInfo`` (as a dict; times in milliseconds)."""
    preview = row.get("first_prompt") or row.get("summary") or ""
    return SessionInfo(
        id=str(row["session_id"]),
        preview=str(preview),
        cwd=row.get("cwd") if isinstance(row.get("cwd"), str) else None,
        created_at=_seconds(row.get("created_at")),
        updated_at=_seconds(row.get("last_modified")),
        raw=dict(row),
    )


async def list_sessions(env: Mapping[str, str], limit: int | None) -> list[SessionInfo]:
    """The stored sessions the CLIs running with ``env`` would find, newest first, at most ``limit``.
    Raises ``ProviderUnavailable`` when the listing fails (with its stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _SCRIPT,
        json.dumps(limit),
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), _TIMEOUT)
    except BaseException:  # the timeout, or our caller cancelled: the child ends with us
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    if proc.returncode != 0:
        raise ProviderUnavailable(
            f"listing Claude Code's sessions failed (exit code {proc.returncode})",
            tried=["claude_agent_sdk.list_sessions"],
            stderr_tail=err.decode(errors="replace")[-4000:],
        )
    rows = json.loads(out)
    return [session_info(row) for row in rows if isinstance(row, dict) and row.get("session_id")]
