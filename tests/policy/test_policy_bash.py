"""The policy sees what bash runs: dangerous cases replayed under real bash with fake programs.

Each case that is safe to replay runs in ``bash -r`` (restricted: no ``/`` in command names, no output
redirections, no ``cd``, no ``PATH`` changes) with ``PATH`` holding only recording fakes (``rm``, ``git``,
``chmod`` ...) and a few harmless real tools (``env``, ``xargs``, ``cat`` ...), in a scratch directory
with a scratch ``HOME``, as the ``nobody`` user when we are root. Every argv a fake records must be one
the policy's parse reports, so the rules judge what bash actually runs, not what the text looks like.
Cases naming absolute program paths, globs, ``kill`` or writes to real files are never replayed.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet.policy import UnparsableCommand, evaluate_command, parse_command
from agent_fleet.policy.bash._unwrap import expand_braces

from ._replay import make_sandbox, matches, replay
from .adversarial import DANGEROUS

FAKES = [
    "rm",
    "rmdir",
    "shred",
    "git",
    "chmod",
    "chown",
    "chgrp",
    "dd",
    "mkfs",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "systemctl",
    "iptables",
    "ufw",
    "setenforce",
    "sysctl",
    "curl",
    "wget",
    "nc",
    "scp",
    "ssh",
    "python3",
    "perl",
    "node",
    "crontab",
    "mv",
    "cp",
    "install",
    "truncate",
    "touch",
]
REAL = [
    "env",
    "xargs",
    "nice",
    "nohup",
    "timeout",
    "setsid",
    "stdbuf",
    "cat",
    "base64",
    "rev",
    "tr",
    "head",
    "printf",
    "echo",
    "dirname",
    "basename",
    "mktemp",
    "realpath",
]
# Never replayed: absolute or constructed program paths, globs, signals, privilege, file writers.
UNSAFE = re.compile(
    r"/bin|/sbin|/usr|/lib|/proc|/sys|/dev|/etc|\\x2f|\\057|[*?\[]|kill|PATH|command -p|sudo|su |doas"
    r"|tee|sed|awk|exec=|\$'|find|tar |at now|make|vim|vi |ex |python|perl|ruby|node|php|lua|deno|>"
    r"|while|until|watch|select|sleep"
)
REPLAYED_CATEGORIES = ("dynamic", "lexical", "wrappers", "git", "system", "vital")


def _cases() -> list[str]:
    return [c for cat in REPLAYED_CATEGORIES for c in DANGEROUS[cat] if not UNSAFE.search(c)]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Path]:
    root = make_sandbox("policy-bash-", FAKES, REAL)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _normal(argv: tuple[str, ...], home: str, work: str) -> tuple[str, ...]:
    out: list[str] = []
    for arg in argv:
        if re.match(r"~[a-z]", arg):  # ~user: bash asks the password database
            arg = os.path.expanduser(arg)
        for prefix, tilde in ((home, "~"), ("$HOME", "~"), ("${HOME}", "~"), (work, "$PWD"), ("~+", "$PWD")):
            if arg == prefix or arg.startswith(prefix + "/"):
                arg = tilde + arg[len(prefix) :]
        out.append(arg)
    return tuple(out)


def test_enough_cases_are_replayable() -> None:
    assert len(_cases()) >= 150


@pytest.mark.e2e  # real bash replays the corpus (see the module docstring)
def test_policy_sees_the_argv_bash_runs(sandbox: Path) -> None:
    home, work = str(sandbox / "home"), str(sandbox / "work")
    _WORK[:] = [work]
    verified = 0
    unseen: list[tuple[str, tuple[str, ...], list[tuple[str, ...]]]] = []
    for i, command in enumerate(_cases()):
        assert evaluate_command(command).action == "decline", command
        ran = [_normal(argv, home, work) for argv in replay(command, sandbox, f"case{i}")]
        if not ran:
            continue
        try:
            commands = parse_command(command)
        except UnparsableCommand:  # declined as unparsable: nothing it runs is accepted
            assert evaluate_command(command).rule == "unparsable"
            continue
        parsed = {
            (_normal(tuple(words), home, work), "xargs" in cmd.wrappers)
            for cmd in commands
            for words in _brace_variants(cmd.argv)
        }
        for argv in ran:
            if any(matches(words, argv, more, _same) for words, more in parsed):
                verified += 1
            else:
                unseen.append((command, argv, sorted(words for words, _ in parsed)))
    assert not unseen, "\n".join(f"{c!r}: bash ran {a}, policy saw {p}" for c, a, p in unseen)
    assert verified >= 100


def _same(parsed: str, ran: str) -> bool:
    """Equal words, or the same path (``realpath ..`` prints what ``..`` names)."""
    if parsed == ran:
        return True
    work = _WORK[0] if _WORK else ""
    return bool(work) and ran.startswith("/") and posixpath.normpath(posixpath.join(work, parsed)) == ran


_WORK: list[str] = []


def _brace_variants(argv: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    yield argv
    expanded: list[str] = []
    for word in argv:
        expanded.extend(expand_braces(word) if "{" in word and "," in word else [word])
    yield tuple(expanded)
