"""The documentation site builds with warnings as errors, its API reference covers every public name,
and the changelog agrees with the package version."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import agent_fleet

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(agent_fleet.__file__).resolve().parent


def public_modules() -> list[str]:
    """``agent_fleet`` and every public module or subpackage of it that pins an ``__all__``."""
    names = ["agent_fleet"]
    for path in sorted(PACKAGE.iterdir()):
        stem = path.stem if path.suffix == ".py" else path.name
        if stem.startswith("_") or not (path.suffix == ".py" or (path / "__init__.py").is_file()):
            continue
        module = importlib.import_module(f"agent_fleet.{stem}")
        if hasattr(module, "__all__"):
            names.append(module.__name__)
    return names


def page_for(module: str) -> Path:
    return ROOT / "docs" / "reference" / f"{module.rpartition('.')[2]}.md"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.mark.e2e  # builds the site with mkdocs
def test_site_builds_strict(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "getting-started.html").is_file()


def test_every_public_module_has_a_reference_page() -> None:
    modules = public_modules()
    assert {"agent_fleet", "agent_fleet.codex", "agent_fleet.runner", "agent_fleet.contract"} <= set(modules)
    for module in modules:
        page = page_for(module)
        assert page.is_file(), f"add {page.relative_to(ROOT)} (::: {module}) and list it in mkdocs.yml"
        assert f"::: {module}\n" in page.read_text(encoding="utf-8"), page
        assert f"reference/{page.name}" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), page


@pytest.mark.e2e  # builds the site with mkdocs
def test_reference_lists_every_name_in_all(site: Path) -> None:
    missing = []
    for module in public_modules():
        html = (site / "reference" / page_for(module).with_suffix(".html").name).read_text(encoding="utf-8")
        anchors = set(re.findall(r'id="([^"]+)"', html))
        missing += [
            f"{module}.{name}"
            for name in importlib.import_module(module).__all__
            if f"{module}.{name}" not in anchors
        ]
    assert missing == []


def test_changelog_latest_release_is_the_package_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in text
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+[^\]]*)\] - \d{4}-\d{2}-\d{2}$", text, re.MULTILINE)
    assert releases, "no released version in CHANGELOG.md"
    assert releases[0] == agent_fleet.__version__
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'\nversion = "{releases[0]}"\n' in pyproject
