from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet.codex import CodexOptions
from agent_fleet.testing import CodexTestEnv


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def codex_options(codex_env: CodexTestEnv) -> CodexOptions:
    """Options for a provider whose codex child talks to the scripted model server."""
    return CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))
