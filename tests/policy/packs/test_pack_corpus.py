"""Table-driven, per domain: each dangerous command is declined by the named rule (and the decline names
its domain); each everyday command of the same domain is accepted."""

from __future__ import annotations

import pytest

from agent_fleet.policy import RULES, evaluate_command
from agent_fleet.policy.bash._shell import parse_script
from agent_fleet.policy.packs._packs import pack_set
from agent_fleet.policy.rules._rules import RuleContext

from .._judge import judge_all
from .pack_corpus import CWD, DOMAINS


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_corpus_sizes(domain: str) -> None:
    dangerous, everyday = DOMAINS[domain]
    assert len(dangerous) >= 20
    assert len(everyday) >= 10
    assert len({cmd for cmd, _ in dangerous}) == len(dangerous)
    assert len(set(everyday)) == len(everyday)


def _packs_alone(command: str) -> tuple[str, str] | None:
    """The pack rule ``command`` breaks when the packs judge it alone (built-in rules not asked)."""
    context = RuleContext.build(CWD, ())
    found = pack_set().check_script(parse_script(command), command, context.cwd, context.roots, context.home)
    return (found.rule, found.reason) if found is not None else None


def _declined_by(command_rule: tuple[str, str]) -> None:
    command, rule = command_rule
    decision = evaluate_command(command, cwd=CWD)
    assert decision.action == "decline", (decision.rule, decision.reason)
    assert decision.rule in RULES
    assert decision.reason
    if decision.rule != rule:
        # The built-in rules run first and may decline it under their own name; the pack rule must
        # still catch it by itself, so a pack never depends on the built-in rules to be right.
        assert "/" not in (decision.rule or ""), (decision.rule, rule)
        alone = _packs_alone(command)
        assert alone is not None and alone[0] == rule, (alone, rule)
        reason = alone[1]
    else:
        reason = decision.reason
    if "/" in rule:  # a pack rule: the reason starts with its domain
        assert reason.startswith(rule.split("/")[0] + ": "), reason


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_dangerous_is_declined(domain: str) -> None:
    judge_all(DOMAINS[domain][0], _declined_by)


def _accepted(command: str) -> None:
    decision = evaluate_command(command, cwd=CWD)
    assert decision.action == "allow_for_session", (decision.rule, decision.reason)


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_everyday_is_accepted(domain: str) -> None:
    judge_all(DOMAINS[domain][1], _accepted)


def test_every_builtin_pack_rule_is_exercised() -> None:
    """Each built-in rule has at least one dangerous example in the corpus (its own table row)."""
    exercised = {rule for dangerous, _ in DOMAINS.values() for _, rule in dangerous}
    pack_rules = {rule for rule in RULES if "/" in rule} - {"packs/internal-error"}  # see *_robustness
    assert pack_rules - exercised == set()
