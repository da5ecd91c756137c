"""``--provider codex-exec`` cannot ask for approvals (issue 16): approval flags are a usage error, the
run header says nothing is enforced, and what codex itself refused shows in ``--json`` output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from agent_fleet import PermissionConfig, Spec
from agent_fleet.cli import cli
from agent_fleet.codex.exec import CAPABILITIES
from agent_fleet.errors import UsageError
from agent_fleet.runner import Task, validate_task
from agent_fleet.testing import FunctionCall, Reply, ScriptedModelServer, exec_command


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_capabilities_say_approvals_are_not_enforced() -> None:
    assert CAPABILITIES.enforces_approvals is False


@pytest.mark.parametrize(
    "flags",
    [
        ["--deny", "x"],
        ["--allow", "^ls"],
        ["--default-approval", "deny"],
        ["--deny", "ls", "--default-approval", "deny"],
    ],
)
def test_policy_flags_with_codex_exec_exit_2_naming_who_can(flags: list[str], tmp_path: Path) -> None:
    result = invoke("run", "x", "--cwd", str(tmp_path), "--provider", "codex-exec", *flags)
    assert result.exit_code == 2, result.output
    assert "the codex-exec provider cannot enforce approval rules" in result.stderr
    assert "use a provider that can: codex, claude" in result.stderr
    assert "Traceback" not in result.output


async def test_the_library_refuses_rules_it_cannot_enforce(tmp_path: Path) -> None:
    task = Task(id="t", spec=Spec(prompt="p", cwd=tmp_path, permission=PermissionConfig(default="deny")))
    with pytest.raises(UsageError, match="cannot enforce"):
        await validate_task(task, provider_name="codex-exec")
    assert (await validate_task(task, provider_name="codex")).spec.permission is not None


@pytest.mark.e2e
def test_codex_refusals_appear_in_json_output(
    repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str]
) -> None:
    escalate = {
        "cmd": "touch ../outside.txt",
        "sandbox_permissions": "require_escalated",
        "justification": "x",
    }
    scripted_model.enqueue(
        # Not a bare `touch`: codex exec --json reports no command_execution item for a command that
        # ends within a few milliseconds (docs/codex-protocol-notes.md), so the refusal would have no
        # output to be read from.
        Reply(items=(exec_command("sleep 0.5; touch /etc/agent-fleet-probe"),)),
        Reply(items=(FunctionCall(name="exec_command", arguments=escalate),)),
        Reply.text("done"),
    )
    result = invoke(
        "run", "try", "--cwd", str(repo), "--provider", "codex-exec", "--sandbox", "workspace-write",
        "--json", *cli_env,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    refused = [r for r in records if r["type"] == "System" and r["subtype"] == "codex_refused"]
    assert [r["data"]["kind"] for r in refused] == ["sandbox", "escalation"]
    assert "Read-only file system" in refused[0]["data"]["message"]
    assert "escalated permissions" in refused[1]["data"]["message"]
    verdicts = [r for r in records if r["type"] == "ToolResult" and r.get("synthetic")]
    assert [v["status"] for v in verdicts] == ["decline"]
    started = next(r for r in records if r["type"] == "System" and r["subtype"] == "runner.started")
    assert started["data"]["approvals_enforced"] is False
    assert not (repo.parent / "outside.txt").exists()


@pytest.mark.e2e
def test_the_live_view_says_approvals_are_not_enforced(
    repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str]
) -> None:
    scripted_model.enqueue(Reply.text("done"))
    result = invoke("run", "try", "--cwd", str(repo), "--provider", "codex-exec", *cli_env)
    assert result.exit_code == 0, result.output
    assert "approvals: NOT enforced by the codex-exec provider" in result.output


def test_host_and_mcp_flags_reach_the_permission_config(tmp_path: Path) -> None:
    from agent_fleet.cli._options import pop_common

    args = ["p", "--allow-host", "*.pypi.org", "--allow-mcp", "docs/*"]
    params = cli.commands["run"].make_context("run", args).params
    permission = pop_common(params).template("p", tmp_path, "t").spec.permission
    assert permission is not None
    assert permission.allowed_hosts == ("*.pypi.org",) and permission.mcp_tools == ("docs/*",)
