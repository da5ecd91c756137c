"""The daemon's floor, hermetic: a client's permission adds restrictions and never removes the daemon's;
what only a trusted client may ask for; gate commands judged by the policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.contract import PermissionConfig
from agent_fleet.policy import evaluate_command
from agent_fleet.serve._floor import Floor, Refused

DAEMON = PermissionConfig(
    disallow_patterns=("^rm",), default="ask", allowed_hosts=("*.corp.example", "pypi.org")
)


def _rule(command: str, permission: PermissionConfig | None) -> str | None:
    return evaluate_command(command, config=permission, cwd="/w", writable_roots=("/w",)).rule


def test_no_client_permission_is_the_daemons() -> None:
    assert Floor(permission=DAEMON).permission_for(None) == DAEMON
    assert Floor().permission_for(None) is None


@pytest.mark.parametrize(
    "client",
    [
        PermissionConfig(),  # "allow everything", as a client may send it
        PermissionConfig(default="allow", disallow_patterns=("^curl",)),
        PermissionConfig(allow_patterns=("^rm",)),
    ],
)
def test_a_client_cannot_weaken_the_daemons_disallow_patterns_or_default(client: PermissionConfig) -> None:
    merged = Floor(permission=DAEMON).permission_for(client)
    assert merged is not None
    assert "^rm" in merged.disallow_patterns
    assert _rule("rm -f x", merged) == "user-deny"
    assert merged.default in ("ask", "deny")
    assert _rule("git reset --hard", merged) == "git-reset-hard"  # built-in rules always apply


@pytest.mark.parametrize(
    ("daemon", "client", "expected"),
    [("allow", "deny", "deny"), ("deny", "allow", "deny"), ("ask", "allow", "ask"), ("allow", "ask", "ask")],
)
def test_the_default_is_the_stricter_of_the_two(daemon: str, client: str, expected: str) -> None:
    floor = Floor(permission=PermissionConfig(default=daemon))  # type: ignore[arg-type]
    merged = floor.permission_for(PermissionConfig(default=client))  # type: ignore[arg-type]
    assert merged is not None and merged.default == expected


def test_a_client_adds_its_own_restrictions() -> None:
    merged = Floor(permission=DAEMON).permission_for(
        PermissionConfig(disallow_patterns=("^curl",), default="deny", profile="strict")
    )
    assert merged is not None
    assert merged.disallow_patterns == ("^rm", "^curl")
    assert merged.default == "deny" and merged.profile == "strict"
    assert _rule("curl https://x", merged) == "user-deny"


def test_allow_patterns_of_both_must_match() -> None:
    floor = Floor(permission=PermissionConfig(allow_patterns=("^git ", "(?i)^MAKE")))
    merged = floor.permission_for(PermissionConfig(allow_patterns=("status", "^make test")))
    assert merged is not None
    assert _rule("git status", merged) is None  # both accept it
    assert _rule("make test", merged) is None  # the daemon's (?i) stays with its own pattern
    assert _rule("git log", merged) == "not-allowed"  # the client's patterns do not
    assert _rule("ls status", merged) == "not-allowed"  # the daemon's do not
    assert floor.permission_for(merged) == merged  # merging again changes nothing (a resumed spec)
    # A client alone restricts; the daemon's alone stays.
    assert Floor().permission_for(PermissionConfig(allow_patterns=("^ls",))).allow_patterns == ("^ls",)  # type: ignore[union-attr]
    assert floor.permission_for(PermissionConfig()).allow_patterns == ("^git ", "(?i)^MAKE")  # type: ignore[union-attr]


@pytest.mark.parametrize("default", ["ask", "deny"])
def test_a_clients_allow_patterns_cannot_accept_what_the_daemons_default_leaves_undecided(
    default: str,
) -> None:
    floor = Floor(permission=PermissionConfig(default=default))  # type: ignore[arg-type]
    merged = floor.permission_for(PermissionConfig(allow_patterns=("^make", "^ls")))
    assert merged is not None and merged.allow_patterns == ()
    assert _rule("make test", merged) == f"default-{default}"  # still the daemon's to decide
    assert _rule("touch x", merged) == "user-deny"  # and what the client would not accept, declined
    assert floor.permission_for(merged) == merged
    # Under a daemon that allows what nothing decides, the client's patterns narrow as they are.
    assert Floor().permission_for(PermissionConfig(allow_patterns=("^make",))).allow_patterns == ("^make",)  # type: ignore[union-attr]


def test_hosts_and_mcp_tools_must_lie_within_the_daemons() -> None:
    floor = Floor(
        permission=PermissionConfig(allowed_hosts=("*.corp.example", "pypi.org"), mcp_tools=("docs/*",))
    )
    inside = floor.permission_for(
        PermissionConfig(allowed_hosts=("git.corp.example", "PyPI.org"), mcp_tools=("docs/search",))
    )
    assert inside is not None and inside.allowed_hosts == ("git.corp.example", "PyPI.org")
    assert floor.permission_for(PermissionConfig()).allowed_hosts == ()  # type: ignore[union-attr]  # narrower
    for client in (
        PermissionConfig(allowed_hosts=("evil.example",)),
        PermissionConfig(allowed_hosts=("*",)),
        PermissionConfig(allowed_hosts=("*.example",)),
        PermissionConfig(mcp_tools=("shell/*",)),
        PermissionConfig(mcp_tools=("*",)),
    ):
        with pytest.raises(Refused, match="not within the daemon's"):
            floor.permission_for(client)
    with pytest.raises(Refused, match="--allow-host: none"):
        Floor().permission_for(PermissionConfig(allowed_hosts=("pypi.org",)))


def test_rule_packs_must_be_under_an_allowed_root(tmp_path: Path) -> None:
    floor = Floor(allow_roots=(tmp_path / "root",))
    with pytest.raises(Refused, match="rule_packs"):
        floor.permission_for(PermissionConfig(rule_packs=("/etc/passwd",)))
    inside = floor.permission_for(PermissionConfig(rule_packs=(str(tmp_path / "root" / "p.toml"),)))
    assert inside is not None and inside.rule_packs == (str(tmp_path / "root" / "p.toml"),)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (Spec(prompt="p", sandbox="danger-full-access"), "danger-full-access"),
        (Spec(prompt="p", config={"model_provider": "x"}), "config overrides"),
        (Spec(prompt="p", mcp_servers={"sh": {"command": "sh", "args": ["-c", "id"]}}), "starts a process"),
    ],
)
def test_what_escapes_the_sandbox_needs_trust_clients(spec: Spec, message: str) -> None:
    with pytest.raises(Refused, match=message) as info:
        Floor().spec(spec)
    assert "--trust-clients" in str(info.value)
    assert Floor(trust_clients=True).spec(spec).sandbox == spec.sandbox


def test_an_mcp_server_by_url_is_no_process_of_the_daemon() -> None:
    spec = Spec(prompt="p", mcp_servers={"docs": {"url": "https://docs.corp.example/mcp"}})
    assert Floor().spec(spec).mcp_servers == spec.mcp_servers


def test_gate_commands_are_judged_by_the_policy(tmp_path: Path) -> None:
    floor = Floor(permission=PermissionConfig(disallow_patterns=("^curl",)))
    permission = floor.permission_for(None)
    floor.check_gate("pytest -q", cwd=str(tmp_path), permission=permission, where="gate")
    for command, rule in [
        ("curl -o f https://x", "user-deny"),
        ("rm -rf ~", "rm-root"),
        ("cat ~/.ssh/id_rsa", None),
    ]:
        with pytest.raises(Refused, match="declined by the daemon's approval policy") as info:
            floor.check_gate(command, cwd=str(tmp_path), permission=permission, where="gate")
        if rule is not None:
            assert f"rule {rule}" in str(info.value)
    ask = Floor(permission=PermissionConfig(default="ask"))
    with pytest.raises(Refused, match="default-ask"):
        ask.check_gate("pytest -q", cwd=str(tmp_path), permission=ask.permission, where="gate")
