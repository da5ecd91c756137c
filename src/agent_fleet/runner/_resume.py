"""Opening a task's session: a new one, or the interrupted one it continues (``run_task``'s
``resume_session``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agent_fleet.contract import Handle, Provider, Spec
from agent_fleet.errors import RPCError, UsageError

__all__ = ["INTERRUPTED_FOLLOWUP", "open_session"]

#: The prompt of the turn that resumes an interrupted session.
INTERRUPTED_FOLLOWUP = (
    "Your previous run on this task was interrupted before it finished (the batch running it was stopped). "
    "Look at the current state of the work, then continue the task from where you left off."
)


async def open_session(
    provider: Provider, spec: Spec, resume_session: str | None, note: Callable[..., Any]
) -> tuple[Handle, str | None]:
    """``resume_session`` continued with ``INTERRUPTED_FOLLOWUP``, or a new session with ``spec``'s prompt
    when there is none or the provider cannot resume it (then ``note("resume_failed", ...)`` says why).
    Returns the handle and the session it resumed (None: a new one)."""
    if resume_session is not None:
        try:
            return await provider.resume(
                resume_session, replace(spec, prompt=INTERRUPTED_FOLLOWUP)
            ), resume_session
        except (RPCError, UsageError) as exc:  # an unknown thread, or a provider that cannot resume
            note("resume_failed", session_id=resume_session, reason=str(exc))
    return await provider.spawn(spec), None
