"""``agent-fleet batch`` flags that are refused before any work: exit 2 with one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from agent_fleet.cli import cli
from agent_fleet.testing import CodexTestEnv


@pytest.fixture
def cli_env(codex_env: CodexTestEnv, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    for name, value in codex_env.env.items():
        monkeypatch.setenv(name, value)
    return codex_env.codex_args()


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"id": "a", "prompt": "p"}) + "\n")
    return path


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0"])
def test_a_timeout_that_is_not_a_finite_positive_number_is_refused(value: str, tasks: Path) -> None:
    for args in (["run", "x"], ["batch", str(tasks)]):
        result = invoke(*args, "--timeout", value)
        assert result.exit_code == 2, result.output
        assert "Invalid value for '--timeout'" in result.stderr


def test_an_out_that_cannot_be_created_is_a_usage_error(
    tasks: Path, tmp_path: Path, cli_env: list[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = invoke("batch", str(tasks), "--out", str(blocker / "out"), "--cwd", str(tmp_path), *cli_env)
    assert result.exit_code == 2, result.output
    assert "cannot create the output directory" in result.stderr and "Traceback" not in result.output


def test_a_transcript_that_cannot_be_created_is_a_usage_error(tmp_path: Path, cli_env: list[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = invoke("run", "x", "--cwd", str(tmp_path), "--transcript", str(blocker / "t.jsonl"), *cli_env)
    assert result.exit_code == 2, result.output
    assert f"cannot create {str(blocker / 't.jsonl')!r}" in result.stderr
    assert f"{str(blocker)!r} is a file, not a directory" in result.stderr  # which part is in the way


def test_an_out_holding_an_older_batch_is_refused(tasks: Path, tmp_path: Path, cli_env: list[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text('{"tasks": []}')
    result = invoke("batch", str(tasks), "--out", str(out), "--cwd", str(tmp_path), *cli_env)
    assert result.exit_code == 2
    assert "already holds a batch" in result.stderr
    assert (out / "summary.json").read_text() == '{"tasks": []}'
    assert not (out / "batch.db").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "missing TASKS.jsonl (or --resume OUT"),
        (["{tasks}", "--resume", "{out}"], "not both"),
        (["--resume", "{out}", "--out", "{other}"], "leave out --out"),
        (["--resume", "{out}"], "holds no batch to resume"),
        (["{tasks}", "--rerun", "failed"], "--rerun goes with --resume"),
    ],
)
def test_resume_flags_are_checked(args: list[str], message: str, tasks: Path, tmp_path: Path) -> None:
    filled = [a.format(tasks=tasks, out=tmp_path / "out", other=tmp_path / "other") for a in args]
    result = invoke("batch", *filled)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_a_bad_line_stops_the_batch_before_anything_is_written(tmp_path: Path, cli_env: list[str]) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps({"id": f"t{n}", "prompt": "p"}) + "\n" for n in range(5000)) + "{}\n")
    out = tmp_path / "out"
    result = invoke("batch", str(path), "--out", str(out), "--cwd", str(tmp_path), *cli_env)
    assert result.exit_code == 2
    assert "tasks.jsonl line 5001: 'id' is required" in result.stderr
    assert not out.exists()


def test_a_prompt_that_is_not_text_is_refused_with_its_line(tmp_path: Path, cli_env: list[str]) -> None:
    # The reported case: a lone surrogate spelled in the JSON used to pass every check, then stop every
    # worker once the task started (and again on each --resume).
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "ok", "prompt": "p"}\n{"id": "bad", "prompt": "fix \\udcff"}\n')
    out = tmp_path / "out"
    result = invoke("batch", str(path), "--out", str(out), "--cwd", str(tmp_path), *cli_env)
    assert result.exit_code == 2, result.output
    assert "tasks.jsonl line 2: 'prompt' is not valid text" in result.stderr
    assert not out.exists()
