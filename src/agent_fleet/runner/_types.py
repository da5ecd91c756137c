"""``TaskEvent``: one provider-neutral event, tagged with the task it belongs to and where it came from."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_fleet.events import Event, System

__all__ = ["EventSink", "Source", "TaskEvent", "notice"]

#: ``agent``: the implementing session; ``review``: a review session; ``runner``: the runner's own notices
#: (``System`` events whose ``subtype`` starts with ``runner.``).
Source = Literal["agent", "review", "runner"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEvent:
    task_id: str
    source: Source
    event: Event
    time: float = field(default_factory=time.time)


EventSink = Callable[[TaskEvent], None]


def notice(task_id: str, subtype: str, /, **data: Any) -> TaskEvent:
    """A runner notice: ``System(subtype="runner.<subtype>", data=...)`` from source ``runner``."""
    return TaskEvent(task_id=task_id, source="runner", event=System(subtype=f"runner.{subtype}", data=data))
