"""The git hooks are valid and run the checks CI runs (tests/test_lint.py), with the venv's own tools."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_config_is_valid() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-config", ".pre-commit-config.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hooks_are_ci_checks_with_local_tools() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    assert [repo["repo"] for repo in config["repos"]] == ["local"]  # nothing fetched at install time
    entries = {hook["id"]: shlex.split(hook["entry"]) for hook in config["repos"][0]["hooks"]}
    assert entries == {
        "ruff-check": [".venv/bin/ruff", "check", "src", "tests", "bench"],
        "ruff-format": [".venv/bin/ruff", "format", "--check", "src", "tests", "bench"],
        "mypy": [".venv/bin/mypy"],
    }
    for argv in entries.values():
        assert (Path(sys.prefix) / "bin" / Path(argv[0]).name).is_file(), argv[0]
