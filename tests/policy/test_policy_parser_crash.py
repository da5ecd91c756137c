"""A command can crash the process that judges it only if the parser can: tree-sitter-bash's scanner
hands code points above 255 to <ctype.h> (undefined: glibc reads far outside its table), so `{` followed
by a character such as U+E0000 killed the process with SIGSEGV. The policy parses an ASCII-only view."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent_fleet.policy import evaluate_command

# Each killed a plain `Parser.parse` of tree-sitter-bash 0.25 in most runs (found by fuzzing evaluate).
CRASHERS = ["{\U000e0000", "{\U0010ffff", "a{\U000fc89b", "{{\U000a0000 x", "echo {\U000e0001,b}"]

_PROBE = """
import sys
from agent_fleet.policy import evaluate_command
for _ in range(40):
    for text in sys.argv[1:]:
        evaluate_command(text, cwd="/work/ws")
print("alive")
"""


def test_characters_the_scanner_cannot_take_do_not_kill_the_process() -> None:
    # In a child: a crash must fail this test, not take pytest down with it.
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *CRASHERS], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "alive", (done.returncode, done.stderr[-2000:])


@pytest.mark.parametrize(
    ("command", "accepted"),
    [
        ("echo 'héllo wörld' > notes.txt", True),
        ("git commit -m 'feat: ✨ emoji 🎉 and 中文'", True),
        ("rm -rf ./ünïcode-build", True),
        ("rm -rf / # 🎉", False),
        ("rm -rf ~/👀", False),
        ("é=rm; $é -rf /", False),  # bash: `é=rm` is no assignment; judged as if it were: still declined
        ("cat ~/.ssh/id_rsa # ñ", False),
    ],
)
def test_words_are_read_from_the_real_text(command: str, accepted: bool) -> None:
    decision = evaluate_command(command, cwd="/work/ws")
    assert (decision.action == "allow_for_session") is accepted, (decision.rule, decision.reason)
