"""The ``agent-fleet`` CLI, in process (click's CliRunner) and as the installed console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from agent_fleet.cli import cli
from agent_fleet.testing import Reply, ScriptedModelServer

from .conftest import git
from .scripted import ScriptedAgent, commit, review_json, run, write_file

SECRET = "supersecretvalue123"


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


# -- usage errors: exit 2, no codex started ---------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "x", "--sandbox", "bogus"], "Invalid value for '-s' / '--sandbox'"),
        (["run", "x", "--no-such-flag"], "No such option"),
        (["run", "x", "--max-followups", "-1"], "Invalid value for '--max-followups'"),
        (["run", "x", "--allow", "("], "invalid regular expression '('"),
        (["run", "x", "--deny", "[unclosed"], "invalid regular expression '[unclosed'"),
        (["run", "x", "--allow-escalation", "(x"], "invalid regular expression '(x'"),
        (["run", "x", "--cwd", "/definitely/not/here"], "does not exist"),
        (["run", "x", "-c", "novalue"], "expected key=value"),
        (["run", "x", "--answer", "no-equals-sign"], "expected QUESTION=ANSWER"),
        (["run", "x", "--review-threshold", "P9"], "Invalid value for '--review-threshold'"),
        (["run", " "], "the prompt is empty"),
        (["batch", "/definitely/not/here.jsonl"], "cannot read the tasks file"),
        (["run", "x", "--provider", "claude", "-c", "a=1"], "-c overrides apply to the codex providers only"),
        (["run", "x", "--provider", "claude", "--review"], "--review needs a codex provider"),
        (["models", "--provider", "claude"], "the claude provider cannot list its models"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_allow_escalation_becomes_the_escalation_patterns(tmp_path: Path) -> None:
    from agent_fleet.cli._options import pop_common

    kwargs = {
        "provider": "codex", "model": None, "effort": None, "sandbox": None, "mode": "build", "allow": (),
        "deny": (), "default_approval": "allow", "allow_host": (), "allow_mcp": (),
        "allow_escalation": (r"^\./deploy\.sh$", "^make install$"), "config": (), "gate_cmd": None,
        "require_commit": False, "max_followups": 0, "timeout": None, "retries": 0, "retry_delay": 1.0,
        "idle_timeout": 0.0, "gate_timeout": 600.0, "model_timeout": 180.0, "json_output": False,
        "review": False, "review_threshold": "P1",
    }  # fmt: skip
    task = pop_common(kwargs).template("p", tmp_path, "t")
    assert task.spec.permission is not None
    assert task.spec.permission.escalation_patterns == (r"^\./deploy\.sh$", "^make install$")
    assert task.spec.permission.default == "allow"


@pytest.mark.e2e
def test_doctor_says_the_policy_is_the_only_guard_without_a_sandbox(cli_env: list[str]) -> None:
    result = invoke("doctor", *cli_env, "--sandbox", "danger-full-access")
    assert result.exit_code == 0, result.output
    assert "sandbox: OFF (danger-full-access)" in result.stdout and "the only guard" in result.stdout


def test_answers_become_the_providers_canned_answers() -> None:
    from agent_fleet.cli._options import provider_options

    codex = provider_options("codex", ['model="m"'], ["Database=sqlite", "Which port?=8080=x"])
    assert codex.canned_answers == {"Database": "sqlite", "Which port?": "8080=x"}
    assert codex.config == {"model": "m"}
    assert provider_options("claude", [], ["Name=fleet"]).canned_answers == {"Name": "fleet"}


def test_bad_tasks_file_names_the_line(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "prompt": "p"}\n{"id": "b"}\n')
    result = invoke("batch", str(tasks))
    assert result.exit_code == 2
    assert "tasks.jsonl line 2: 'prompt' is required" in result.stderr


def test_require_commit_outside_git_is_a_usage_error(tmp_path: Path, cli_env: list[str]) -> None:
    result = invoke("run", "x", "--cwd", str(tmp_path), "--require-commit", *cli_env)
    assert result.exit_code == 2
    assert "needs a git repository" in result.stderr


def test_no_credential_and_no_model_provider_exits_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "empty-home"))
    result = invoke("run", "do something", "--cwd", str(tmp_path))
    assert result.exit_code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "no OpenAI credential found" in lines[0] and "codex login" in lines[0]


def test_missing_codex_binary_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_env: list[str]
) -> None:
    monkeypatch.setenv("CODEX_BIN", str(tmp_path / "no-codex"))
    result = invoke("run", "x", "--cwd", str(tmp_path), *cli_env)
    assert result.exit_code == 3
    assert "CODEX_BIN" in result.stderr


def test_unavailable_provider_module_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_env: list[str]
) -> None:
    monkeypatch.setitem(sys.modules, "agent_fleet.claude", None)  # the import fails
    result = invoke("run", "x", "--cwd", str(tmp_path), "--provider", "claude")
    assert result.exit_code == 3
    assert "claude provider is not available" in result.stderr


# -- real codex, scripted model ---------------------------------------------------------------------


@pytest.mark.e2e
def test_run_with_commit_exits_0_and_writes_a_redacted_transcript(
    repo: Path,
    scripted_model: ScriptedModelServer,
    cli_env: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    scripted_model.responder = ScriptedAgent(
        {"c": [[write_file("c.txt", "content"), run(f"echo {SECRET} sk-abcdefghijklmnop"), commit("add c")]]}
    )
    transcript = tmp_path / "run.jsonl"
    result = invoke(
        "run",
        "[task:c] add c.txt and commit",
        "--cwd",
        str(repo),
        "--require-commit",
        "--sandbox",
        "workspace-write",
        "--transcript",
        str(transcript),
        *cli_env,
    )
    assert result.exit_code == 0, result.output
    assert "succeeded" in result.stdout and f"transcript: {transcript}" in result.stdout
    assert "$ git add -A && git commit" in result.stdout
    assert git(repo, "log", "-1", "--format=%s") == "add c"
    text = transcript.read_text()
    assert SECRET not in text and "sk-abcdefghijklmnop" not in text and "[REDACTED]" in text
    records = [json.loads(line) for line in text.splitlines()]
    assert all({"ts", "task_id", "type", "source"} <= set(r) for r in records)
    assert any(r["type"] == "ToolResult" and "[REDACTED]" in r["output"] for r in records)


@pytest.mark.e2e
def test_json_output_parses(repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str]) -> None:
    scripted_model.responder = ScriptedAgent({"j": [[run("git reset --hard")]]})
    result = invoke("run", "-", "--cwd", str(repo), "--json", *cli_env, input="[task:j] try a reset\n")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    summary = lines[-1]
    assert summary["type"] == "summary" and summary["status"] == "succeeded" and summary["declined"] == 1
    types = {r["type"] for r in lines[:-1]}
    assert {"System", "ToolUse", "Result"} <= types
    assert any(r["type"] == "System" and r["subtype"] == "approval_denied" for r in lines)


@pytest.mark.e2e
def test_gate_command_failing_exits_1_with_a_hint(
    repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str]
) -> None:
    scripted_model.responder = ScriptedAgent({"f": []})
    result = invoke(
        "run",
        "[task:f] nothing",
        "--cwd",
        str(repo),
        "--gate-cmd",
        "exit 4",
        "--max-followups",
        "0",
        *cli_env,
    )
    assert result.exit_code == 1, result.output
    assert "the gate never passed" in result.stdout and "--max-followups" in result.stdout


@pytest.mark.e2e
def test_review_p0_then_clean(repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str]) -> None:
    agent = ScriptedAgent(
        {"rv": [[write_file("rv.txt", "v1"), commit("one")], [run("echo fix >> rv.txt"), commit("two")]]},
        reviews=[review_json((0, "Crashes on empty input")), review_json()],
    )
    scripted_model.responder = agent
    result = invoke(
        "run", "[task:rv] implement", "--cwd", str(repo), "--require-commit", "--review", "--json", *cli_env
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    summary = records[-1]
    assert summary["status"] == "succeeded" and summary["followups"] == 1 and summary["reviews"] == 2
    reviews = [r for r in records if r.get("subtype") == "runner.review"]
    assert [len(r["data"]["findings"]) for r in reviews] == [1, 0]
    assert reviews[0]["data"]["findings"][0]["priority"] == 0
    assert any(r["source"] == "review" for r in records)
    assert len(agent.review_requests) == 2


@pytest.mark.e2e
def test_a_refused_credential_exits_3(
    repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str]
) -> None:
    scripted_model.responder = ScriptedAgent({"k": [[Reply.http_error(401, "Incorrect API key provided")]]})
    result = invoke("run", "[task:k] go", "--cwd", str(repo), *cli_env)
    assert result.exit_code == 3, result.output
    assert "authentication failed" in result.stdout and "codex login" in result.stdout


@pytest.mark.e2e
def test_models_lists_the_catalog(cli_env: list[str]) -> None:
    result = invoke("models", *cli_env)
    assert result.exit_code == 0, result.output
    assert "gpt-5.5" in result.stdout


@pytest.mark.e2e
def test_doctor_reports_each_check(cli_env: list[str]) -> None:
    result = invoke("doctor", *cli_env)
    assert result.exit_code == 0, result.output
    for name in ("codex:", "credentials:", "sandbox:", "app-server: handshake in"):
        assert name in result.stdout
    assert "scripted-dummy-key" not in result.output


@pytest.mark.e2e
def test_doctor_without_credentials_fails_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "home").mkdir()
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "home"))
    # A home under the temp dir breaks codex's bubblewrap sandbox (see agent_fleet.testing's env)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    result = invoke("doctor")
    assert result.exit_code == 1
    assert "FAIL  credentials" in result.stdout and "codex login" in result.stdout
    assert "credentials need attention" in result.stderr


@pytest.mark.e2e
def test_demo_console_script(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "agent-fleet"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "CODEX_API_KEY")}
    env["CODEX_HOME"] = str(tmp_path / "not-used")  # the demo must use a home of its own
    proc = subprocess.run(
        [str(script), "demo", "--dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "SCRIPTED DEMO" in out
    assert "$ cat greeting.txt" in out
    assert "declined: git reset --hard" in out
    assert "succeeded" in out
    assert "Add greeting" in out
    transcript = tmp_path / "demo" / "transcript.jsonl"
    assert f"transcript: {transcript}" in out and transcript.exists()
    assert not (tmp_path / "not-used").exists()


@pytest.mark.e2e
def test_doctor_reports_a_missing_codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "missing"))
    result = invoke("doctor")
    assert result.exit_code == 1
    assert "FAIL  codex home" in result.stdout and "mkdir -p" in result.stdout
