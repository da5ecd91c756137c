"""The daemon's floor, hermetic: a client's permission adds restrictions and never removes the daemon's;
what only a trusted client may ask for; gate commands judged by the policy."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.contract import PermissionConfig
from agent_fleet.errors import UsageError
from agent_fleet.policy import evaluate_command
from agent_fleet.serve._floor import FIELD_RULES, Floor, Refused

DAEMON = PermissionConfig(
    disallow_patterns=("^rm",), default="ask", allowed_hosts=("*.corp.example", "pypi.org")
)


def _rule(command: str, permission: PermissionConfig | None) -> str | None:
    """The rule that declines ``command`` in /w (None: accepted)."""
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
        PermissionConfig(allow_patterns=(".*",), default="allow"),
    ],
)
def test_a_client_cannot_weaken_the_daemons_disallow_patterns_or_default(client: PermissionConfig) -> None:
    merged = Floor(permission=DAEMON).permission_for(client)
    assert merged is not None
    assert _rule("rm -f x", merged) == "user-deny"
    assert _rule("make test", merged) in ("default-ask", "not-allowed")  # never accepted outright
    assert _rule("git reset --hard", merged) == "git-reset-hard"  # built-in rules always apply


@pytest.mark.parametrize(
    ("daemon", "client", "expected"),
    [("allow", "deny", "deny"), ("deny", "allow", "deny"), ("ask", "allow", "ask"), ("allow", "ask", "ask")],
)
def test_the_default_is_the_stricter_of_the_two(daemon: str, client: str, expected: str) -> None:
    floor = Floor(permission=PermissionConfig(default=daemon))  # type: ignore[arg-type]
    merged = floor.permission_for(PermissionConfig(default=client))  # type: ignore[arg-type]
    assert _rule("make test", merged) == f"default-{expected}"


def test_a_client_adds_its_own_restrictions() -> None:
    merged = Floor(permission=DAEMON).permission_for(
        PermissionConfig(disallow_patterns=("^curl",), default="deny", profile="strict")
    )
    assert _rule("curl https://x", merged) == "user-deny"
    assert _rule("rm -f x", merged) == "user-deny"
    # Not proven harmless by the client's strict profile, left to a person by the daemon's ask: declined
    # until someone decides (both are declines an approval handler may turn).
    assert _rule("python -c 'import os'", merged) in ("strict-unproven", "default-ask")
    assert _rule("make test", merged) == "default-deny"  # the client's deny is final, not the daemon's ask


def test_allow_patterns_of_both_must_match() -> None:
    floor = Floor(permission=PermissionConfig(allow_patterns=("^git ", "(?i)^MAKE")))
    merged = floor.permission_for(PermissionConfig(allow_patterns=("status", "^make test")))
    assert merged is not None
    assert _rule("git status", merged) is None  # both accept it
    assert _rule("make test", merged) is None  # the daemon's (?i) stays with its own pattern
    assert _rule("git log", merged) == "not-allowed"  # the client's patterns do not
    assert _rule("ls status", merged) == "not-allowed"  # the daemon's do not
    assert _rule("git status && make test", merged) is None  # each simple command matched by both
    assert _rule("git status && ls status", merged) == "not-allowed"
    # The two sets stay apart: the daemon's patterns are its own, the client's ride along unchanged.
    assert merged.allow_patterns == ("^git ", "(?i)^MAKE")
    assert merged.narrowed_by == PermissionConfig(allow_patterns=("status", "^make test"))
    # A client alone restricts; the daemon's alone stays.
    assert _rule("ls", Floor().permission_for(PermissionConfig(allow_patterns=("^ls",)))) is None
    assert _rule("pwd", Floor().permission_for(PermissionConfig(allow_patterns=("^ls",)))) == "not-allowed"
    assert _rule("git log", floor.permission_for(PermissionConfig())) is None


DENY_BUT_GIT_STATUS = PermissionConfig(allow_patterns=("^git status$",), default="deny")
# The old merge's own prefix, as `GET /v1/sessions/{id}` showed it to every client: a pattern starting with
# it was taken as "combined already" and kept as it was.
_OLD_PREFIX = r"\A(?=[\s\S]*?(?:(?:^git status$)))"


@pytest.mark.parametrize(
    "patterns",
    [
        [".*"],
        [r"[\s\S]*", "^touch"],
        [_OLD_PREFIX + r"|[\s\S]*"],  # looked "combined already"
        [_OLD_PREFIX + r"(?=[\s\S]*?(?:.*))"],
    ],
)
def test_a_clients_allow_patterns_never_accept_what_the_daemons_do_not(patterns: list[str]) -> None:
    """The critical escape of issue 28: every command is still matched by the daemon's own patterns."""
    client = PermissionConfig(allow_patterns=tuple(patterns))
    merged = Floor(permission=DENY_BUT_GIT_STATUS).permission_for(client)
    # (inside the workspace: a write outside it is declined by a built-in rule before any pattern is read)
    for command in ("touch marker", "git status; touch x", "bash -c 'id'"):
        assert _rule(command, merged) == "not-allowed", (patterns, command)
    assert _rule("touch /tmp/outside/marker", merged) == "write-outside-workspace"
    # Stored apart and resumed apart: narrowing the result again changes nothing about what it accepts.
    again = Floor(permission=DENY_BUT_GIT_STATUS).permission_for(merged)
    assert _rule("touch marker", again) == "not-allowed"


@pytest.mark.parametrize("pattern", ["x))|((.*", "(?P<a>x)(?P<a>y)", "[", "(?i"])
def test_a_client_pattern_that_does_not_compile_on_its_own_is_refused(pattern: str) -> None:
    """``x))|((.*`` compiled only inside the old combination, where it closed the daemon's group."""
    with pytest.raises(UsageError, match="invalid regular expression"):
        Floor(permission=DENY_BUT_GIT_STATUS).permission_for(PermissionConfig(allow_patterns=(pattern,)))


def test_escalation_patterns_of_a_client_only_narrow_the_daemons() -> None:
    floor = Floor(permission=PermissionConfig(escalation_patterns=("^git commit",)))
    merged = floor.permission_for(PermissionConfig(escalation_patterns=(".*",)))
    assert merged is not None
    assert merged.escalation_patterns == ("^git commit",)  # what the provider reads first: the daemon's
    assert merged.narrowed_by is not None and merged.narrowed_by.escalation_patterns == (".*",)
    none = floor.permission_for(PermissionConfig())
    assert none is not None and none.narrowed_by is not None and none.narrowed_by.escalation_patterns == ()
    open_floor = Floor().permission_for(PermissionConfig(escalation_patterns=(".*",)))
    assert open_floor is not None and open_floor.escalation_patterns == (".*",)  # no floor: the client's


@pytest.mark.parametrize("default", ["ask", "deny"])
def test_a_clients_allow_patterns_cannot_accept_what_the_daemons_default_leaves_undecided(
    default: str,
) -> None:
    floor = Floor(permission=PermissionConfig(default=default))  # type: ignore[arg-type]
    merged = floor.permission_for(PermissionConfig(allow_patterns=("^make", "^ls")))
    assert _rule("make test", merged) == f"default-{default}"  # still the daemon's to decide
    # What the client would not accept is declined for good (never parked for a person under ask).
    assert _rule("touch x", merged) == ("not-allowed" if default == "ask" else "default-deny")
    assert _rule("make test", Floor().permission_for(PermissionConfig(allow_patterns=("^make",)))) is None


def test_hosts_and_mcp_tools_must_lie_within_the_daemons() -> None:
    floor = Floor(
        permission=PermissionConfig(allowed_hosts=("*.corp.example", "pypi.org"), mcp_tools=("docs/*",))
    )
    inside = floor.permission_for(
        PermissionConfig(allowed_hosts=("git.corp.example", "PyPI.org"), mcp_tools=("docs/search",))
    )
    assert inside is not None and inside.narrowed_by is not None
    assert inside.narrowed_by.allowed_hosts == ("git.corp.example", "PyPI.org")
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
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "p.toml").write_text(
        'domain = "acme"\n[[rules]]\nname = "prod"\nprograms = ["acmectl"]\nreason = "no"\n'
    )
    inside = floor.permission_for(PermissionConfig(rule_packs=(str(tmp_path / "root" / "p.toml"),)))
    assert inside is not None and inside.rule_packs == (str(tmp_path / "root" / "p.toml"),)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (Spec(prompt="p", sandbox="danger-full-access"), "danger-full-access"),
        (Spec(prompt="p", config={"model_provider": "x"}), "config overrides"),
        (Spec(prompt="p", mcp_servers={"sh": {"command": "sh", "args": ["-c", "id"]}}), "starts a process"),
        (Spec(prompt="p", env={"GIT_CONFIG_COUNT": "1"}), "'env'"),
    ],
)
def test_what_escapes_the_sandbox_needs_trust_clients(spec: Spec, message: str, tmp_path: Path) -> None:
    with pytest.raises(Refused, match=message) as info:
        Floor(allow_roots=(tmp_path,)).spec(spec)
    assert "--trust-clients" in str(info.value)
    trusted = Floor(trust_clients=True, allow_roots=(tmp_path,)).spec(spec)
    assert (trusted.sandbox, trusted.env, trusted.config) == (spec.sandbox, spec.env, spec.config)


def test_an_mcp_server_by_url_is_no_process_of_the_daemon(tmp_path: Path) -> None:
    spec = Spec(prompt="p", mcp_servers={"docs": {"url": "https://docs.corp.example/mcp"}})
    assert Floor(allow_roots=(tmp_path,)).spec(spec).mcp_servers == spec.mcp_servers


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


def test_every_spec_field_has_a_rule() -> None:
    """A new ``Spec`` field must be classified before a client can send it (issue 28: ``env`` was not)."""
    assert set(FIELD_RULES) == {f.name for f in dataclasses.fields(Spec)}


def test_paths_of_a_spec_must_lie_under_an_allowed_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "tmp").mkdir(parents=True)
    floor = Floor(allow_roots=(root,))
    spec = floor.spec(Spec(prompt="p", cwd=root, temp_dir=root / "tmp", images=("https://x/y.png",)))
    assert spec.temp_dir == str(root / "tmp")
    for bad in (
        Spec(prompt="p", cwd=tmp_path),
        Spec(prompt="p", cwd=root, temp_dir=tmp_path),  # a writable root of the sandbox
        Spec(prompt="p", cwd=root, images=("/etc/passwd",)),
    ):
        with pytest.raises(Refused, match="outside the daemon's --allow-root"):
            floor.spec(bad)
