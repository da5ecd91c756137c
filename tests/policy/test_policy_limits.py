"""The judge's own safety (issue 30, items 7, 9 and 10): bounded work before the parse, a cheap cold start,
and verdicts that no caller's stack depth can change. Item 8, an event loop that never waits long on a
judgement, is ``test_policy_stall.py``."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_fleet.policy import ApprovalPolicy, Decision, evaluate_command
from agent_fleet.policy.bash import _shell
from agent_fleet.policy.bash._code import analyse_code
from agent_fleet.policy.packs._packs import PackSet, builtin_packs

from . import adversarial, blindspots, redteam
from .robustness import PIPELINE, WORKSPACE

ROOT = Path(__file__).resolve().parents[2]

# --------------------------------------------------------------------------------------------------
# 7. Work bounded before the parse.

_CHILD = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from agent_fleet.policy import evaluate_command
evaluate_command("ls | cat", cwd="/work/ws")  # the parser and the packs loaded
from tests.policy.robustness import PIPELINE
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
decision = evaluate_command(PIPELINE, cwd="/work/ws")
elapsed = time.perf_counter() - start
added = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({{"rule": decision.rule, "seconds": elapsed, "added_kib": added}}))
"""


def test_the_30000_stage_pipeline_is_declined_in_under_a_second_and_256_mb() -> None:
    assert len(PIPELINE) > 180_000 and PIPELINE.endswith("rm -rf ~")
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(root=str(ROOT))], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["rule"] == "too-large"
    assert got["seconds"] < 1.0
    assert got["added_kib"] < 256 * 1024


def test_pipes_are_counted_before_the_parse() -> None:
    longest = "cat" + " | cat" * _shell.MAX_PIPES
    assert evaluate_command(longest, cwd=WORKSPACE).action == "allow_for_session"
    assert evaluate_command(longest + " | cat", cwd=WORKSPACE).rule == "too-large"
    hidden = "echo '<<EOF'; " + longest + " | cat\nEOF"  # a here-document marker in quotes hides nothing
    assert evaluate_command(hidden, cwd=WORKSPACE).rule == "too-large"
    nested = "bash -c " + "'" + "cat" + " | cat" * (_shell.MAX_PIPES // 2) + "'"
    assert evaluate_command(nested + "; " + nested, cwd=WORKSPACE).action == "allow_for_session"


@pytest.mark.parametrize(
    "command",
    [
        "cat > table.md <<'EOF'\n" + "| a | b | c | d |\n" * 200 + "EOF",
        "grep -E '" + "|".join(f"word{i}" for i in range(400)) + "' notes.txt",
        "echo '" + "|" * 1000 + "' # " + "|" * 100,
    ],
    ids=["markdown table in a here-document", "a long alternation", "pipes in quotes and a comment"],
)
def test_pipes_in_text_are_not_operators(command: str) -> None:
    assert evaluate_command(command, cwd=WORKSPACE).action == "allow_for_session"


def test_large_python_is_read_in_pieces_with_the_same_findings() -> None:
    functions = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(1500))
    code = "import os, shutil\n" + functions + "shutil.rmtree(os.path.expanduser('~'))\n" + functions
    assert len(code) > 60_000
    found = analyse_code("python", code)
    assert any(inner.argv[:2] == ("rm", "-rf") and inner.argv[2] == "~" for inner in found)
    assert evaluate_command(["python3", "-c", code], cwd=WORKSPACE).rule == "rm-root"
    assert evaluate_command(["python3", "-c", functions * 2], cwd=WORKSPACE).action == "allow_for_session"


# --------------------------------------------------------------------------------------------------
# 9. Cold start.


def test_the_pack_index_is_built_without_fnmatch(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = fnmatch.fnmatchcase

    def counted(name: str, pattern: str) -> bool:
        nonlocal calls
        calls += 1
        return real(name, pattern)

    monkeypatch.setattr(fnmatch, "fnmatchcase", counted)
    packs = builtin_packs()
    start = time.perf_counter()
    pack_set = PackSet(packs)
    elapsed = time.perf_counter() - start
    assert calls == 0
    assert elapsed < 0.2
    rules = [rule for pack in packs for rule in pack.rules]
    names = {p for rule in rules for p in rule.programs if not any(c in p for c in "*?[")}
    for program in sorted(names | {"python3.12", "acme-tool", "kubectl", "psql"}):
        expected = [rule.id for rule in rules if rule.program_matches(program)]
        assert [rule.id for rule in pack_set._rules_for(program)] == expected, program


def test_a_policy_per_configuration_is_cheap() -> None:
    from agent_fleet.contract import PermissionConfig

    start = time.perf_counter()
    for i in range(20):
        ApprovalPolicy(PermissionConfig(allowed_hosts=(f"pypi{i}.corp.example",)))
    assert time.perf_counter() - start < 1.0


# --------------------------------------------------------------------------------------------------
# 10. Verdicts at any caller stack depth.


def _at_depth(extra: int, call: Callable[[], Decision]) -> Decision:
    if extra <= 0:
        return call()
    return _at_depth(extra - 1, call)


def _deep_cases() -> list[str]:
    def nested(template: str, depth: int, core: str) -> str:
        for _ in range(depth):
            core = template.format(core.replace("'", "'\\''"))
        return core

    return [
        "(" * 40 + "rm -rf ~" + ")" * 40,
        "(" * 400 + "ls" + ")" * 400,
        "echo " + "$(" * 30 + "ls" + ")" * 30,
        "echo " + "$(" * 300 + "ls" + ")" * 300,
        nested("bash -c '{}'", 10, "git reset --hard"),
        nested("ssh h '{}'", 4, "rm -rf /srv"),
        "python3 -c 'x = " + "+".join(["1"] * 400) + "'",
        "python3 -c 'x = " + "+".join(["1"] * 3000) + "'",
        'python3 -c "import os; os.system(' + "+".join(["'r'"] * 300) + "+'m -rf ~')\"",
        "psql -c 'SELECT " + "(" * 250 + "1" + ")" * 250 + "'",
        "psql -c 'DROP TABLE t" + ")" * 50 + "'",
        "echo $((" + "(" * 200 + "1" + ")" * 200 + "))",
        "if true; then " * 30 + "rm -rf ~; " + "fi; " * 30,
    ]


CASES = _deep_cases() + [c for cs in blindspots.DANGEROUS.values() for c in cs][::7]
CASES += redteam.EVERYDAY[::25] + adversarial.EVERYDAY[::50]


#: Frames the caller itself needs to make a request and hand it over (the dataclass, the cache, the
#: executor): below that, the caller's own code fails before the policy is reached.
CALLER = 60


def test_verdicts_are_the_same_at_any_caller_stack_depth() -> None:
    limit = sys.getrecursionlimit()
    here = len(_frames())
    shallow_verdicts = [evaluate_command(command, cwd=WORKSPACE) for command in CASES]
    for depth in ((limit - here) // 2, limit - here - 3 * CALLER, limit - here - CALLER):
        changed = []
        for command, shallow in zip(CASES, shallow_verdicts, strict=True):
            deep = _at_depth(depth, lambda c=command: evaluate_command(c, cwd=WORKSPACE))
            if (deep.action, deep.rule) != (shallow.action, shallow.rule):
                changed.append(f"{command[:80]!r}: {shallow.rule} -> {deep.rule} at {depth} frames")
        assert not changed, "\n".join(changed)


def test_a_deep_caller_still_gets_a_verdict_for_deep_input() -> None:
    deep = "(" * 600 + "rm -rf ~" + ")" * 600
    here = len(_frames())
    decision = _at_depth(
        sys.getrecursionlimit() - here - CALLER, lambda: evaluate_command(deep, cwd=WORKSPACE)
    )
    assert (decision.action, decision.rule) == ("decline", "unparsable")


def _frames() -> list[object]:
    frame = sys._getframe()
    found: list[object] = []
    while frame is not None:
        found.append(frame)
        frame = frame.f_back  # type: ignore[assignment]
    return found
