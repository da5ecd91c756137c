"""Property: wrapping a dangerous command in shells, pipelines, lists or subshells keeps it declined."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.depth import examples

from agent_fleet.policy import evaluate_command

from .corpus import DANGEROUS

# Heredocs need their terminator on a line of its own and a trailing `&` cannot be followed by `|`,
# so those two shapes are left out of the textual wrapping (they are covered by the table tests).
POOL = [(command, rule) for command, rule in DANGEROUS if "\n" not in command and not command.endswith("&")]

WRAPPERS: dict[str, Callable[[str], str]] = {
    "bash -lc": lambda c: f"bash -lc {shlex.quote(c)}",
    "/bin/bash -lc": lambda c: f"/bin/bash -lc {shlex.quote(c)}",
    "sh -c": lambda c: f"sh -c {shlex.quote(c)}",
    "pipe in": lambda c: f"ls | {c}",
    "pipe out": lambda c: f"{c} | cat",
    "and before": lambda c: f"cd . && {c}",
    "and after": lambda c: f"{c} && echo done",
    "semicolon": lambda c: f"echo start; {c}",
    "subshell": lambda c: f"( {c} )",
}


@settings(max_examples=examples(200), deadline=None)
@given(
    case=st.sampled_from(POOL),
    wrappers=st.lists(st.sampled_from(sorted(WRAPPERS)), min_size=1, max_size=3),
)
def test_wrapped_dangerous_stays_declined(case: tuple[str, str], wrappers: list[str]) -> None:
    command, rule = case
    for name in wrappers:
        command = WRAPPERS[name](command)
    decision = evaluate_command(command)
    assert (decision.action, decision.rule) == ("decline", rule), (command, decision.reason)


@settings(max_examples=examples(50), deadline=None)
@given(wrappers=st.lists(st.sampled_from(["bash -lc", "sh -c", "subshell", "pipe out"]), max_size=3))
def test_wrapped_harmless_stays_accepted(wrappers: list[str]) -> None:
    command = "git status"
    for name in wrappers:
        command = WRAPPERS[name](command)
    assert evaluate_command(command).action == "allow_for_session", command
