from __future__ import annotations

import pytest

from agent_fleet.codex import CodexOptions
from agent_fleet.testing import CodexTestEnv


@pytest.fixture
def codex_options(codex_env: CodexTestEnv) -> CodexOptions:
    """Options for a provider whose codex child talks to the scripted model server."""
    return CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))
