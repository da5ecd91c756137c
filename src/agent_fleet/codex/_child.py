"""The app-server child (process, connection, version) and the small pure helpers of its provider."""

from __future__ import annotations

import os
from typing import Any

from agent_fleet._process import ChildProcess
from agent_fleet.codex.options import CodexOptions
from agent_fleet.contract import Spec
from agent_fleet.jsonrpc import Connection

__all__ = ["Child", "route", "stderr_reason", "workspace"]


def route(method: str, params: Any) -> str | None:
    # v2 messages carry threadId; the legacy approval requests carry conversationId.
    if type(params) is dict:
        key = params.get("threadId") or params.get("conversationId")
        return key if type(key) is str else None
    return None


def workspace(spec: Spec, options: CodexOptions) -> str:
    """The approval bridge's containment root: the workspace we asked for, never a cwd codex reports."""
    return os.path.realpath(os.path.expanduser(os.fspath(spec.cwd or options.cwd or os.getcwd())))


def stderr_reason(tail: str) -> str | None:
    """codex's own reason for exiting at startup (e.g. a bad ``-c`` value): its ``Error: ...`` block.

    codex prints it (then a backtrace) on stderr and exits 1 before answering ``initialize``;
    stderr is the only place the reason exists, so it is shown as codex wrote it.
    """
    lines = tail.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Error: ")]
    if not starts:
        return None
    block = []
    for line in lines[starts[-1] :]:
        if not line.strip() or line.startswith("Stack backtrace:"):
            break
        block.append(line.strip())
    return " ".join(block)[len("Error: ") :][:500] or None


class Child:
    """The running app-server process (with its stderr tail) and its connection."""

    def __init__(self, proc: ChildProcess, conn: Connection) -> None:
        self.proc = proc
        self.conn = conn
        self.version: str | None = None

    def stderr_tail(self) -> str:
        return self.proc.stderr_tail()
