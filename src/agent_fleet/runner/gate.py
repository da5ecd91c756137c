"""The quality gate: did the agent's turn leave the work in an acceptable state?

Two checks, each optional; the gate passes when every configured check passes:

- ``require_commit``: HEAD moved to a new commit since the task started (a commit reachable from HEAD
  that was not reachable from the starting HEAD; a reset back to an older commit does not count);
- ``command``: a shell command exits 0 in the task's working directory. The tail of its combined
  stdout/stderr (``output_limit`` characters) is kept so a follow-up turn can show it to the agent.

A gate with no check configured passes at once.
"""

from __future__ import annotations

import asyncio
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agent_fleet._process import ChildProcess, Tail
from agent_fleet.errors import UsageError
from agent_fleet.runner import _git

__all__ = ["DEFAULT_GATE_TIMEOUT", "GateCheck", "GateConfig", "GateResult", "run_gate"]

DEFAULT_OUTPUT_LIMIT = 4000
#: Seconds each run of the gate command may take, by default (``--gate-timeout``).
DEFAULT_GATE_TIMEOUT = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class GateConfig:
    """What the gate checks. ``command_timeout`` bounds each run of the command (``None``: no limit; a
    task's ``timeout`` bounds it too)."""

    require_commit: bool = False
    command: str | None = None
    command_timeout: float | None = DEFAULT_GATE_TIMEOUT
    output_limit: int = DEFAULT_OUTPUT_LIMIT

    def __post_init__(self) -> None:
        if self.command is not None and not self.command.strip():
            raise UsageError("the gate command is empty")
        if self.command_timeout is not None and not (0 < self.command_timeout < math.inf):
            raise UsageError(
                f"gate command timeout must be a finite number of seconds > 0, not {self.command_timeout!r}"
            )
        if self.output_limit < 0:
            raise UsageError(f"gate output limit must be >= 0, not {self.output_limit!r}")

    @property
    def enabled(self) -> bool:
        return self.require_commit or self.command is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class GateCheck:
    """One check's outcome. ``detail`` is one line; ``output`` the command's output tail."""

    name: Literal["commit", "command"]
    passed: bool
    detail: str
    output: str = ""
    exit_code: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GateResult:
    checks: tuple[GateCheck, ...] = ()

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def summary(self) -> str:
        """One line: ``passed`` or the failed checks' details."""
        if not self.checks:
            return "no gate configured"
        if self.passed:
            return "passed (" + "; ".join(c.detail for c in self.checks) + ")"
        return "; ".join(c.detail for c in self.checks if not c.passed)

    def followup_prompt(self) -> str:
        """The follow-up turn's prompt: what failed, with the command's output tail."""
        parts = ["The quality gate failed after your last turn. Fix the problems below, then finish."]
        for check in self.checks:
            if check.passed:
                continue
            if check.name == "commit":
                parts.append(
                    f"- {check.detail}. Commit your work (for example `git add -A && git commit -m "
                    '"<message>"`) before you finish.'
                )
            else:
                parts.append(f"- {check.detail}.")
                if check.output:
                    parts.append(
                        f"Its output (last {len(check.output)} characters):\n```\n{check.output}\n```"
                    )
        return "\n".join(parts)


async def run_gate(config: GateConfig, cwd: str | os.PathLike[str], start_head: str | None) -> GateResult:
    """Run every configured check in ``cwd``. ``start_head`` is HEAD when the task started."""
    checks: list[GateCheck] = []
    if config.require_commit:
        checks.append(await _check_commit(cwd, start_head))
    if config.command is not None:
        checks.append(await _check_command(config, cwd))
    return GateResult(checks=tuple(checks))


async def _check_commit(cwd: str | os.PathLike[str], start_head: str | None) -> GateCheck:
    try:
        new = await _git.commits_since(cwd, start_head)
        current = await _git.head(cwd)
    except _git.GitError as exc:
        return GateCheck(name="commit", passed=False, detail=f"cannot read the git history: {exc}")
    if new > 0 and current is not None:
        noun = "commit" if new == 1 else "commits"
        return GateCheck(name="commit", passed=True, detail=f"{new} new {noun}, HEAD at {current[:12]}")
    where = f"HEAD is still at {current[:12]}" if current else "the repository has no commit yet"
    return GateCheck(name="commit", passed=False, detail=f"no new commit since the task started: {where}")


async def _check_command(config: GateConfig, cwd: str | os.PathLike[str]) -> GateCheck:
    command = config.command
    assert command is not None
    limit = config.output_limit
    try:
        # Under the reaper: a timeout, a cancel or the end of the shell ends everything it started.
        proc = await ChildProcess.start(
            ["/bin/sh", "-c", command], cwd=Path(cwd), stdin=asyncio.subprocess.DEVNULL, stderr="stdout"
        )
    except OSError as exc:
        return GateCheck(
            name="command", passed=False, detail=f"gate command `{command}` could not start: {exc}"
        )
    # Keep a few times the character limit in bytes: UTF-8 may need up to 4 bytes a character.
    tail = Tail(4 * limit + 65536)
    timed_out = False
    assert proc.stdout is not None
    # A task of its own, awaited (or cancelled and awaited) here: no gather, whose future would be left
    # holding a CancelledError nobody retrieves when a stop cancels the gate (Python 3.11 logged it as
    # "_GatheringFuture exception was never retrieved" on the user's terminal).
    drain = asyncio.get_running_loop().create_task(tail.drain(proc.stdout), name="gate:output")
    try:
        async with asyncio.timeout(config.command_timeout):
            await proc.wait()  # (returns once the command's whole tree is gone: its output is at EOF)
            await drain
    except TimeoutError:
        timed_out = True
    finally:
        if proc.returncode is None:
            await proc.stop(grace=0)
        if not drain.done():
            drain.cancel()
            await asyncio.wait([drain])
    text = tail.text()
    output = text[-limit:] if limit else ""
    if timed_out:
        detail = f"gate command `{command}` timed out after {config.command_timeout:g}s"
        return GateCheck(name="command", passed=False, detail=detail, output=output)
    code = proc.returncode
    if code == 0:
        return GateCheck(
            name="command", passed=True, detail=f"`{command}` exited 0", output=output, exit_code=0
        )
    return GateCheck(
        name="command",
        passed=False,
        detail=f"gate command `{command}` exited with code {code}",
        output=output,
        exit_code=code,
    )
