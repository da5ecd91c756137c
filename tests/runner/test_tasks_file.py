"""The tasks file: per-task settings, each checked with its line number, and applied over the template."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.contract import PermissionConfig
from agent_fleet.errors import UsageError
from agent_fleet.runner import GateConfig, ReviewConfig, Task
from agent_fleet.runner._tasks_file import (
    BatchTask,
    build_task,
    entry_object,
    idle_timeout_supported,
    iter_tasks,
    parse_task,
    parse_tasks,
)

FULL = {
    "id": "t1",
    "prompt": "do it",
    "cwd": "sub",
    "gate_cmd": "pytest -q",
    "gate_timeout": 90,
    "require_commit": True,
    "model": "gpt-5.5",
    "effort": "high",
    "sandbox": "workspace-write",
    "allow": ["^git ", "^pytest"],
    "deny": "rm -rf",
    "env": {"CI": "1", "LANG": "C"},
    "provider": "codex-exec",
    "review": {"threshold": "P2", "model": "gpt-5.5-mini"},
    "timeout": 600,
    "idle_timeout": 120.5,
    "max_followups": 4,
}


def _template() -> Task:
    spec = Spec(
        prompt="-",
        model="base-model",
        reasoning_effort="low",
        sandbox="read-only",
        permission=PermissionConfig(allow_patterns=("^ls",), disallow_patterns=("^curl",), default="deny"),
        config={"features.x": True},
        env={"BASE": "b", "CI": "0"},
    )
    return Task(
        spec=spec, gate=GateConfig(command="make"), review=ReviewConfig(), max_followups=1, timeout=60
    )


def test_every_setting_parses(tmp_path: Path) -> None:
    (task,) = parse_tasks(json.dumps(FULL), base_dir=tmp_path, source="t.jsonl")
    assert task.cwd == tmp_path / "sub"
    assert (task.model, task.effort, task.sandbox, task.provider) == (
        "gpt-5.5",
        "high",
        "workspace-write",
        "codex-exec",
    )
    assert task.allow == ("^git ", "^pytest") and task.deny == ("rm -rf",)
    assert task.env == {"CI": "1", "LANG": "C"}
    assert task.review == ReviewConfig(threshold=2, model="gpt-5.5-mini")
    assert (task.timeout, task.idle_timeout, task.max_followups) == (600.0, 120.5, 4)


def test_settings_apply_over_the_template(tmp_path: Path) -> None:
    (t,) = parse_tasks(json.dumps({k: v for k, v in FULL.items() if k != "idle_timeout"}), base_dir=tmp_path)
    task = build_task(t, _template(), tmp_path)
    spec = task.spec
    assert (spec.prompt, spec.cwd, spec.model, spec.reasoning_effort, spec.sandbox) == (
        "do it",
        str(tmp_path),
        "gpt-5.5",
        "high",
        "workspace-write",
    )
    assert spec.permission == PermissionConfig(
        allow_patterns=("^git ", "^pytest"), disallow_patterns=("rm -rf",), default="deny"
    )
    assert spec.config == {"features.x": True}  # env is provider-neutral: Spec.env, not codex's config
    assert spec.env == {"BASE": "b", "CI": "1", "LANG": "C"}
    assert (task.gate.command, task.gate.require_commit, task.gate.command_timeout) == ("pytest -q", True, 90)
    assert task.review == ReviewConfig(threshold=2, model="gpt-5.5-mini")
    assert (task.timeout, task.max_followups, task.id) == (600.0, 4, "t1")


def test_a_bare_line_keeps_the_template_and_review_false_turns_it_off(tmp_path: Path) -> None:
    bare, off = parse_tasks(
        '{"id": "a", "prompt": "p"}\n{"id": "b", "prompt": "p", "review": false, "gate_cmd": ""}',
        base_dir=tmp_path,
    )
    template = _template()
    task = build_task(bare, template, tmp_path)
    assert task.spec.model == "base-model" and task.spec.permission == template.spec.permission
    assert task.review == template.review and task.gate == template.gate and task.timeout == 60
    other = build_task(off, template, tmp_path)
    assert other.review is None and other.gate.command is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"timeout": 0}, "'timeout' must be a finite number of seconds > 0, not 0"),
        ({"gate_timeout": 0}, "'gate_timeout' must be a finite number of seconds > 0, not 0"),
        ({"timeout": -3}, "'timeout' must be a finite number of seconds > 0"),
        ({"timeout": "NaN"}, "'timeout' must be a number of seconds, not str"),
        ({"timeout": True}, "'timeout' must be a number of seconds, not a boolean"),
        ({"idle_timeout": -1}, "'idle_timeout' must be a finite number of seconds >= 0 (0 = off)"),
        ({"max_followups": -1}, "'max_followups' must be >= 0"),
        ({"max_followups": 1.5}, "'max_followups' must be a whole number"),
        ({"model": ""}, "'model' is empty"),
        ({"effort": 3}, "'effort' must be a string"),
        ({"sandbox": "yolo"}, "'sandbox' must be one of read-only, workspace-write, danger-full-access"),
        ({"allow": ["("]}, "'allow': invalid regular expression '('"),
        ({"deny": [1]}, "'deny' must be a regular expression or a list of them"),
        ({"env": ["CI=1"]}, "'env' must be an object"),
        ({"env": {"1BAD": "x"}}, "'env' name '1BAD' is not a valid environment variable name"),
        ({"env": {"CI": 1}}, "'env' value of CI must be a string"),
        ({"provider": "gpt"}, "'provider' must be one of codex, codex-exec, claude"),
        ({"review": "P7"}, "'review': review threshold must be one of P0, P1, P2, P3"),
        ({"review": {"level": 1}}, "'review' must be true/false"),
        ({"review": 2}, "'review' must be true/false"),
        ({"colour": "red"}, "unknown key(s) colour"),
    ],
)
def test_each_bad_setting_names_its_line(tmp_path: Path, change: dict[str, object], message: str) -> None:
    lines = [json.dumps({"id": "ok", "prompt": "p"}), "", json.dumps({"id": "bad", "prompt": "p", **change})]
    with pytest.raises(UsageError) as info:
        parse_tasks("\n".join(lines), base_dir=tmp_path, source="tasks.jsonl")
    assert str(info.value).startswith("tasks.jsonl line 3: ")
    assert message in str(info.value)


def test_nan_and_infinity_literals_are_refused(tmp_path: Path) -> None:
    for literal in ("NaN", "Infinity", "-Infinity"):
        with pytest.raises(UsageError, match="finite number of seconds"):
            parse_tasks(f'{{"id": "a", "prompt": "p", "timeout": {literal}}}', base_dir=tmp_path)


def test_iter_tasks_reads_line_by_line_and_reports_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"t{n}", "prompt": "p"}) + "\n" for n in range(3)) + '{"id": "t0"}\n'
    )
    reader = iter_tasks(path)
    assert [next(reader).id for _ in range(3)] == ["t0", "t1", "t2"]  # given before the bad line is read
    with pytest.raises(UsageError, match=r"tasks\.jsonl line 4: 'prompt' is required"):
        next(reader)
    path.write_text('{"id": "a", "prompt": "p"}\n{"id": "a", "prompt": "q"}\n')
    with pytest.raises(UsageError, match="line 2: id 'a' already used on line 1"):
        list(iter_tasks(path))


def test_the_ledger_entry_reads_back_as_the_same_task(tmp_path: Path) -> None:
    (from_file,) = parse_tasks(json.dumps(FULL), base_dir=tmp_path)
    built = BatchTask(
        id="b", prompt="p", cwd=Path("rel"), review=ReviewConfig(threshold=0), allow=("^x",), env={"A": "b"}
    )
    for task in (from_file, built):
        again = parse_task(entry_object(task), line=task.line, base_dir=Path("/elsewhere"), where="ledger")
        assert again.cwd is not None and again.cwd.is_absolute()
        if task is from_file:
            assert again == task
        else:
            assert again.cwd == Path("rel").absolute()
        assert (again.review, again.allow, again.env) == (task.review, task.allow, task.env)


def test_idle_timeout_is_refused_until_the_runner_has_a_watchdog(tmp_path: Path) -> None:
    (t,) = parse_tasks('{"id": "a", "prompt": "p", "idle_timeout": 30}', base_dir=tmp_path)
    if idle_timeout_supported():
        task = build_task(t, _template(), tmp_path)
        assert 30.0 in (getattr(task, "idle_timeout", None), getattr(task.spec, "idle_timeout", None))
    else:
        with pytest.raises(UsageError, match="idle watchdog"):
            build_task(t, _template(), tmp_path)


@pytest.mark.parametrize(
    ("entry", "what"),
    [
        ('{"id": "bad", "prompt": "fix \\udcff it"}', "'prompt'"),
        ('{"id": "bad", "prompt": "p", "gate_cmd": "make \\ud800"}', "'gate_cmd'"),
        ('{"id": "bad", "prompt": "p", "env": {"CI": "\\udfff"}}', "'env'"),
        ('{"id": "bad", "prompt": "p", "answers": {"Which \\udcff?": "x"}}', "'answers'"),
    ],
)
def test_text_that_is_not_utf8_is_refused_with_its_line(tmp_path: Path, entry: str, what: str) -> None:
    # JSON may spell a lone surrogate ("\udcff"): Python decodes it, but it cannot be sent as UTF-8, so
    # the task could never run (and could not even be written to the ledger).
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "ok", "prompt": "p"}\n' + entry + "\n")
    with pytest.raises(UsageError) as info:
        list(iter_tasks(path))
    message = str(info.value)
    assert message.startswith("tasks.jsonl line 2: ") and what in message and "not valid text" in message


def test_an_entrys_patterns_keep_the_templates_other_permission_settings(tmp_path: Path) -> None:
    (t,) = parse_tasks(json.dumps({"id": "a", "prompt": "p", "allow": ["^git "]}), base_dir=tmp_path)
    template = _template()
    base = PermissionConfig(
        disallow_patterns=("rm",), allowed_hosts=("pypi.org",), escalation_patterns=(r"^\./deploy\.sh$",)
    )
    template = dataclasses.replace(template, spec=dataclasses.replace(template.spec, permission=base))
    permission = build_task(t, template, tmp_path).spec.permission
    assert permission == dataclasses.replace(base, allow_patterns=("^git ",))
