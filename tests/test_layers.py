"""The layer rules of issue 14, checked on the source: nothing above the provider line (``runner/``,
``cli/``) speaks the wire protocol."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "agent_fleet"
ABOVE_PROVIDERS = ("runner", "cli", "serve")
FORBIDDEN_IMPORTS = ("agent_fleet.jsonrpc", "agent_fleet.codex.mapping", "agent_fleet.codex._review")
METHOD = re.compile(r"^[a-z][A-Za-z]*(/[a-z][A-Za-z]*)+$")  # thread/start, item/completed, ...
WIRE_PACKAGES = ("codex", "execserver", "jsonrpc")


@functools.cache
def _namespaces() -> frozenset[str]:
    """The first segments of every method-shaped string the wire packages name (thread, turn, item, ...),
    so a method-shaped string of another protocol (an OTLP ``http/protobuf``) is not taken for one."""
    found: set[str] = set()
    for package in WIRE_PACKAGES:
        for path in (SRC / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and METHOD.match(node.value)
                ):
                    found.add(node.value.split("/", 1)[0])
    return frozenset(found)


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        for name in names:
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_IMPORTS):
                found.append(f"{path.name}:{node.lineno}: imports {name}")
        if isinstance(node, ast.Attribute) and node.attr == "connection":
            found.append(f"{path.name}:{node.lineno}: uses .connection")
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and METHOD.match(node.value)
            and node.value.split("/", 1)[0] in _namespaces()
        ):
            found.append(f"{path.name}:{node.lineno}: names the JSON-RPC method {node.value!r}")
    return found


def _modules(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (SRC / package).rglob("*.py"))


@pytest.mark.parametrize("path", _modules(*ABOVE_PROVIDERS), ids=lambda p: str(p.relative_to(SRC)))
def test_runner_and_cli_do_not_speak_the_wire_protocol(path: Path) -> None:
    assert _violations(path) == []


def test_the_check_finds_wire_protocol_code() -> None:
    """The provider's own review module does all three; the check must see it."""
    found = "\n".join(_violations(SRC / "codex" / "_review.py"))
    assert "imports agent_fleet.jsonrpc" in found
    assert "imports agent_fleet.codex.mapping" in found
    assert "names the JSON-RPC method 'review/start'" in found


MAX_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    sizes = {str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines()) for p in _modules(".")}
    assert len(sizes) > 50, "the source tree was not found"
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert over == {}
