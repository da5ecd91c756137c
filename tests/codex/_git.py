"""Running git in a test repository."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> str:
    """``git ARGS`` in ``repo``; its standard output (raises when git fails)."""
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout
