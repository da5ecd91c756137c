"""The runner: a task is implement -> gate -> (review) -> follow-up on one session; a batch runs many.

    from agent_fleet import Spec
    from agent_fleet.runner import GateConfig, Task, run_task

    result = await run_task(
        Task(spec=Spec(prompt="fix the failing test", cwd=repo), gate=GateConfig(command="pytest -q")),
        transcript="run.jsonl",
    )
    result.status, result.reason, result.followups

The ``agent-fleet`` CLI is a thin shell over ``run_task``, ``run_batch``, ``run_demo`` and ``diagnose``.
"""

from agent_fleet.runner._counters import TaskCounters
from agent_fleet.runner._git import GitError
from agent_fleet.runner._types import EventSink, Source, TaskEvent
from agent_fleet.runner.batch import BatchEntry, BatchResult, BatchTask, load_tasks, run_batch
from agent_fleet.runner.gate import GateCheck, GateConfig, GateResult, run_gate
from agent_fleet.runner.providers import (
    PROVIDER_NAMES,
    ProviderEntry,
    check_provider,
    make_provider,
    provider_entry,
    register,
)
from agent_fleet.runner.review import PRIORITY_NAMES, Finding, ReviewResult, ReviewTarget, parse_priority
from agent_fleet.runner.task import ReviewConfig, Task, TaskResult, TaskStatus, run_task, validate_task
from agent_fleet.runner.transcript import Redactor, TranscriptWriter, event_record

__all__ = [
    "PRIORITY_NAMES",
    "PROVIDER_NAMES",
    "BatchEntry",
    "BatchResult",
    "BatchTask",
    "EventSink",
    "Finding",
    "GateCheck",
    "GateConfig",
    "GateResult",
    "GitError",
    "ProviderEntry",
    "Redactor",
    "ReviewConfig",
    "ReviewResult",
    "ReviewTarget",
    "Source",
    "Task",
    "TaskCounters",
    "TaskEvent",
    "TaskResult",
    "TaskStatus",
    "TranscriptWriter",
    "check_provider",
    "event_record",
    "load_tasks",
    "make_provider",
    "parse_priority",
    "provider_entry",
    "register",
    "run_batch",
    "run_gate",
    "run_task",
    "validate_task",
]
