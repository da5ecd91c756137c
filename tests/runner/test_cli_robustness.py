"""CLI input that must be refused up front (exit 2, at once) and codex's own startup reasons (exit 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_fleet.cli import cli
from agent_fleet.testing import Reply, ScriptedModelServer


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "bad \udcff prompt"], "the prompt is not valid text"),
        (["run", "x", "--idle-timeout", "nan"], "Invalid value for '--idle-timeout'"),
        (["run", "x", "--idle-timeout", "-1"], "Invalid value for '--idle-timeout'"),
        (["run", "x", "--retries", "-1"], "Invalid value for '--retries'"),
        (["run", "x", "--retry-delay", "inf"], "Invalid value for '--retry-delay'"),
    ],
)
def test_bad_input_exits_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_undecodable_prompt_bytes_exit_2_at_once(tmp_path: Path) -> None:
    # Bytes that are not UTF-8 reach Python as lone surrogates; codex would never answer them.
    script = Path(sys.executable).with_name("agent-fleet")
    env = {**os.environ, "CODEX_HOME": str(tmp_path), "OPENAI_API_KEY": "sk-dummy"}
    started = time.monotonic()
    proc = subprocess.run(
        [os.fsencode(script), b"run", b"fix \xff\xfe this"], capture_output=True, env=env, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert b"not valid text" in proc.stderr
    assert time.monotonic() - started < 10


@pytest.mark.e2e
def test_a_bad_typed_config_value_exits_3_with_codex_reason(tmp_path: Path) -> None:
    env = {**os.environ, "CODEX_HOME": str(tmp_path), "OPENAI_API_KEY": "sk-dummy"}
    script = Path(sys.executable).with_name("agent-fleet")
    proc = subprocess.run(
        [str(script), "run", "hi", "--cwd", str(tmp_path), "-c", "model_reasoning_effort=123"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "invalid type: integer `123`, expected a string" in proc.stdout + proc.stderr
    assert "model_reasoning_effort" in proc.stdout + proc.stderr


@pytest.mark.e2e
def test_run_retries_two_http_500s_and_reports_them(
    repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str]
) -> None:
    for reply in (Reply.http_error(500, "boom"), Reply.http_error(500, "boom"), Reply.text("done")):
        scripted_model.enqueue(reply)
    result = CliRunner().invoke(
        cli,
        ["run", "implement", "--cwd", str(repo), "--retry-delay", "0.01", "--json", *cli_env],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    retries = [r for r in records if r.get("subtype") == "runner.retry"]
    assert [r["data"]["attempt"] for r in retries] == [1, 2]
    assert records[-1]["type"] == "summary" and records[-1]["retries"] == 2


@pytest.mark.e2e
def test_run_does_not_retry_a_400(
    repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str]
) -> None:
    scripted_model.enqueue(Reply.http_error(400, "Invalid value for 'input'."))
    result = CliRunner().invoke(
        cli,
        ["run", "implement", "--cwd", str(repo), "--retry-delay", "0.01", *cli_env],
        catch_exceptions=False,
    )
    assert result.exit_code == 1, result.output
    assert "bad_request" in result.stdout and "runner.retry" not in result.stdout
    assert len(scripted_model.requests) == 1
