"""Pure argv building for ``codex exec``: every Spec field lands in the command or is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet.codex._exec_argv import Untranslated, build_command
from agent_fleet.codex.options import CodexOptions
from agent_fleet.contract import PermissionConfig, Spec
from agent_fleet.errors import UsageError


def test_first_turn_argv(tmp_path: Path) -> None:
    spec = Spec(
        prompt="fix the bug",
        cwd=tmp_path,
        model="gpt-5.5",
        reasoning_effort="high",
        developer_instructions="be brief",
        base_instructions="you are a linter",
        sandbox="workspace-write",
        output_schema={"type": "object"},
        images=[tmp_path / "a.png"],
        config={"model_verbosity": "low"},
    )
    options = CodexOptions(
        config={"model_verbosity": "high", "model_provider": "x"},
        skip_git_repo_check=True,
        dangerously_bypass_approvals_and_sandbox=True,
    )
    cmd = build_command(
        "/bin/codex", spec, options, schema_file="/t/schema.json", instructions_file="/t/base.md"
    )
    assert cmd.argv == [
        "/bin/codex",
        "exec",
        "--json",
        "-c",
        'model_verbosity="low"',  # spec.config wins over options.config
        "-c",
        'model_provider="x"',
        "-c",
        'developer_instructions="be brief"',
        "-c",
        'model_reasoning_effort="high"',
        "-c",
        'model_instructions_file="/t/base.md"',
        "-C",
        str(tmp_path),
        "-m",
        "gpt-5.5",
        "--sandbox",
        "workspace-write",
        f"--image={tmp_path / 'a.png'}",
        "--dangerously-bypass-approvals-and-sandbox",
        "--skip-git-repo-check",
        "--output-schema",
        "/t/schema.json",
        "-",
    ]
    assert cmd.cwd == str(tmp_path)
    assert cmd.stdin == b"fix the bug"
    assert cmd.untranslated == ()


def test_resume_argv_has_no_cd_or_sandbox_flag(tmp_path: Path) -> None:
    spec = Spec(prompt="first", cwd=tmp_path, sandbox="read-only", mode="plan", images=[tmp_path / "a.png"])
    cmd = build_command("codex", spec, CodexOptions(), prompt="again", session_id="0199-abc", images=False)
    assert cmd.argv == [
        "codex",
        "exec",
        "resume",
        "--json",
        "-c",
        'sandbox_mode="read-only"',
        "0199-abc",
        "-",
    ]
    assert cmd.cwd == str(tmp_path)  # the child's cwd carries the working directory
    assert cmd.stdin.decode().startswith("[mode: plan]") and cmd.stdin.decode().endswith("again")


def test_prompt_never_on_the_command_line() -> None:
    cmd = build_command("codex", Spec(prompt="SECRET-PROMPT --sandbox danger-full-access"), CodexOptions())
    assert not any("SECRET-PROMPT" in arg for arg in cmd.argv)
    assert cmd.argv[-1] == "-"


def test_mcp_servers_and_untranslated_fields() -> None:
    spec = Spec(
        prompt="p",
        mcp_servers={"docs": {"command": "docs-mcp", "args": ["--stdio"]}},
        permission=PermissionConfig(default="deny"),
        images=["https://example.com/a.png"],
    )
    cmd = build_command("codex", spec, CodexOptions())
    assert 'mcp_servers.docs={command = "docs-mcp", args = ["--stdio"]}' in cmd.argv
    assert [u.field for u in cmd.untranslated] == ["permission", "images"]
    assert all(isinstance(u, Untranslated) and u.reason for u in cmd.untranslated)


def test_options_cwd_is_the_fallback(tmp_path: Path) -> None:
    cmd = build_command("codex", Spec(prompt="p"), CodexOptions(cwd=tmp_path))
    assert cmd.argv[-5:] == ["-C", str(tmp_path), "--sandbox", "workspace-write", "-"]
    assert build_command("codex", Spec(prompt="p"), CodexOptions()).cwd is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"session_id": "--last"},
        {"session_id": ""},
    ],
)
def test_bad_session_ids(kwargs: dict[str, str]) -> None:
    with pytest.raises(UsageError):
        build_command("codex", Spec(prompt="p"), CodexOptions(), **kwargs)


def test_bad_values_are_usage_errors() -> None:
    with pytest.raises(UsageError):
        build_command("codex", Spec(prompt="p", mcp_servers={"a.b": {}}), CodexOptions())
    with pytest.raises(UsageError):
        build_command("codex", Spec(prompt="p", config={"x": None}), CodexOptions())
    with pytest.raises(UsageError):  # the caller must write the schema file first
        build_command("codex", Spec(prompt="p", output_schema={"type": "object"}), CodexOptions())


def test_env_is_set_for_the_commands_over_the_configs_own_variables() -> None:
    spec = Spec(
        prompt="p", env={"CI": "1", "LANG": "C"}, config={"shell_environment_policy.set": {"A": "spec"}}
    )
    options = CodexOptions(
        config={"shell_environment_policy": {"inherit": "core", "set": {"B": "opt", "CI": "0"}}}
    )
    cmd = build_command("codex", spec, options)
    # the whole table is passed (a key path replaces it), Spec.env winning on equal names
    assert 'shell_environment_policy.set={B = "opt", CI = "1", A = "spec", LANG = "C"}' in cmd.argv
    assert cmd.untranslated == ()
    assert not any(
        "shell_environment_policy.set" in a for a in build_command("codex", Spec(prompt="p"), options).argv
    )


def test_the_box_goes_into_the_sandbox_settings(tmp_path: Path) -> None:
    from agent_fleet._codex_toml import config_args
    from agent_fleet.codex._box import make_box

    box = make_box(str(tmp_path), None, tmp_path / "t", (), tripwire=False)
    try:
        assert box.control is None  # codex exec never runs anything unsandboxed: no tripwire
        cmd = build_command("codex", Spec(prompt="p", cwd=tmp_path, env={"CI": "1"}), CodexOptions(), box=box)
        table = (
            '{writable_roots = ["'
            + str(tmp_path / "t")
            + '"], exclude_slash_tmp = true, exclude_tmpdir_env_var = true}'
        )
        assert f"sandbox_workspace_write={table}" in cmd.argv
        assert (
            config_args({"shell_environment_policy.set": {"CI": "1", "TMPDIR": str(tmp_path / "t")}})[1]
            in cmd.argv
        )
        assert cmd.argv[cmd.argv.index("--sandbox") + 1] == "workspace-write"
        resumed = build_command("codex", Spec(prompt="p"), CodexOptions(), session_id="t-1", box=box)
        assert 'sandbox_mode="workspace-write"' in resumed.argv
        assert "temp_dir" not in [u.field for u in cmd.untranslated]
        bypass = CodexOptions(dangerously_bypass_approvals_and_sandbox=True)
        assert not any(
            "sandbox_workspace_write" in a
            for a in build_command("codex", Spec(prompt="p"), bypass, box=box).argv
        )
    finally:
        box.close()
