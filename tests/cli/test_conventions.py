"""The flags a codex user's fingers know (issue 33): ``-m``, ``-s``, ``-C``/``--cd``, ``-V``, ``-q``/``-v``,
``doctor --json``, and shell completion (documented in ``agent_fleet.cli``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_fleet.cli import cli
from agent_fleet.cli._options import Common, pop_common
from agent_fleet.testing import CodexTestEnv

SCRIPT = Path(sys.executable).parent / "agent-fleet"


def _common(command: str, *args: str) -> Common:
    """The ``Common`` flags ``command`` parses from ``args`` (nothing runs)."""
    seen: dict[str, Any] = {}
    ctx = cli.commands[command].make_context(command, list(args))
    seen.update(ctx.params)
    return pop_common(seen)


def test_short_flags_mean_what_codex_means() -> None:
    common = _common("run", "x", "-m", "gpt-5.5", "-s", "read-only")
    assert (common.model, common.sandbox) == ("gpt-5.5", "read-only")
    for flag in ("-C", "--cd", "--cwd"):
        ctx = cli.commands["run"].make_context("run", ["x", flag, "/somewhere"])
        assert ctx.params["cwd"] == Path("/somewhere"), flag
        ctx = cli.commands["batch"].make_context("batch", ["t.jsonl", flag, "/somewhere"])
        assert ctx.params["cwd"] == Path("/somewhere"), flag
    assert _common("batch", "t.jsonl", "-q").verbosity == -1
    assert _common("run", "x", "-v").verbosity == 1
    assert _common("run", "x").verbosity == 0


def test_bad_values_of_the_short_flags_are_usage_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["run", "x", "-s", "bogus"])
    assert result.exit_code == 2 and "Invalid value for '-s' / '--sandbox'" in result.stderr
    result = runner.invoke(cli, ["run", "x", "-C", str(tmp_path / "absent")])
    assert result.exit_code == 2 and "does not exist" in result.stderr
    result = runner.invoke(cli, ["run", "x", "-q", "-v"])
    assert result.exit_code == 2 and "-q (quiet) and -v (verbose) contradict each other" in result.stderr


@pytest.mark.e2e  # it asks the codex binary its version
def test_dash_v_upper_is_the_version_with_codex_s() -> None:
    short = CliRunner().invoke(cli, ["-V"])
    long = CliRunner().invoke(cli, ["--version"])
    assert short.exit_code == 0 and short.output == long.output
    assert short.output.startswith("agent-fleet ") and "\ncodex " in short.output


def _complete(words: str, cword: int, shell: str = "bash") -> str:
    env = {
        **os.environ,
        "_AGENT_FLEET_COMPLETE": f"{shell}_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(cword),
    }
    return subprocess.run(
        [str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout


@pytest.mark.e2e  # the agent-fleet CLI completes in a process of its own
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_completion_as_documented(shell: str) -> None:
    env = {**os.environ, "_AGENT_FLEET_COMPLETE": f"{shell}_source"}
    script = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert "_AGENT_FLEET_COMPLETE" in script.stdout
    import agent_fleet.cli

    assert f"_AGENT_FLEET_COMPLETE={shell}_source agent-fleet" in str(agent_fleet.cli.__doc__)


@pytest.mark.e2e  # the agent-fleet CLI completes in a process of its own
def test_completion_completes_commands_and_choices() -> None:
    assert "plain,batch" in _complete("agent-fleet ba", 1).splitlines()
    sandboxes = _complete("agent-fleet run x -s ", 4).splitlines()
    assert sandboxes == ["plain,read-only", "plain,workspace-write", "plain,danger-full-access"]


@pytest.mark.e2e
def test_doctor_json_is_the_checks_as_data(codex_env: CodexTestEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in codex_env.env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli, ["doctor", "--json", *codex_env.codex_args()])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True
    names = [c["name"] for c in report["checks"]]
    assert names[:2] == ["codex", "credentials"] and "app-server" in names
    assert all(set(c) == {"name", "ok", "detail", "hint"} for c in report["checks"])
    assert "scripted-dummy-key" not in result.output
