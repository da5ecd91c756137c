"""A task's ``env`` reaches the commands its agent runs, on every codex provider (issue 18: per-task
settings). ``env`` is ``Spec.env``, placed by each provider; it used to be codex's own config key, which
the Claude provider passed on as Claude Code settings, where it meant nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_fleet.cli import cli
from agent_fleet.testing import ScriptedModelServer

from .scripted import ScriptedAgent, run

pytestmark = pytest.mark.e2e


def _outputs(server: ScriptedModelServer, tag: str) -> list[str]:
    """The command outputs codex sent back to the model in the task's requests."""
    return [
        str(item.get("output"))
        for request in server.requests
        if tag in json.dumps(request.body)
        for item in request.input
        if item.get("type") == "function_call_output"
    ]


@pytest.mark.parametrize("provider", ["codex", "codex-exec"])
def test_a_tasks_env_is_in_the_environment_of_its_commands(
    provider: str, repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str], tmp_path: Path
) -> None:
    command = 'echo "seen=$AF_TASK_VAR."'
    scripted_model.responder = ScriptedAgent({"with": [[run(command)]], "without": [[run(command)]]})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        json.dumps(
            {"id": "with", "prompt": "[task:with] go", "provider": provider, "env": {"AF_TASK_VAR": "1 2"}}
        )
        + "\n"
        + json.dumps({"id": "without", "prompt": "[task:without] go", "provider": provider})
        + "\n"
    )
    result = CliRunner().invoke(
        cli, ["batch", str(tasks), "--out", str(tmp_path / "out"), "--cwd", str(repo), *cli_env]
    )
    assert result.exit_code == 0, result.output
    assert any("seen=1 2." in out for out in _outputs(scripted_model, "[task:with]")), _outputs(
        scripted_model, "[task:with]"
    )
    # another task of the same batch (the same app-server) does not see it
    assert any("seen=." in out for out in _outputs(scripted_model, "[task:without]"))
