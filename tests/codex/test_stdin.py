"""``_stdin``: which programs read their input as commands, as code, or as data (issue 16)."""

from __future__ import annotations

import pytest

from agent_fleet.codex._stdin import HISTORY_LIMIT, StdinHistory, stdin_requests, stdin_text
from agent_fleet.policy import Decision


@pytest.mark.parametrize(
    ("target", "judged_as"),
    [
        ("bash", ["bash", "x"]),
        ("/bin/bash -lc 'zsh -i'", ["/bin/bash -lc 'zsh -i'", "x"]),
        ("sh -s arg", ["sh -s arg", "x"]),
        ("bash build.sh", ["bash build.sh"]),
        ("cat | sh", ["cat | sh", "x"]),
        ("python3.12", ["python3.12", ("python3.12", "-c", "x")]),
        ("python3 -i app.py", ["python3 -i app.py", ("python3", "-c", "x")]),
        ("python3 -W ignore", ["python3 -W ignore", ("python3", "-c", "x")]),
        ("python3 -m http.server", ["python3 -m http.server"]),
        ("node", ["node", ("node", "-e", "x")]),
        ("perl", ["perl", ("perl", "-e", "x")]),
        ("php -a", ["php -a", ("php", "-r", "x")]),
        ("sort -u", ["sort -u"]),
    ],
)
def test_what_reads_the_input(target: str, judged_as: list[object]) -> None:
    found = stdin_requests(target, "x", "", "/w", ())
    assert not isinstance(found, Decision)
    assert [r.command for r in found] == judged_as


@pytest.mark.parametrize("target", ["psql", "ssh host", "sudo -s", "irb", "xargs rm", "gdb ./a.out", "bc"])
def test_input_nobody_can_judge_is_declined(target: str) -> None:
    found = stdin_requests(target, "x", "", "/w", ())
    assert isinstance(found, Decision) and found.rule == "opaque-code"


def test_the_input_shape_and_the_history_bound() -> None:
    assert stdin_text("write_stdin --session-id 3 'ls\n'") == "ls\n"
    assert stdin_text(["write_stdin", "--session-id", "3", "x"]) == "x"
    assert (
        stdin_text("ls -la") is None and stdin_text("write_stdin 'unclosed") is None and stdin_text(7) is None
    )
    big = stdin_requests("bash", "x", "y" * HISTORY_LIMIT, "/w", ())
    assert isinstance(big, Decision) and big.rule == "too-large"
    assert isinstance(stdin_requests("bash 'unclosed", "x", "", "/w", ()), Decision)
    history = StdinHistory()
    for n in range(40):
        history.record(f"p{n}", "a")
    history.record("p39", "b")
    assert len(history) == 32 and history["p39"] == "ab" and "p0" not in history
