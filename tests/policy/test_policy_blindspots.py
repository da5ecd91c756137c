"""Approval policy round five (issue 30): the classes the guard missed (``blindspots.py``), each with
everyday counterparts that must stay accepted."""

from __future__ import annotations

import pytest

from agent_fleet.policy import RULES, evaluate_command

from . import adversarial, corpus, redteam
from ._judge import judge_all
from .blindspots import DANGEROUS, EVERYDAY, EVERYDAY_HOLDOUT, HOLDOUT, WORKSPACE

CASES = [(category, command) for category, commands in DANGEROUS.items() for command in commands]
CASES += [(category, command) for category, commands in HOLDOUT.items() for command in commands]


def test_corpus_shape() -> None:
    assert len(DANGEROUS) == 5 and all(len(commands) >= 30 for commands in DANGEROUS.values())
    assert set(HOLDOUT) == set(DANGEROUS) and len(EVERYDAY_HOLDOUT) >= 20
    assert len(CASES) >= 200 and len(EVERYDAY) >= 120
    dangerous = [command for _, command in CASES]
    assert len(set(dangerous)) == len(dangerous)
    everyday = EVERYDAY + EVERYDAY_HOLDOUT
    assert len(set(everyday)) == len(everyday)
    assert not set(dangerous) & set(everyday)
    earlier = {c for cs in adversarial.DANGEROUS.values() for c in cs} | {c for c, _ in corpus.DANGEROUS}
    earlier |= {c for cs in redteam.DANGEROUS.values() for c in cs}
    assert not set(dangerous) & earlier


@pytest.mark.parametrize("cwd", [WORKSPACE, None], ids=["workspace", "no-cwd"])
@pytest.mark.parametrize("category", sorted(DANGEROUS))
def test_dangerous_is_declined(category: str, cwd: str | None) -> None:
    def check(command: str) -> None:
        decision = evaluate_command(command, cwd=cwd)
        assert decision.action == "decline", (category, command, decision.reason)
        assert decision.rule in RULES and decision.reason

    judge_all([x for c, x in CASES if c == category], check)


@pytest.mark.parametrize("cwd", [WORKSPACE, None], ids=["workspace", "no-cwd"])
@pytest.mark.parametrize("everyday", ["everyday", "holdout"])
def test_everyday_is_accepted(everyday: str, cwd: str | None) -> None:
    def check(command: str) -> None:
        decision = evaluate_command(command, cwd=cwd)
        assert decision.action == "allow_for_session", (decision.rule, decision.reason)

    judge_all(EVERYDAY if everyday == "everyday" else EVERYDAY_HOLDOUT, check)
