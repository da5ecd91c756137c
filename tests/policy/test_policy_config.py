"""User patterns and defaults, layered after the built-in rules."""

from __future__ import annotations

import pytest

from agent_fleet.contract import PermissionConfig
from agent_fleet.errors import UsageError
from agent_fleet.policy import RULES, ApprovalPolicy, ApprovalRequest, Decision, evaluate_command


def _cmd(command: str | list[str]) -> ApprovalRequest:
    return ApprovalRequest(kind="command", command=command, cwd="/work/repo")


@pytest.mark.parametrize(
    ("config", "command", "action", "rule"),
    [
        # None: built-in rules plus default allow.
        (None, "ls", "allow_for_session", None),
        (None, "rm -rf /", "decline", "rm-root"),
        # Disallow wins over allow, and is searched in the unwrapped commands too.
        (
            PermissionConfig(allow_patterns=("npm",), disallow_patterns=("npm publish",)),
            "npm publish --dry-run",  # a real `npm publish` is declined earlier, by the forge pack
            "decline",
            "user-deny",
        ),
        (PermissionConfig(allow_patterns=("^npm",)), "npm test", "allow_for_session", None),
        (
            PermissionConfig(disallow_patterns=("^docker ",)),
            "bash -lc 'docker run x'",
            "decline",
            "user-deny",
        ),
        (
            PermissionConfig(disallow_patterns=("^docker ",)),
            ["/bin/bash", "-lc", "docker ps"],
            "decline",
            "user-deny",
        ),
        (PermissionConfig(disallow_patterns=("timeout",)), "timeout 5 ls", "decline", "user-deny"),
        (PermissionConfig(disallow_patterns=("kubectl delete",)), "ls", "allow_for_session", None),
        # Allow patterns restrict: every simple command must match one.
        (PermissionConfig(allow_patterns=("^git ",)), "git status", "allow_for_session", None),
        (PermissionConfig(allow_patterns=("^git ",)), "bash -lc 'git status'", "allow_for_session", None),
        (PermissionConfig(allow_patterns=("^git ",)), ["bash", "-lc", "git log"], "allow_for_session", None),
        (PermissionConfig(allow_patterns=("^git ",)), "env GIT_PAGER=cat git log", "allow_for_session", None),
        (PermissionConfig(allow_patterns=("^git ",)), "npm test", "decline", "not-allowed"),
        (PermissionConfig(allow_patterns=("^git ",)), "git status && rm notes.txt", "decline", "not-allowed"),
        (PermissionConfig(allow_patterns=("^git ",)), "git log | less", "decline", "not-allowed"),
        (PermissionConfig(allow_patterns=("^git ", "^less$")), "git log | less", "allow_for_session", None),
        (
            PermissionConfig(allow_patterns=("^git ",), default="deny"),
            "git status",
            "allow_for_session",
            None,
        ),
        # Default deny.
        (PermissionConfig(default="deny"), "ls", "decline", "default-deny"),
        (PermissionConfig(default="deny"), "rm -rf /", "decline", "rm-root"),
        # Built-in rules cannot be overridden by allow patterns.
        (PermissionConfig(allow_patterns=(".*",)), "rm -rf /", "decline", "rm-root"),
        (PermissionConfig(allow_patterns=("",)), "sudo ls", "decline", "privilege-escalation"),
        (
            PermissionConfig(allow_patterns=("git reset --hard",)),
            "git reset --hard",
            "decline",
            "git-reset-hard",
        ),
        (PermissionConfig(allow_patterns=(".*",)), "echo 'oops", "decline", "unparsable"),
    ],
)
def test_config(
    config: PermissionConfig | None, command: str | list[str], action: str, rule: str | None
) -> None:
    decision = ApprovalPolicy(config).evaluate(_cmd(command))
    assert (decision.action, decision.rule) == (action, rule), decision.reason


@pytest.mark.parametrize("field", ["allow_patterns", "disallow_patterns"])
def test_bad_regex_raises_at_construction_naming_the_pattern(field: str) -> None:
    patterns = ("ok", "(unclosed")
    if field == "allow_patterns":
        config = PermissionConfig(allow_patterns=patterns)
    else:
        config = PermissionConfig(disallow_patterns=patterns)
    with pytest.raises(ValueError, match=r"\(unclosed") as info:
        ApprovalPolicy(config)
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("kind", "default", "action", "rule"),
    [
        ("permissions", "allow", "allow_for_session", None),
        ("permissions", "deny", "decline", "default-deny"),
        ("unknown", "allow", "allow_for_session", None),
        ("unknown", "deny", "decline", "default-deny"),
    ],
)
def test_permissions_and_unknown_follow_the_default(
    kind: str, default: str, action: str, rule: str | None
) -> None:
    policy = ApprovalPolicy(PermissionConfig(default=default))  # type: ignore[arg-type]
    decision = policy.evaluate(ApprovalRequest(kind=kind))  # type: ignore[arg-type]
    assert (decision.action, decision.rule) == (action, rule)


@pytest.mark.parametrize("command", [None, "", "   ", "# just a comment", []])
def test_empty_command_is_unparsable(command: str | list[str] | None) -> None:
    decision = ApprovalPolicy().evaluate(ApprovalRequest(kind="command", command=command))
    assert (decision.action, decision.rule) == ("decline", "unparsable")


def test_evaluate_command_takes_a_config() -> None:
    config = PermissionConfig(default="deny")
    assert evaluate_command("ls", config=config).rule == "default-deny"
    assert evaluate_command("ls").action == "allow_for_session"


def test_values_are_validated() -> None:
    with pytest.raises(ValueError, match="kind"):
        ApprovalRequest(kind="shell")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="action"):
        Decision(action="maybe")  # type: ignore[arg-type]
    request = ApprovalRequest(kind="command", command=["ls", "-l"], paths=["a"], writable_roots=["/tmp"])
    assert request.command == ("ls", "-l")
    assert request.paths == ("a",)
    assert Decision(action="allow_for_session").accepted
    assert not Decision(action="cancel").accepted


@pytest.mark.parametrize(
    ("config", "tool", "action", "rule"),
    [
        (None, "add", "allow_for_session", None),
        (PermissionConfig(default="deny"), "add", "allow_for_session", None),  # own tools: allowed
        (PermissionConfig(disallow_patterns=("add",)), "add", "allow_for_session", None),  # command patterns
        (PermissionConfig(tool_disallow_patterns=("^deploy",)), "deploy_prod", "decline", "tool-deny"),
        (PermissionConfig(tool_disallow_patterns=("^deploy",)), "add", "allow_for_session", None),
        (PermissionConfig(tool_allow_patterns=("^read_", "^add$")), "add", "allow_for_session", None),
        (PermissionConfig(tool_allow_patterns=("^read_",)), "write_file", "decline", "tool-not-allowed"),
        (
            PermissionConfig(tool_allow_patterns=("^read_",), tool_disallow_patterns=("secret",)),
            "read_secret",
            "decline",
            "tool-deny",
        ),
    ],
)
def test_tool_requests_have_their_own_patterns(
    config: PermissionConfig | None, tool: str, action: str, rule: str | None
) -> None:
    decision = ApprovalPolicy(config).evaluate(ApprovalRequest(kind="tool", tool=tool))
    assert (decision.action, decision.rule) == (action, rule)
    if rule is not None:
        assert rule in RULES and tool in (decision.reason or "")


def test_bad_tool_pattern_raises_at_construction() -> None:
    with pytest.raises(UsageError, match="tool_allow_patterns"):
        ApprovalPolicy(PermissionConfig(tool_allow_patterns=("(",)))
