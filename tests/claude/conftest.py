from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_fleet.claude import ClaudeOptions
from agent_fleet.testing._anthropic import ScriptedAnthropicServer, scripted_claude_env


@pytest.fixture
def anthropic_server() -> Iterator[ScriptedAnthropicServer]:
    with ScriptedAnthropicServer() as server:
        yield server


@pytest.fixture
def claude_home(tmp_path: Path) -> Path:
    return tmp_path / "claude-home"


@pytest.fixture
def claude_options(anthropic_server: ScriptedAnthropicServer, claude_home: Path) -> ClaudeOptions:
    """Options for a provider whose CLI talks to the scripted server with a private HOME."""
    return ClaudeOptions(env=scripted_claude_env(anthropic_server, claude_home))
