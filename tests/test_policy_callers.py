"""Nothing outside the policy judges on an event loop (issue 30, item 8): the providers, the daemon and
the runner reach the policy through ``evaluate_async``, ``evaluate_command_async`` or ``judge_apart``.

A synchronous judgement (``ApprovalPolicy.evaluate``, ``evaluate_command``, a bash parse) holds the
loop for as long as the request takes; the few that remain live in functions the bridges hand to
``judge_apart`` (run in the policy's child when large), listed here with the function that hands them.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import agent_fleet

SRC = Path(agent_fleet.__file__).parent
SYNC = {"evaluate", "evaluate_command", "parse_command", "parse_script"}
#: (module, function holding a synchronous judgement) -> the entry point handed to ``judge_apart``.
APART = {
    ("codex/_permissions.py", "_judge_parts"): "_grant_now",
    ("codex/_permissions.py", "_verdicts"): "_grant_now",
    ("codex/_stdin.py", "stdin_requests"): "stdin_decision",
    ("codex/_stdin.py", "stdin_decision"): "stdin_decision",
}


@functools.cache
def _trees(*names: str) -> list[tuple[str, ast.Module]]:
    """The package's modules whose source holds one of ``names`` (a call by that name cannot be in the
    others), parsed."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if any(name in text for name in names):
            found.append((path.relative_to(SRC).as_posix(), ast.parse(text)))
    return found


def _sync_calls() -> set[tuple[str, str]]:
    """(module, function) for every function holding a synchronous judgement, directly or in a function
    nested in it."""
    found: set[tuple[str, str]] = set()

    def visit(node: ast.AST, relative: str, holders: tuple[str, ...]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            holders = (*holders, node.name)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in SYNC:
                found.update((relative, holder) for holder in holders)
        for child in ast.iter_child_nodes(node):
            visit(child, relative, holders)

    for relative, tree in _trees(*sorted(SYNC)):
        if not relative.startswith("policy/"):
            visit(tree, relative, ())
    return found


def test_synchronous_judgements_happen_only_apart() -> None:
    sync = _sync_calls()
    assert sync == set(APART), sorted(sync ^ set(APART))


def test_the_functions_holding_them_are_handed_to_judge_apart() -> None:
    for module, entry in {(m, e) for (m, _), e in APART.items()}:
        callers = [
            node
            for _, tree in _trees("judge_apart")
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "judge_apart"
            and any(isinstance(a, ast.Name) and a.id == entry for a in node.args)
        ]
        assert callers, f"{module}: {entry} is never handed to judge_apart"
