"""The policy package's layout (issue 30): subpackages named for their job, each stating its job and its
contract, imports that only go down the layers, and a rule table that holds every rule id the rules can
give."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import agent_fleet.policy as policy
from agent_fleet.policy import RULES

PACKAGE = Path(policy.__file__).parent
#: Each subpackage, and the parts of the policy it may import (besides itself).
LAYERS = {
    "bash": set(),
    "rules": {"bash", "_hosts", "_types"},
    "packs": {"bash", "rules", "_hosts", "_types"},
    "requests": {"rules", "_types"},
    "engine": {"bash", "rules", "packs", "requests", "_hosts", "_types"},
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_each_subpackage_states_its_job_and_contract(name: str) -> None:
    doc = importlib.import_module(f"agent_fleet.policy.{name}").__doc__ or ""
    assert "Job:" in doc, name
    assert "Contract" in doc, name
    assert len(doc.split()) > 40


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("agent_fleet.policy"):
            found.add(node.module)
            if node.module == "agent_fleet.policy":
                found |= {f"agent_fleet.policy.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("agent_fleet.policy")}
    return found


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_imports_go_down_the_layers(name: str) -> None:
    allowed = LAYERS[name] | {name}
    wrong = []
    for path in sorted((PACKAGE / name).glob("*.py")):
        for module in _imports(path):
            part = module.removeprefix("agent_fleet.policy").lstrip(".").split(".")[0]
            if part and part not in allowed:
                wrong.append(f"{path.name} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_the_layer_check_sees_a_wrong_import(tmp_path: Path) -> None:
    module = tmp_path / "x.py"
    module.write_text("from agent_fleet.policy.packs._packs import pack_set\n", encoding="utf-8")
    assert _imports(module) == {"agent_fleet.policy.packs._packs"}


def _emitted(node: ast.AST) -> str | None:
    """The rule id a ``Violation(rule=...)``, ``Decision(rule=...)``, ``_decline("id", ...)`` gives."""
    if not isinstance(node, ast.Call):
        return None
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
    for keyword in node.keywords:
        if keyword.arg == "rule" and isinstance(keyword.value, ast.Constant):
            return str(keyword.value.value)
    if name == "_decline" and node.args and isinstance(node.args[0], ast.Constant):
        return str(node.args[0].value)
    return None


def test_every_rule_id_the_rules_give_is_in_the_table() -> None:
    emitted: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            rule = _emitted(node)
            if rule is not None and isinstance(rule, str):
                emitted.setdefault(rule, path.name)
    assert len(emitted) > 30, "the scan found too few rule ids"
    missing = {rule: where for rule, where in emitted.items() if rule not in RULES}
    assert missing == {}


def test_the_built_in_table_is_gathered_from_the_rule_modules() -> None:
    from agent_fleet.policy.rules import _execution, _files, _git, _links, _rules, _system, _unseen

    tables = [_rules.RULES, _git.RULES, _execution.RULES, _system.RULES, _files.RULES]
    tables += [_links.LINK_RULES, _unseen.UNSEEN_RULES]
    gathered = {rule: meaning for table in tables for rule, meaning in table.items()}
    assert gathered == _rules.BUILTIN_RULES
    assert all(rule in RULES for rule in gathered)


def test_the_public_names_are_unchanged() -> None:
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
    from agent_fleet.policy.engine import INLINE_CHARS, MAX_COMMAND_CHARS, STRICT_RULE

    assert INLINE_CHARS < MAX_COMMAND_CHARS and STRICT_RULE in RULES
