"""Where every Spec field goes for the Claude provider (pure, no CLI)."""

from __future__ import annotations

import base64
import json
from dataclasses import fields
from pathlib import Path

import pytest

from agent_fleet import PermissionConfig, Spec
from agent_fleet.claude import ClaudeOptions, plan_session
from agent_fleet.claude._approvals import describe, to_request, tool_input, tool_name
from agent_fleet.claude._sandbox import SessionTemp, allowed_domains
from agent_fleet.errors import UsageError

SID = "11111111-2222-4333-8444-555555555555"


WALL = {
    "enabled": True,
    "failIfUnavailable": True,  # the CLI refuses to start rather than run commands unsandboxed
    "autoAllowBashIfSandboxed": False,  # every command still goes through the approval policy
    "allowUnsandboxedCommands": True,  # a request to leave the sandbox is judged as an escalation
    "network": {"allowedDomains": [], "strictAllowlist": True},  # no network without allowed_hosts
}


def test_minimal_spec(tmp_path: Path) -> None:
    plan = plan_session(Spec(prompt="hi", cwd=tmp_path), ClaudeOptions(), session_id=SID, resume=False)
    assert plan.content == "hi"
    assert plan.cwd == str(tmp_path.resolve())
    assert plan.options == {
        "cwd": str(tmp_path.resolve()),
        "permission_mode": "default",
        "include_partial_messages": True,
        "setting_sources": [],  # no settings file unless the caller names its source
        "session_id": SID,
        "system_prompt": {"type": "preset", "preset": "claude_code"},
        "settings": json.dumps({"sandbox": WALL}),  # the OS sandbox is on when Spec.sandbox is unset
    }
    assert plan.untranslated == ()
    assert plan.sandbox == "workspace-write" and plan.no_os_sandbox is None


def test_the_box_is_the_sandbox_s_writable_world_and_the_cli_s_temp_dir(tmp_path: Path) -> None:
    box = tmp_path / "box"
    temp = SessionTemp(box=str(box), cli=str(box))
    spec = Spec(prompt="hi", cwd=tmp_path / "ws", env={"TMPDIR": "/tmp", "X": "1"})
    plan = plan_session(spec, ClaudeOptions(), session_id=SID, resume=False, temp=temp)
    sandbox = json.loads(plan.options["settings"])["sandbox"]
    assert sandbox == {**WALL, "filesystem": {"allowWrite": [str(box)]}}
    # the CLI's temporary directory (its commands get a directory inside it as TMPDIR), over Spec.env
    assert plan.options["env"] == {"X": "1", "TMPDIR": str(box), "CLAUDE_CODE_TMPDIR": str(box)}
    # a long Spec.temp_dir: the CLI gets a short one of its own, both are writable roots
    temp = SessionTemp(box=str(box), cli="/tmp/afc-short")
    plan = plan_session(spec, ClaudeOptions(), session_id=SID, resume=False, temp=temp)
    sandbox = json.loads(plan.options["settings"])["sandbox"]
    assert sandbox["filesystem"] == {"allowWrite": [str(box), "/tmp/afc-short"]}
    assert plan.options["env"]["CLAUDE_CODE_TMPDIR"] == plan.options["env"]["TMPDIR"] == "/tmp/afc-short"


def test_read_only_keeps_the_workspace_read_only_for_commands(tmp_path: Path) -> None:
    temp = SessionTemp(box="/tmp/afc-box", cli="/tmp/afc-box")
    spec = Spec(prompt="hi", cwd=tmp_path, sandbox="read-only")
    plan = plan_session(spec, ClaudeOptions(), session_id=SID, resume=False, temp=temp)
    sandbox = json.loads(plan.options["settings"])["sandbox"]
    assert sandbox["enabled"] is True
    assert sandbox["filesystem"] == {"allowWrite": ["/tmp/afc-box"], "denyWrite": [str(tmp_path.resolve())]}
    assert plan.sandbox == "read-only" and plan.no_os_sandbox is None


def test_danger_full_access_and_an_unavailable_sandbox_run_without_it_and_say_so(tmp_path: Path) -> None:
    spec = Spec(prompt="hi", cwd=tmp_path, sandbox="danger-full-access")
    plan = plan_session(spec, ClaudeOptions(), session_id=SID, resume=False)
    assert json.loads(plan.options["settings"]) == {"sandbox": {"enabled": False}}
    assert plan.no_os_sandbox == "Spec.sandbox is danger-full-access"
    plan = plan_session(
        Spec(prompt="hi", cwd=tmp_path),
        ClaudeOptions(sandbox_optional=True),
        session_id=SID,
        resume=False,
        sandbox_unavailable="no bwrap",
    )
    assert json.loads(plan.options["settings"]) == {"sandbox": {"enabled": False}}
    assert plan.sandbox == "workspace-write" and plan.no_os_sandbox == "no bwrap"


def test_allowed_hosts_become_the_sandbox_s_network(tmp_path: Path) -> None:
    hosts = (
        "pypi.org",  # the web: ports 80 and 443
        "https://files.pythonhosted.org",
        "http://mirror.example:8080",
        "*.corp.example:443",
        "socks5tcp://proxy.example",  # the proxy cannot tell protocols: any port
        "[::1]:9000",
        "api-?.example.com",  # a pattern the sandbox cannot express: left out, reported
    )
    spec = Spec(prompt="hi", cwd=tmp_path, permission=PermissionConfig(allowed_hosts=hosts))
    plan = plan_session(spec, ClaudeOptions(), session_id=SID, resume=False)
    network = json.loads(plan.options["settings"])["sandbox"]["network"]
    assert network == {
        "allowedDomains": [
            "pypi.org:80",
            "pypi.org:443",
            "files.pythonhosted.org:443",
            "mirror.example:8080",
            "*.corp.example:443",
            "proxy.example",
            "[::1]:9000",
        ],
        "strictAllowlist": True,
    }
    assert [(u.field, "api-?.example.com" in u.reason) for u in plan.untranslated] == [
        ("permission.allowed_hosts", True)
    ]
    assert allowed_domains(["*://*"]) == (["*"], [])
    assert allowed_domains(["*"]) == (["*:80", "*:443"], [])
    assert allowed_domains(["host:http"]) == ([], ["host:http"])


def test_a_sandbox_key_in_config_is_a_usage_error(tmp_path: Path) -> None:
    spec = Spec(prompt="hi", cwd=tmp_path, config={"sandbox": {"enabled": False}})
    with pytest.raises(UsageError, match=r"Spec\.sandbox"):
        plan_session(spec, ClaudeOptions(), session_id=SID, resume=False)


def test_setting_sources_are_opt_in_and_validated(tmp_path: Path) -> None:
    options = ClaudeOptions(setting_sources=("project",))
    plan = plan_session(Spec(prompt="hi", cwd=tmp_path), options, session_id=SID, resume=False)
    assert plan.options["setting_sources"] == ["project"]
    with pytest.raises(UsageError, match="everything"):
        ClaudeOptions(setting_sources=("everything",))


def _shout(text: str) -> str:
    """Upper-case ``text``."""
    return text.upper()


def test_every_field_lands_somewhere(tmp_path: Path) -> None:
    image = tmp_path / "pic.png"
    image.write_bytes(b"\x89PNG fake")
    spec = Spec(
        prompt="do it",
        cwd=tmp_path,
        model="claude-test",
        base_instructions="BASE",
        developer_instructions="DEV",
        reasoning_effort="minimal",
        sandbox="read-only",
        permission=PermissionConfig(default="deny"),
        mcp_servers={"docs": {"type": "stdio", "command": "docs-mcp", "args": ["--x"]}},
        output_schema={"type": "object"},
        mode="plan",
        images=[image, "https://example.test/a.png"],
        config={"includeCoAuthoredBy": False},
        timeout=5.0,
        tools=[_shout],
        answers={"Database": "sqlite"},
        env={"CI": "1", "A": "spec"},
        max_turns=7,
        max_cost_usd=0.5,
        temp_dir=tmp_path / "tmp",
    )
    options = ClaudeOptions(
        cli_path="/opt/claude", env={"A": "1", "B": "2"}, model="fallback", extra_args={"x": None}
    )
    plan = plan_session(spec, options, session_id=SID, resume=True)
    opts = plan.options
    assert opts["resume"] == SID and "session_id" not in opts
    assert opts["model"] == "claude-test"
    assert opts["system_prompt"] == "BASE\n\nDEV"
    assert opts["effort"] == "low"
    assert opts["mcp_servers"] == {"docs": {"type": "stdio", "command": "docs-mcp", "args": ["--x"]}}
    assert opts["output_format"] == {"type": "json_schema", "schema": {"type": "object"}}
    settings = json.loads(opts["settings"])
    assert settings["includeCoAuthoredBy"] is False and settings["sandbox"]["enabled"] is True
    assert opts["max_turns"] == 7 and opts["max_budget_usd"] == 0.5
    assert opts["cli_path"] == "/opt/claude" and opts["extra_args"] == {"x": None}
    # Spec.env: the CLI process's environment (its Bash tool inherits it), over the provider's; never the
    # Claude Code settings, where codex's shell_environment_policy would mean nothing
    assert opts["env"] == {"A": "spec", "B": "2", "CI": "1"}
    assert "shell_environment_policy" not in opts["settings"]
    # tools: an in-process MCP server; answers: the handle answers AskUserQuestion with them
    assert set(plan.local) == {"permission", "timeout", "idle_timeout", "tools", "answers", "temp_dir"}
    assert plan.untranslated == ()
    assert isinstance(plan.content, list)
    text, local, remote = plan.content
    assert (
        text["type"] == "text" and text["text"].startswith("[mode: plan]") and text["text"].endswith("do it")
    )
    assert local["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(b"\x89PNG fake").decode(),
    }
    assert remote["source"] == {"type": "url", "url": "https://example.test/a.png"}
    handled = {"prompt", "mode", "images", "cwd", "base_instructions", "developer_instructions"}
    mapped = {"model", "reasoning_effort", "mcp_servers", "output_schema", "config", "env", "max_turns"}
    mapped |= {"max_cost_usd"}
    assert {f.name for f in fields(Spec)} == handled | mapped | set(plan.local) | {"sandbox"}


def test_developer_instructions_append_to_the_preset(tmp_path: Path) -> None:
    spec = Spec(prompt="p", cwd=tmp_path, developer_instructions="be brief")
    plan = plan_session(spec, ClaudeOptions(model="m"), session_id=SID, resume=False)
    assert plan.options["system_prompt"] == {"type": "preset", "preset": "claude_code", "append": "be brief"}
    assert plan.options["model"] == "m"


def test_unknown_effort_is_reported(tmp_path: Path) -> None:
    spec = Spec(prompt="p", cwd=tmp_path, reasoning_effort="galaxy-brain")
    plan = plan_session(spec, ClaudeOptions(), session_id=SID, resume=False)
    assert "effort" not in plan.options
    assert [u.field for u in plan.untranslated] == ["reasoning_effort"]


def test_missing_image_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read"):
        plan_session(
            Spec(prompt="p", cwd=tmp_path, images=[tmp_path / "nope.png"]),
            ClaudeOptions(),
            session_id=SID,
            resume=False,
        )


def test_bad_options_are_usage_errors() -> None:
    with pytest.raises(UsageError):
        ClaudeOptions(extra_args={"--dash": None})
    with pytest.raises(UsageError):
        ClaudeOptions(env={"A": 1})  # type: ignore[dict-item]


@pytest.mark.parametrize(
    ("tool", "tool_input_", "kind", "about"),
    [
        (
            "Bash",
            {"command": "ls -la", "description": "x"},
            "command",
            {"kind": "command", "command": "ls -la"},
        ),
        (
            "Edit",
            {"file_path": "/w/a.py"},
            "file_change",
            {"kind": "file_change", "paths": ["/w/a.py"], "tool": "Edit"},
        ),
        (
            "Write",
            {"file_path": "b.txt"},
            "file_change",
            {"kind": "file_change", "paths": ["b.txt"], "tool": "Write"},
        ),
        (
            "MultiEdit",
            {"file_path": "c"},
            "file_change",
            {"kind": "file_change", "paths": ["c"], "tool": "MultiEdit"},
        ),
        (
            "NotebookEdit",
            {"notebook_path": "n.ipynb"},
            "file_change",
            {"kind": "file_change", "paths": ["n.ipynb"], "tool": "NotebookEdit"},
        ),
        (
            "Read",
            {"file_path": "/etc/passwd"},
            "read",
            {"kind": "read", "paths": ["/etc/passwd"], "tool": "Read"},
        ),
        ("Grep", {"pattern": "x"}, "read", {"kind": "read", "paths": ["/w"], "tool": "Grep"}),
        (
            "Glob",
            {"pattern": "/root/**/*.pem"},
            "read",
            {"kind": "read", "paths": ["/w", "/root/"], "tool": "Glob"},
        ),
        ("LS", {"path": "/root"}, "read", {"kind": "read", "paths": ["/root"], "tool": "LS"}),
        (
            "WebFetch",
            {"url": "https://docs.python.org:8443/x", "prompt": "p"},
            "network",
            {"kind": "network", "host": "docs.python.org", "tool": "WebFetch"},
        ),
        ("WebSearch", {"query": "q"}, "network", {"kind": "network", "host": None, "tool": "WebSearch"}),
        ("mcp__docs__search", {"q": "x"}, "tool", {"kind": "tool", "tool": "mcp:docs/search"}),
        ("Task", {"prompt": "p", "description": "d"}, "tool", {"kind": "tool", "tool": "builtin:Task"}),
        ("Skill", {"skill": "x"}, "unknown", {"kind": "unknown", "tool": "Skill"}),
    ],
)
def test_tool_calls_become_approval_requests(
    tool: str, tool_input_: dict[str, str], kind: str, about: dict[str, object]
) -> None:
    request = to_request(tool, tool_input_, cwd="/w")
    assert request.kind == kind and request.cwd == "/w"
    assert describe(request, tool) == about


def test_tool_names_and_inputs() -> None:
    assert tool_name("Bash") == "shell"
    assert tool_input("Bash", {"command": "ls", "timeout": 5}) == {"command": "ls"}
    assert tool_name("mcp__docs__search_all") == "mcp:docs/search_all"
    assert tool_name("mcp__broken") == "mcp__broken"
    assert tool_name("Edit") == "Edit"
    assert tool_input("Edit", {"file_path": "a"}) == {"file_path": "a"}


def test_a_fork_resumes_the_source_into_a_new_session_id(tmp_path: Path) -> None:
    new = "99999999-2222-4333-8444-555555555555"
    plan = plan_session(
        Spec(prompt="p", cwd=tmp_path), ClaudeOptions(), session_id=new, resume=False, fork_of=SID
    )
    assert (plan.options["resume"], plan.options["fork_session"], plan.options["session_id"]) == (
        SID,
        True,
        new,
    )
