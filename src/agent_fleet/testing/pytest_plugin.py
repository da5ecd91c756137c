"""pytest fixtures for testing codex pipelines offline (registered through the ``pytest11`` entry point).

- ``scripted_model``: a started ``ScriptedModelServer`` with an empty script; ``enqueue`` replies or
  set ``responder``.
- ``codex_env``: a ``CodexTestEnv`` for that server with a temporary ``CODEX_HOME``.
- ``scripted_anthropic``: a started ``ScriptedAnthropicServer`` (Anthropic Messages API).
- ``claude_env``: the environment for a Claude Code CLI talking to it, with a private ``HOME``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet.testing._anthropic import ScriptedAnthropicServer, scripted_claude_env
from agent_fleet.testing._env import CodexTestEnv, scripted_codex_env
from agent_fleet.testing._server import ScriptedModelServer


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def codex_env(scripted_model: ScriptedModelServer, tmp_path: Path) -> CodexTestEnv:
    return scripted_codex_env(scripted_model, tmp_path / "codex-home")


@pytest.fixture
def scripted_anthropic() -> Iterator[ScriptedAnthropicServer]:
    with ScriptedAnthropicServer() as server:
        yield server


@pytest.fixture
def claude_env(scripted_anthropic: ScriptedAnthropicServer, tmp_path: Path) -> dict[str, str]:
    return scripted_claude_env(scripted_anthropic, tmp_path / "claude-home")
