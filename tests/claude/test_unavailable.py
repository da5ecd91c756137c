"""Without claude-agent-sdk the package still imports, and using it says which extra to install."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.claude import ClaudeOptions, ClaudeProvider
from agent_fleet.errors import ProviderUnavailable

EXTRA = "pip install 'agent-fleet[claude]'"


async def test_missing_sdk_is_provider_unavailable_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "claude_agent_sdk", None)  # makes `import claude_agent_sdk` fail
    provider = ClaudeProvider()
    assert provider.name == "claude" and provider.capabilities.supports_resume
    with pytest.raises(ProviderUnavailable) as info:
        await provider.spawn(Spec(prompt="hi", cwd=tmp_path))
    assert EXTRA in str(info.value)
    assert isinstance(info.value.__cause__, ImportError)
    with pytest.raises(ProviderUnavailable, match=r"agent-fleet\[claude\]"):
        await provider.resume("00000000-0000-4000-8000-000000000000", Spec(prompt="hi", cwd=tmp_path))
    with pytest.raises(ProviderUnavailable, match=r"agent-fleet\[claude\]"):
        async with ClaudeProvider():
            pass


def test_package_imports_without_the_sdk() -> None:
    code = (
        "import sys; sys.modules['claude_agent_sdk'] = None\n"
        "from agent_fleet.claude import ClaudeOptions, ClaudeProvider\n"
        "ClaudeProvider(ClaudeOptions(model='m'))\n"
        "assert 'agent_fleet.claude.handle' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


async def test_missing_cli_is_provider_unavailable(tmp_path: Path) -> None:
    options = ClaudeOptions(cli_path=tmp_path / "no-such-claude")
    async with ClaudeProvider(options) as provider:
        with pytest.raises(ProviderUnavailable) as info:
            await provider.spawn(Spec(prompt="hi", cwd=tmp_path))
    assert "no-such-claude" in str(info.value)
