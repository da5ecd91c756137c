"""Table-driven: every dangerous command is declined by the expected rule; everyday commands pass."""

from __future__ import annotations

import pytest

from agent_fleet.policy import RULES, evaluate_command

from .corpus import DANGEROUS, EVERYDAY


def test_corpus_sizes() -> None:
    assert len(DANGEROUS) >= 60
    assert len(EVERYDAY) >= 40
    assert len({command for command, _ in DANGEROUS}) == len(DANGEROUS)
    assert len(set(EVERYDAY)) == len(EVERYDAY)


@pytest.mark.parametrize(("command", "rule"), DANGEROUS, ids=[c for c, _ in DANGEROUS])
def test_dangerous_is_declined(command: str, rule: str) -> None:
    decision = evaluate_command(command)
    assert (decision.action, decision.rule) == ("decline", rule), decision.reason
    assert decision.rule in RULES
    assert decision.reason


@pytest.mark.parametrize("command", EVERYDAY)
def test_everyday_is_accepted(command: str) -> None:
    decision = evaluate_command(command)
    assert decision.action == "allow_for_session", (decision.rule, decision.reason)
    assert decision.rule is None


@pytest.mark.parametrize(
    ("argv", "action", "rule"),
    [
        (["/bin/bash", "-lc", "git reset --hard"], "decline", "git-reset-hard"),
        (["bash", "-lc", "ls"], "allow_for_session", None),
        (["rm", "-rf", "/"], "decline", "rm-root"),
        (["rm", "-rf", "build"], "allow_for_session", None),
        (["git", "commit", "-m", "rm -rf /"], "allow_for_session", None),
        (["/usr/bin/env", "sudo", "ls"], "decline", "privilege-escalation"),
        (["zsh", "-c", "curl -s x | sh"], "decline", "download-to-shell"),
        (["bash", "-lc", "echo 'unterminated"], "decline", "unparsable"),
    ],
)
def test_codex_argv_form(argv: list[str], action: str, rule: str | None) -> None:
    decision = evaluate_command(argv)
    assert (decision.action, decision.rule) == (action, rule), decision.reason


@pytest.mark.parametrize(
    ("command", "cwd", "action", "rule"),
    [
        # With a known working directory, relative targets are resolved before judging.
        ("rm -rf ../../..", "/work/main/src", "decline", "rm-root"),
        ("rm -rf build", "/work/main", "allow_for_session", None),
        ("rm -rf .", "/work/main", "allow_for_session", None),
        ("rm -rf *", "/usr", "decline", "rm-root"),
        ("rm -rf $PWD", "/etc", "decline", "rm-root"),
        ("chmod -R u+w /work/main/build", "/work/main", "allow_for_session", None),
        ("chmod -R u+w /work/other", "/work/main", "decline", "recursive-chmod-root"),
        ("chmod -R 755 ../..", "/work/main", "decline", "recursive-chmod-root"),
    ],
)
def test_cwd_aware(command: str, cwd: str, action: str, rule: str | None) -> None:
    decision = evaluate_command(command, cwd=cwd)
    assert (decision.action, decision.rule) == (action, rule), decision.reason


def test_writable_roots_allow_recursive_chmod() -> None:
    decision = evaluate_command("chmod -R u+w /data/cache", cwd="/work/main", writable_roots=["/data"])
    assert decision.action == "allow_for_session"
