"""The shell layer: unwrapping and normalisation, fail-closed parsing, thread safety, public surface."""

from __future__ import annotations

import shlex
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.depth import examples

import agent_fleet.policy as policy
from agent_fleet.policy import UnparsableCommand, evaluate_command, parse_command, parse_script
from agent_fleet.policy.bash import _shell

from .corpus import DANGEROUS, EVERYDAY


@pytest.mark.parametrize(
    ("command", "argvs"),
    [
        ("/bin/rm -rf build", [("rm", "-rf", "build")]),
        ("\\rm \"a b\" 'c'", [("rm", "a b", "c")]),
        ("env -i X=1 nice -n 5 nohup timeout -k 1 5 ls -l", [("ls", "-l")]),
        (
            "bash -lc 'git status && git diff'",
            [("bash", "-lc", "git status && git diff"), ("git", "status"), ("git", "diff")],
        ),
        (["bash", "-lc", "ls | wc -l"], [("bash", "-lc", "ls | wc -l"), ("ls",), ("wc", "-l")]),
        (
            "echo $(date +%s) `hostname`",
            [("date", "+%s"), ("hostname",), ("echo", "$(date +%s)", "`hostname`")],
        ),
        ('echo "$HOME/x" ~ ${USER}', [("echo", "$HOME/x", "~", "${USER}")]),
        ("echo $'a\\tb' a\"b\"'c'", [("echo", "a\tb", "abc")]),
        (
            "find . -name '*.o' -exec rm -f {} \\;",
            [("find", ".", "-name", "*.o", "-exec", "rm", "-f", "{}", ";"), ("rm", "-f", "./*")],
        ),
        ("xargs -0 -n1 rm -f", [("rm", "-f")]),
        ("command -v rm", [("command", "-v", "rm")]),
        ("echo a > out b", [("echo", "a", "b")]),
        ("rm${IFS}-rf${IFS}x", [("rm", "-rf", "x")]),
        ('echo "a${IFS}b"', [("echo", "a \t\nb")]),  # quoted: the default IFS value, not split
        (["echo", "a${IFS}b"], [("echo", "a${IFS}b")]),
        ("sh -c 'rm \"$1\"' sh x", [("sh", "-c", 'rm "$1"', "sh", "x"), ("rm", "x")]),
    ],
)
def test_parse_command(command: str | list[str], argvs: list[tuple[str, ...]]) -> None:
    assert [cmd.argv for cmd in parse_command(command)] == argvs


def test_simple_command_context() -> None:
    curl, sh = parse_command("sudo curl -s x | env sh")
    assert curl.wrappers == ("sudo",) and curl.written == ("sudo", "curl", "-s", "x")
    assert sh.stdin == (("curl", "-s", "x"),) and sh.in_pipeline and sh.program == "sh"
    (inner,) = [c for c in parse_command("sudo bash -c 'ls'") if not c.carrier]
    assert inner.wrappers == ("sudo", "bash")
    script = parse_script("echo hi > /dev/null &")
    assert script.commands[0].background
    assert [r.target for r in script.redirects] == ["/dev/null"]


@pytest.mark.parametrize(
    "command",
    [
        "echo 'unterminated",
        'echo "unterminated',
        "if then fi",
        "if true; then echo",
        "ls |",
        "(ls",
        "for do done",
        "bash -c 'echo (' ",
        "rm -rf / )",
    ],
)
def test_unparsable_is_declined(command: str) -> None:
    with pytest.raises(UnparsableCommand):
        parse_command(command)
    decision = evaluate_command(command)
    assert (decision.action, decision.rule) == ("decline", "unparsable")
    assert decision.reason


def test_too_deep_nesting_fails_closed() -> None:
    # `eval eval ... ls` nests one inline script per `eval` without the quoting blow-up of `sh -c`.
    shallow = "eval " * _shell.MAX_DEPTH + "ls"
    assert evaluate_command(shallow).action == "allow_for_session"
    deep = "eval " * (_shell.MAX_DEPTH + 1) + "ls"
    assert evaluate_command(deep).rule == "unparsable"
    nested = "ls"
    for _ in range(4):
        nested = f"sh -c {shlex.quote(nested)}"
    assert evaluate_command(nested).action == "allow_for_session"


def test_unparsable_is_a_value_error() -> None:
    assert issubclass(UnparsableCommand, ValueError)


def test_thread_safety() -> None:
    commands = [c for c, _ in DANGEROUS] + EVERYDAY
    expected = [evaluate_command(c) for c in commands]
    barrier = threading.Barrier(8)

    def run(offset: int) -> list[object]:
        barrier.wait()
        order = commands[offset:] + commands[:offset]
        results = {c: evaluate_command(c) for c in order}
        return [results[c] for c in commands]

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(run, range(0, 80, 10)))
    differ = [
        f"{command!r}: {got} (alone: {want})"
        for outcome in outcomes
        for command, got, want in zip(commands, outcome, expected, strict=True)
        if got != want
    ]
    assert not differ, "\n".join(differ[:20])


def test_public_surface() -> None:
    assert sorted(policy.__all__) == sorted(
        [
            "RULES",
            "Action",
            "ApprovalPolicy",
            "ApprovalRequest",
            "Decision",
            "ParsedScript",
            "Redirect",
            "RequestKind",
            "SimpleCommand",
            "UnparsableCommand",
            "check_paths",
            "evaluate_command",
            "parse_command",
            "parse_script",
        ]
    )
    for rule in (
        "rm-root",
        "git-reset-hard",
        "git-push-force",
        "privilege-escalation",
        "download-to-shell",
        "recursive-chmod-root",
        "disk-write",
        "fork-bomb",
        "git-worktree-remove",
        "unparsable",
        "path-escape",
        "user-deny",
        "not-allowed",
        "default-deny",
    ):
        assert rule in policy.RULES


@pytest.mark.parametrize(
    "command",
    [
        "(" * 3000 + "ls" + ")" * 3000,
        "echo " + "$(" * 3000 + "ls" + ")" * 3000,
        "echo \ud800",  # not encodable
    ],
)
def test_pathological_input_fails_closed(command: str) -> None:
    assert evaluate_command(command).rule == "unparsable"


_PIECES = [*"rm -f/~$(){}|&;<>'\"`\\\n*?[]=#!:.0abcsudo", "rm -rf /", "sh -c ", "<<EOF\n", "\nEOF\n"]


@settings(max_examples=examples(100), deadline=None)
@given(text=st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
def test_any_text_gets_a_decision(text: str) -> None:
    decision = evaluate_command(text)
    assert decision.action in ("allow_for_session", "decline")
    assert decision.action == "allow_for_session" or decision.rule in policy.RULES


@settings(max_examples=examples(60), deadline=None)
@given(argv=st.lists(st.text(max_size=12), max_size=5))
def test_any_argv_gets_a_decision(argv: list[str]) -> None:
    assert evaluate_command(argv).action in ("allow_for_session", "decline")
