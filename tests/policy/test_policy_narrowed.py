"""``PermissionConfig.narrowed_by``: two configurations judged apart, the stricter decision wins (the
daemon's floor under a client's permission, issue 28). Patterns are never combined by text."""

from __future__ import annotations

import pytest

from agent_fleet.contract import PermissionConfig
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, evaluate_command


def _decide(command: str, config: PermissionConfig) -> tuple[str, str | None]:
    decision = evaluate_command(command, config=config, cwd="/w", writable_roots=("/w",))
    return decision.action, decision.rule


OUTER = PermissionConfig(allow_patterns=("^git ",), disallow_patterns=("^git push",))


@pytest.mark.parametrize(
    ("inner", "command", "expected"),
    [
        (PermissionConfig(allow_patterns=("status$",)), "git status", ("allow_for_session", None)),
        (PermissionConfig(allow_patterns=("status$",)), "git log", ("decline", "not-allowed")),
        (PermissionConfig(allow_patterns=(".*",)), "touch x", ("decline", "not-allowed")),
        (PermissionConfig(allow_patterns=(".*",)), "git push", ("decline", "user-deny")),
        (PermissionConfig(disallow_patterns=("log",)), "git log", ("decline", "user-deny")),
        (PermissionConfig(default="deny"), "git log", ("decline", "default-deny")),  # the inner default
        (PermissionConfig(default="deny", allow_patterns=("^ls",)), "git log", ("decline", "not-allowed")),
    ],
)
def test_a_command_must_be_accepted_by_both(
    inner: PermissionConfig, command: str, expected: tuple[str, str | None]
) -> None:
    assert _decide(command, PermissionConfig(**{**_fields(OUTER), "narrowed_by": inner})) == expected


def _fields(config: PermissionConfig) -> dict[str, object]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


def test_each_simple_command_is_matched_by_each_set() -> None:
    config = PermissionConfig(
        allow_patterns=("^git ", "^make"), narrowed_by=PermissionConfig(allow_patterns=("^git status", "^ls"))
    )
    assert _decide("git status && git status", config)[0] == "allow_for_session"
    assert _decide("git status && make", config)[1] == "not-allowed"  # make: outer only
    assert _decide("git status && ls", config)[1] == "not-allowed"  # ls: inner only


def test_a_final_decline_wins_over_one_a_person_may_turn() -> None:
    ask_outer = PermissionConfig(default="ask", narrowed_by=PermissionConfig(allow_patterns=("^ls",)))
    assert _decide("ls", ask_outer) == ("decline", "default-ask")  # a person decides
    assert _decide("rm x", ask_outer) == ("decline", "not-allowed")  # never parked: the inner said no
    ask_inner = PermissionConfig(
        allow_patterns=("^ls",), default="deny", narrowed_by=PermissionConfig(default="ask")
    )
    assert _decide("ls", ask_inner) == ("decline", "default-ask")
    assert _decide("rm x", ask_inner) == ("decline", "not-allowed")


def test_hosts_must_be_allowed_by_both() -> None:
    config = PermissionConfig(
        allowed_hosts=("*.corp.example",), narrowed_by=PermissionConfig(allowed_hosts=("git.corp.example",))
    )
    policy = ApprovalPolicy(config)
    for host, accepted in (("git.corp.example", True), ("wiki.corp.example", False), ("evil.example", False)):
        decision = policy.evaluate(ApprovalRequest(kind="network", host=host, protocol="https", cwd="/w"))
        assert decision.accepted is accepted, host


def test_a_bad_inner_pattern_fails_like_an_outer_one() -> None:
    with pytest.raises(ValueError, match="invalid regular expression"):
        ApprovalPolicy(PermissionConfig(narrowed_by=PermissionConfig(allow_patterns=("x))|((.*",))))


def test_narrowed_by_must_be_a_config() -> None:
    with pytest.raises(TypeError, match="narrowed_by"):
        PermissionConfig(narrowed_by={"default": "deny"})  # type: ignore[arg-type]
