"""The judge's own safety (issue 30, item 8): an event loop never waits long on a judgement. Large
requests are judged in the policy's child process while the loop runs, with the verdict this process
would give; a child that dies or cannot start declines."""

from __future__ import annotations

import time

import pytest
from tests.loop_stall import best_of, held, shown

from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision

from .robustness import WORKSPACE, requests

ROBUSTNESS = list(requests())


@pytest.mark.parametrize(("name", "request_"), ROBUSTNESS, ids=[name for name, _ in ROBUSTNESS])
async def test_the_loop_never_stalls_over_50_ms_and_the_child_decides_as_this_process_does(
    name: str, request_: ApprovalRequest
) -> None:
    """A stall the judge causes happens on every try, and keeps this process busy; one the machine's
    load causes does neither (``tests/loop_stall.py``). What the child judges off the loop gets the
    verdict this process gives it (small commands are judged here anyway)."""
    policy = ApprovalPolicy()
    policy.evaluate(ApprovalRequest(kind="command", command="ls | cat", cwd=WORKSPACE))

    async def judged() -> Decision:
        return await policy.evaluate_async(request_)

    decision, stalls = await best_of(judged)
    assert decision.action in ("allow_for_session", "allow_once", "decline"), decision
    assert held(stalls), (name, shown(stalls))
    if request_.kind != "command" or len(request_.command or "") >= 40_000:
        here = policy.evaluate(request_)
        assert (decision.action, decision.rule) == (here.action, here.rule), name


def test_a_child_that_dies_declines_what_it_was_judging() -> None:
    from agent_fleet.policy.engine._child import ChildJudge

    judge = ChildJudge()
    judge.warm()
    deadline = time.monotonic() + 60
    while judge._process is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process = judge._process
    assert process is not None
    request = dict(ROBUSTNESS)["read: 10,000 paths"]
    future = judge.submit(None, request)
    process.kill()
    decision = future.result(timeout=60)
    assert (decision.action, decision.rule) == ("decline", "too-large")
    again = judge.submit(None, ApprovalRequest(kind="command", command="rm -rf ~", cwd=WORKSPACE))
    assert again.result(timeout=60).rule == "rm-root"  # a new child


def test_a_child_that_cannot_start_declines(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_fleet.policy.engine import _child

    monkeypatch.setattr(_child.sys, "executable", "/nonexistent/python")
    judge = _child.ChildJudge()
    decision = judge.submit(None, ApprovalRequest(kind="command", command="ls", cwd=WORKSPACE)).result(60)
    assert (decision.action, decision.rule) == ("decline", "policy-error")
