"""Pure parts of the runner: redaction, review thresholds, tasks files, config overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_fleet.cli import describe, parse_config_overrides
from agent_fleet.contract import Spec
from agent_fleet.errors import UsageError
from agent_fleet.events import System, ToolUse
from agent_fleet.runner import Redactor, TaskEvent, TranscriptWriter, event_record
from agent_fleet.runner.batch import parse_tasks
from agent_fleet.runner.review import parse_priority
from agent_fleet.runner.transcript import REDACTED


@pytest.mark.parametrize(("text", "value"), [("P0", 0), ("p1", 1), ("2", 2), (" P3 ", 3)])
def test_parse_priority(text: str, value: int) -> None:
    assert parse_priority(text) == value


def test_parse_priority_rejects_others() -> None:
    with pytest.raises(UsageError):
        parse_priority("P4")


def test_redactor_env_values_and_patterns() -> None:
    env = {"MY_API_KEY": "abcdef123456", "GH_TOKEN": "ghp_secretvalue", "SHORT_KEY": "1", "PATH": "/usr/bin"}
    r = Redactor(env)
    text = (
        "key abcdef123456 tok ghp_secretvalue sk-proj-ABCDEFGHIJKLMN "
        "Authorization: Basic dXNlcjpwYXNz and Bearer eyJhbGciOi.x.y path /usr/bin n=1"
    )
    out = r.text(text)
    for secret in ("abcdef123456", "ghp_secretvalue", "sk-proj-ABCDEFGHIJKLMN", "dXNlcjpwYXNz", "eyJhbGciOi"):
        assert secret not in out
    assert "/usr/bin" in out and "n=1" in out
    assert r.value({"api_key": "x" * 3, "nested": [{"authorization": "zzz"}], "n": 5}) == {
        "api_key": REDACTED,
        "nested": [{"authorization": REDACTED}],
        "n": 5,
    }


def test_transcript_records_are_redacted(tmp_path: Path) -> None:
    r = Redactor({"SERVICE_SECRET": "hunter2-very-secret"})
    event = ToolUse(id="1", name="shell", input={"command": "curl -H 'Authorization: Bearer abcdefgh' x"})
    with TranscriptWriter(tmp_path / "t.jsonl", redactor=r) as w:
        w.write(TaskEvent(task_id="t1", source="agent", event=event))
        w.write(
            TaskEvent(
                task_id="t1", source="runner", event=System(subtype="x", data={"v": "hunter2-very-secret"})
            )
        )
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert records[0]["type"] == "ToolUse" and records[0]["task_id"] == "t1" and records[0]["ts"]
    assert "abcdefgh" not in lines[0] and "hunter2" not in lines[1]
    assert records[1]["data"]["v"] == REDACTED


def test_event_record_is_asdict_plus_type() -> None:
    record = event_record(TaskEvent(task_id="a", source="review", event=System(subtype="s", data={"k": 1})))
    assert record["type"] == "System" and record["source"] == "review"
    assert record["subtype"] == "s" and record["data"] == {"k": 1}


def test_config_overrides_toml_or_raw() -> None:
    config = parse_config_overrides(
        ['model="gpt-5.5"', "n=3", "flag=true", "plain=hello world", 'tbl={a=1, b="x"}', "x.y.z=[1,2]"]
    )
    assert config == {
        "model": "gpt-5.5",
        "n": 3,
        "flag": True,
        "plain": "hello world",
        "tbl": {"a": 1, "b": "x"},
        "x.y.z": [1, 2],
    }
    with pytest.raises(UsageError):
        parse_config_overrides(["novalue"])


def test_parse_tasks_ok(tmp_path: Path) -> None:
    text = (
        '{"id": "a", "prompt": "p"}\n\n# comment\n'
        '{"id": "b", "prompt": "q", "cwd": "sub", "require_commit": true}\n'
    )
    tasks = parse_tasks(text, base_dir=tmp_path)
    assert [t.id for t in tasks] == ["a", "b"]
    assert tasks[1].cwd == tmp_path / "sub" and tasks[1].require_commit is True and tasks[1].line == 4


def test_a_tasks_answers_reach_its_spec_over_the_templates(tmp_path: Path) -> None:
    text = '{"id": "a", "prompt": "p", "model": "m", "answers": {"Database": "pg", "Ports?": ["80", "443"]}}'
    [task] = parse_tasks(text, base_dir=tmp_path)
    template = Spec(prompt="-", model="default", answers={"Database": "sqlite", "Name": "fleet"})
    spec = task.spec(template, "/work/a")
    assert (spec.prompt, spec.cwd, spec.model) == ("p", "/work/a", "m")
    assert spec.answers == {"Database": "pg", "Name": "fleet", "Ports?": ["80", "443"]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"id": "a", "prompt": "p"}\nnot json', "line 2: not valid JSON"),
        ('{"id": "a"}', "line 1: 'prompt' is required"),
        ('{"id": "a b", "prompt": "p"}', "line 1: id 'a b'"),
        ('{"id": "a", "prompt": "p"}\n{"id": "a", "prompt": "q"}', "line 2: id 'a' already used on line 1"),
        ('{"id": "a", "prompt": "p", "colour": 1}', "line 1: unknown key"),
        ('{"id": "a", "prompt": "p", "require_commit": "yes"}', "line 1: 'require_commit' must be a bool"),
        ('{"id": "a", "prompt": "p", "answers": {"q": 1}}', "line 1: 'answers' must map questions"),
        ('{"id": "a", "prompt": "p", "answers": ["q"]}', "line 1: 'answers' must map questions"),
        ("", "no tasks"),
    ],
)
def test_parse_tasks_errors_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        parse_tasks(text, base_dir=tmp_path, source="tasks.jsonl")


def test_describe_unwraps_shell_commands() -> None:
    event = ToolUse(id="1", name="shell", input={"command": "/bin/bash -lc 'git status'"})
    assert describe(TaskEvent(task_id="t", source="agent", event=event)) == "$ git status"
    denied = System(
        subtype="approval_denied",
        data={"command": "/bin/bash -c 'git reset --hard'", "rule": "r", "reason": "no"},
    )
    assert (
        describe(TaskEvent(task_id="t", source="agent", event=denied)) == "declined: git reset --hard (r: no)"
    )
