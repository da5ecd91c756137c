"""The tasks file of a batch: JSON Lines, one task a line, each setting checked with its line number.

Keys (only ``id`` and ``prompt`` are required; every other key overrides the batch's own setting)::

    id            letters, digits, '.', '_' and '-' (it names the transcript and the branch); unique
    prompt        the task
    cwd           its directory (relative: to the tasks file's directory)
    gate_cmd      a shell command that must exit 0 ("" = none)
    gate_timeout  seconds each run of the gate command may take (> 0; the task's timeout bounds it too)
    require_commit  true / false
    model, effort the model and its reasoning effort
    sandbox       read-only | workspace-write | danger-full-access
    allow, deny   regular expressions (a string or a list) for the approval policy
    env           {"NAME": "value"}: set in the environment of the agent's commands (``Spec.env``: every
                  provider), over the batch's own
    provider      codex | codex-exec | claude
    review        true / false, "P0".."P3" (the threshold), or {"threshold": "P1", "model": "..."}
    timeout       seconds for the whole task (> 0)
    idle_timeout  seconds without an event before a turn is given up (0 = off)
    model_timeout seconds without model progress before a turn is ended and retried (0 = off)
    max_followups follow-up turns after a failed gate or blocking review (>= 0)
    answers       canned answers for the agent's questions (``Spec.answers``; question id, header or
                  text -> a string or a list of strings), over the batch's own

Blank lines and lines starting with ``#`` are skipped.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from agent_fleet.contract import SANDBOXES, PermissionConfig, Spec, check_text
from agent_fleet.errors import UsageError
from agent_fleet.policy import ApprovalPolicy
from agent_fleet.runner.providers import PROVIDER_NAMES
from agent_fleet.runner.review import PRIORITY_NAMES, parse_priority
from agent_fleet.runner.task import ReviewConfig, Task

__all__ = [
    "KEYS",
    "BatchTask",
    "build_task",
    "check_entry_text",
    "check_task_ids",
    "entry_object",
    "idle_timeout_supported",
    "iter_tasks",
    "load_tasks",
    "parse_task",
    "parse_tasks",
    "task_id_problem",
]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KEYS = frozenset(
    {
        "id",
        "prompt",
        "cwd",
        "gate_cmd",
        "gate_timeout",
        "require_commit",
        "model",
        "effort",
        "sandbox",
        "allow",
        "deny",
        "env",
        "provider",
        "review",
        "timeout",
        "idle_timeout",
        "model_timeout",
        "max_followups",
        "answers",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchTask:
    """One line of a tasks file. ``None`` fields fall back to the batch's template task.

    ``review``: ``False`` turns the template's review off for this task; a ``ReviewConfig`` turns it on.
    """

    id: str
    prompt: str
    cwd: Path | None = None
    gate_cmd: str | None = None
    gate_timeout: float | None = None
    require_commit: bool | None = None
    model: str | None = None
    effort: str | None = None
    sandbox: str | None = None
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] | None = None
    env: Mapping[str, str] | None = None
    provider: str | None = None
    review: ReviewConfig | bool | None = None
    timeout: float | None = None
    idle_timeout: float | None = None
    model_timeout: float | None = None
    max_followups: int | None = None
    answers: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    line: int = 0
    #: the entry as written (JSON object), kept in the batch ledger so that a resume reads the same task
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def spec(self, template: Spec, cwd: str) -> Spec:
        """The session's ``Spec``: ``template`` with this task's prompt, directory, model and answers
        (a task's answers win over the template's). ``build_task`` applies the other settings."""
        return replace(
            template,
            prompt=self.prompt,
            cwd=cwd,
            model=self.model or template.model,
            answers={**template.answers, **self.answers},
        )


def task_id_problem(task_id: object) -> str | None:
    """Why ``task_id`` cannot name a transcript file and a branch ``agent-fleet/<id>``, or ``None``.

    Letters, digits, ``.``, ``_`` and ``-`` only, starting with a letter or digit (so no ``/``, no
    control character, no trailing newline: ``fullmatch``, not ``match``), and nothing git refuses in a
    ref name (``..``, a trailing ``.`` or ``.lock``).
    """
    if not isinstance(task_id, str) or not task_id:
        return "must be a non-empty string"
    if not _ID.fullmatch(task_id):
        return "may only use letters, digits, '.', '_' and '-', start with a letter or digit (at most 100)"
    if ".." in task_id or task_id.endswith((".", ".lock")):
        return "is not a valid branch name (no '..', no trailing '.' or '.lock')"
    return None


def check_task_ids(tasks: Iterable[BatchTask]) -> None:
    """``UsageError`` for the first task id that is unsafe or used twice, before anything is touched."""
    seen: set[str] = set()
    for t in tasks:
        problem = task_id_problem(t.id)
        if problem is not None:
            raise UsageError(f"task id {t.id!r} {problem}")
        if t.id in seen:
            raise UsageError(f"task id {t.id!r} is used twice")
        seen.add(t.id)


def check_entry_text(obj: Mapping[str, Any], where: str) -> None:
    """``UsageError`` (starting with ``where``, naming the key) for a string in ``obj`` that cannot be
    sent as UTF-8: JSON can spell a lone surrogate (``"\\udcff"``) that Python decodes, but no provider
    and no ledger can take it, so the task could never run."""
    for key, value in obj.items():
        _check_text(key, key, where)
        _check_text(value, key, where)


def _check_text(value: Any, key: object, where: str) -> None:
    if isinstance(value, str):
        check_text(value, f"{where}: {str(key)!r}" if isinstance(key, str) and key.isidentifier() else where)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _check_text(k, key, where)
            _check_text(v, key, where)
    elif isinstance(value, list | tuple):
        for v in value:
            _check_text(v, key, where)


def _typed(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str, where: str) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) and kind is not bool and bool not in (kind if isinstance(kind, tuple) else ()):
        raise UsageError(f"{where}: {key!r} must be {what}, not a boolean")
    if not isinstance(value, kind):
        raise UsageError(f"{where}: {key!r} must be {what}, not {type(value).__name__} {value!r}")
    return value


def _seconds(obj: Mapping[str, Any], key: str, where: str, *, zero_ok: bool) -> float | None:
    value = _typed(obj, key, (int, float), "a number of seconds", where)
    if value is None:
        return None
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        bound = ">= 0 (0 = off)" if zero_ok else "> 0"
        raise UsageError(f"{where}: {key!r} must be a finite number of seconds {bound}, not {value!r}")
    return float(value)


def _patterns(obj: Mapping[str, Any], key: str, where: str) -> tuple[str, ...] | None:
    value = obj.get(key)
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v for v in items):
        raise UsageError(f"{where}: {key!r} must be a regular expression or a list of them")
    try:
        ApprovalPolicy(PermissionConfig(allow_patterns=tuple(items)))
    except UsageError as exc:
        detail = str(exc).removeprefix("PermissionConfig.allow_patterns: ")
        raise UsageError(f"{where}: {key!r}: {detail}") from exc
    return tuple(items)


def _env(obj: Mapping[str, Any], where: str) -> dict[str, str] | None:
    value = obj.get("env")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UsageError(f"{where}: 'env' must be an object of NAME: value strings")
    for name, val in value.items():
        if not _ENV_NAME.match(name):
            raise UsageError(f"{where}: 'env' name {name!r} is not a valid environment variable name")
        if not isinstance(val, str):
            raise UsageError(f"{where}: 'env' value of {name} must be a string, not {type(val).__name__}")
    return dict(value)


def _review(obj: Mapping[str, Any], where: str) -> ReviewConfig | bool | None:
    value = obj.get("review")
    try:
        match value:
            case None | False:
                return value
            case True:
                return ReviewConfig()
            case str():
                return ReviewConfig(threshold=parse_priority(value))
            case {**config} if set(config) <= {"threshold", "model"}:
                threshold = config.get("threshold", "P1")
                model = config.get("model")
                if not isinstance(threshold, str) or (model is not None and not isinstance(model, str)):
                    raise UsageError("'threshold' and 'model' are strings")
                return ReviewConfig(threshold=parse_priority(threshold), model=model)
    except UsageError as exc:
        raise UsageError(f"{where}: 'review': {exc}") from exc
    raise UsageError(
        f"{where}: 'review' must be true/false, one of {', '.join(PRIORITY_NAMES)}, "
        'or {"threshold": "P1", "model": "..."}'
    )


def _answers(obj: Mapping[str, Any], where: str) -> dict[str, str | list[str]]:
    value = obj.get("answers")
    if value is None:
        return {}
    good = isinstance(value, dict) and all(
        isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
        for v in value.values()
    )
    if not good:
        raise UsageError(f"{where}: 'answers' must map questions to a string or a list of strings")
    return dict(value)


def _choice(obj: Mapping[str, Any], key: str, choices: tuple[str, ...], where: str) -> str | None:
    value: str | None = _typed(obj, key, str, "a string", where)
    if value is not None and value not in choices:
        raise UsageError(f"{where}: {key!r} must be one of {', '.join(choices)}, not {value!r}")
    return value


def _text(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value: str | None = _typed(obj, key, str, "a string", where)
    if value is not None and not value.strip():
        raise UsageError(f"{where}: {key!r} is empty")
    return value


def parse_task(obj: Any, *, line: int, base_dir: Path, where: str) -> BatchTask:
    """One tasks-file entry (a decoded JSON value). Raises ``UsageError`` starting with ``where``."""
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object")
    unknown = sorted(set(obj) - KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(KEYS))}")
    check_entry_text(obj, where)
    task_id = _typed(obj, "id", str, "a string", where)
    prompt = _typed(obj, "prompt", str, "a string", where)
    if not task_id:
        raise UsageError(f"{where}: 'id' is required")
    problem = task_id_problem(task_id)
    if problem is not None:
        raise UsageError(f"{where}: id {task_id!r} {problem}")
    if not prompt or not prompt.strip():
        raise UsageError(f"{where}: 'prompt' is required")
    max_followups = _typed(obj, "max_followups", int, "a whole number", where)
    if max_followups is not None and max_followups < 0:
        raise UsageError(f"{where}: 'max_followups' must be >= 0, not {max_followups}")
    cwd = _typed(obj, "cwd", str, "a string", where)
    return BatchTask(
        id=task_id,
        prompt=prompt,
        cwd=(base_dir / cwd) if cwd else None,
        gate_cmd=_typed(obj, "gate_cmd", str, "a string", where),
        gate_timeout=_seconds(obj, "gate_timeout", where, zero_ok=False),
        require_commit=_typed(obj, "require_commit", bool, "a bool", where),
        model=_text(obj, "model", where),
        effort=_text(obj, "effort", where),
        sandbox=_choice(obj, "sandbox", SANDBOXES, where),
        allow=_patterns(obj, "allow", where),
        deny=_patterns(obj, "deny", where),
        env=_env(obj, where),
        provider=_choice(obj, "provider", PROVIDER_NAMES, where),
        review=_review(obj, where),
        timeout=_seconds(obj, "timeout", where, zero_ok=False),
        idle_timeout=_seconds(obj, "idle_timeout", where, zero_ok=True),
        model_timeout=_seconds(obj, "model_timeout", where, zero_ok=True),
        max_followups=max_followups,
        answers=_answers(obj, where),
        line=line,
        raw=obj,
    )


def _parse_lines(lines: Iterable[str], *, base_dir: Path, source: str) -> Iterator[BatchTask]:
    seen: dict[str, int] = {}
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source} line {number}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{where}: not valid JSON ({exc})") from exc
        task = parse_task(obj, line=number, base_dir=base_dir, where=where)
        if task.id in seen:
            raise UsageError(f"{where}: id {task.id!r} already used on line {seen[task.id]}")
        seen[task.id] = number
        yield task
    if not seen:
        raise UsageError(f"{source}: no tasks")


def parse_tasks(text: str, *, base_dir: Path, source: str = "tasks") -> list[BatchTask]:
    """Parse JSON Lines task entries (see the module docstring). Raises ``UsageError`` with the line."""
    return list(_parse_lines(text.splitlines(), base_dir=base_dir, source=source))


def iter_tasks(path: str | os.PathLike[str]) -> Iterator[BatchTask]:
    """Read a tasks file one line at a time (memory stays flat in its size: only the ids seen are kept,
    to refuse a duplicate). Raises ``UsageError`` (unreadable file, bad line) as it reaches it."""
    p = Path(path)
    try:
        with p.open(encoding="utf-8") as f:
            yield from _parse_lines(f, base_dir=p.resolve().parent, source=p.name)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the tasks file {str(p)!r}: {exc}") from exc


def load_tasks(path: str | os.PathLike[str]) -> list[BatchTask]:
    """Read and parse a tasks file. Raises ``UsageError`` (unreadable file, bad line)."""
    return list(iter_tasks(path))


def entry_object(task: BatchTask) -> dict[str, Any]:
    """The entry the ledger keeps for ``task``: as written, with ``cwd`` made absolute (so a resume reads
    the same task wherever it runs from)."""
    obj: dict[str, Any] = dict(task.raw)
    if not obj:  # built in code, not read from a file
        obj = {"id": task.id, "prompt": task.prompt}
        for name in (
            "gate_cmd", "gate_timeout", "require_commit", "model", "effort", "sandbox", "provider", "timeout",
            "idle_timeout", "model_timeout", "max_followups",
        ):  # fmt: skip
            if (value := getattr(task, name)) is not None:
                obj[name] = value
        for name in ("allow", "deny"):
            if (value := getattr(task, name)) is not None:
                obj[name] = list(value)
        if task.env is not None:
            obj["env"] = dict(task.env)
        if task.answers:
            obj["answers"] = {k: v if isinstance(v, str) else list(v) for k, v in task.answers.items()}
        if isinstance(task.review, ReviewConfig):
            obj["review"] = {"threshold": PRIORITY_NAMES[task.review.threshold], "model": task.review.model}
        elif task.review is not None:
            obj["review"] = task.review
    obj.pop("cwd", None)
    if task.cwd is not None:
        obj["cwd"] = str(task.cwd.expanduser().absolute())
    return obj


def build_task(t: BatchTask, template: Task, cwd: Path) -> Task:
    """The ``Task`` to run for ``t``: the template with every setting the entry gives replaced."""
    base = template.spec
    permission = base.permission
    if t.allow is not None or t.deny is not None:
        # the entry's patterns replace the template's; its other settings (hosts, MCP tools, escalation
        # patterns, profile, rule packs) stay
        permission = replace(
            permission or PermissionConfig(),
            allow_patterns=t.allow
            if t.allow is not None
            else (permission.allow_patterns if permission else ()),
            disallow_patterns=(
                t.deny if t.deny is not None else (permission.disallow_patterns if permission else ())
            ),
        )
    spec = replace(
        t.spec(base, str(cwd)),
        reasoning_effort=t.effort or base.reasoning_effort,
        sandbox=t.sandbox or base.sandbox,  # type: ignore[arg-type]  # checked against SANDBOXES
        permission=permission,
        env={**base.env, **t.env} if t.env else base.env,  # every provider places Spec.env
    )
    gate = template.gate
    if t.gate_cmd is not None or t.require_commit is not None or t.gate_timeout is not None:
        gate = replace(
            gate,
            command=(t.gate_cmd or None) if t.gate_cmd is not None else gate.command,
            require_commit=t.require_commit if t.require_commit is not None else gate.require_commit,
            command_timeout=t.gate_timeout if t.gate_timeout is not None else gate.command_timeout,
        )
    review = template.review
    if t.review is False:
        review = None
    elif isinstance(t.review, ReviewConfig):
        review = t.review
    task = replace(
        template,
        id=t.id,
        spec=spec,
        gate=gate,
        review=review,
        timeout=t.timeout if t.timeout is not None else template.timeout,
        model_timeout=(t.model_timeout or None) if t.model_timeout is not None else template.model_timeout,
        max_followups=t.max_followups if t.max_followups is not None else template.max_followups,
    )
    if t.idle_timeout is not None:
        task = _with_idle_timeout(task, t.idle_timeout)
    return task


def idle_timeout_supported() -> bool:
    """The per-turn idle limit lives on ``Task`` or ``Spec`` once the runner has a watchdog."""
    return "idle_timeout" in {f.name for f in fields(Task)} | {f.name for f in fields(Spec)}


def _with_idle_timeout(task: Task, seconds: float) -> Task:
    setting: dict[str, Any] = {"idle_timeout": seconds}
    if "idle_timeout" in {f.name for f in fields(Task)}:
        return replace(task, **setting)
    if "idle_timeout" in {f.name for f in fields(Spec)}:
        return replace(task, spec=replace(task.spec, **setting))
    raise UsageError("'idle_timeout' needs a runner with an idle watchdog (not in this version)")
