"""The notice subtypes are a closed set: every one the source emits (or matches on) is declared once,
and the docs list exactly the declared ones."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

from agent_fleet.notices import NOTICE_SUBTYPES, SPEC_UNSUPPORTED, spec_unsupported

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "agent_fleet"
#: The runner's wrappers that build ``System(subtype=f"runner.{subtype}")``: their argument is the name.
_RUNNER_WRAPPERS = {"note": 0, "notice": 1}
#: What a file must hold for the scan to find anything in it: ``System(``, ``note(`` or ``notice(``.
_CALLED = re.compile(r"\b(?:System|note|notice)\s*\(")


@functools.cache
def _emitted() -> tuple[dict[str, list[str]], list[str]]:
    """Subtypes named in the source (``System(subtype="x")``, ``case System(subtype="x")``, runner
    notices) with where, and the places that build a subtype from something not a literal."""
    found: dict[str, list[str]] = {}
    dynamic: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if _CALLED.search(source) is None:  # no call or class pattern this scan looks at (most files)
            continue
        nodes = list(ast.walk(ast.parse(source)))
        wrappers = {
            node.name: node for node in nodes if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        inside_wrapper = {
            id(inner) for name, fn in wrappers.items() if name in _RUNNER_WRAPPERS for inner in ast.walk(fn)
        }
        rel = path.relative_to(SRC)
        for node in nodes:
            if not isinstance(node, ast.Call | ast.MatchClass):
                continue
            where = f"{rel}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call):
                func = node.func
                name = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else ""
                )
                if name == "System":
                    for kw in node.keywords:
                        if kw.arg != "subtype":
                            continue
                        if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                            found.setdefault(kw.value.value, []).append(where)
                        elif not (id(node) in inside_wrapper and _is_runner_fstring(kw.value)):
                            dynamic.append(where)
                elif name in _RUNNER_WRAPPERS and len(node.args) > _RUNNER_WRAPPERS[name]:
                    arg = node.args[_RUNNER_WRAPPERS[name]]
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        found.setdefault(f"runner.{arg.value}", []).append(where)
                    elif id(node) not in inside_wrapper:
                        dynamic.append(where)
            elif (
                isinstance(node, ast.MatchClass)
                and isinstance(node.cls, ast.Name)
                and node.cls.id == "System"
            ):
                for attr, pattern in zip(node.kwd_attrs, node.kwd_patterns, strict=True):
                    if attr == "subtype" and isinstance(pattern, ast.MatchValue):
                        value = pattern.value
                        if isinstance(value, ast.Constant) and isinstance(value.value, str):
                            found.setdefault(value.value, []).append(where)
    return found, dynamic


def _is_runner_fstring(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.JoinedStr)
        and isinstance(node.values[0], ast.Constant)
        and node.values[0].value == "runner."
    )


def test_every_emitted_subtype_is_declared() -> None:
    found, _ = _emitted()
    undeclared = {name: where for name, where in found.items() if name not in NOTICE_SUBTYPES}
    assert undeclared == {}, "declare these in agent_fleet/notices.py (and docs/events.md)"


def test_no_subtype_is_built_from_a_variable() -> None:
    # A computed subtype cannot be checked against the registry; pass the variable part as data.
    _, dynamic = _emitted()
    assert dynamic == []


def test_the_scan_sees_the_source() -> None:
    # Guards the scanner itself: these are emitted today from three different layers.
    found, _ = _emitted()
    assert {"approval_denied", "spec_unsupported", "runner.finished", "stream_error"} <= set(found)


def test_every_declaration_has_a_meaning_and_a_known_shape() -> None:
    for name, meaning in NOTICE_SUBTYPES.items():
        assert re.fullmatch(r"(runner\.|review\.)?[a-z][a-z_]*", name), name
        assert meaning and "\n" not in meaning, name


def test_docs_list_exactly_the_declared_subtypes() -> None:
    text = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    section = text.split("## Notice subtypes", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z_.]+)` \|", section, flags=re.M)
    assert sorted(listed) == sorted(NOTICE_SUBTYPES)


def test_spec_unsupported_notices() -> None:
    from agent_fleet.contract import Untranslated

    [notice] = spec_unsupported([Untranslated("images", "no image input")])
    assert notice.subtype == SPEC_UNSUPPORTED
    assert notice.data == {"field": "images", "reason": "no image input"}
