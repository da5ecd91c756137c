"""pytest fixtures for testing codex pipelines offline (registered through the ``pytest11`` entry point).

- ``scripted_model``: a started ``ScriptedModelServer`` with an empty script; ``enqueue`` replies or
  set ``responder``.
- ``codex_env``: a ``CodexTestEnv`` for that server with a temporary ``CODEX_HOME``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet.testing._env import CodexTestEnv, scripted_codex_env
from agent_fleet.testing._server import ScriptedModelServer


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def codex_env(scripted_model: ScriptedModelServer, tmp_path: Path) -> CodexTestEnv:
    return scripted_codex_env(scripted_model, tmp_path / "codex-home")
