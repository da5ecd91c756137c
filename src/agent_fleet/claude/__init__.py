"""The Claude Code provider, built on ``claude-agent-sdk`` (``pip install 'agent-fleet[claude]'``).

    from agent_fleet.claude import ClaudeOptions, ClaudeProvider

    async with ClaudeProvider(ClaudeOptions(model="claude-sonnet-5")) as provider:
        handle = await provider.spawn(Spec(prompt="fix the failing test", cwd=repo))
        result = await handle.wait()

Importing this package does not import the SDK; starting the provider or opening a session does.
"""

from agent_fleet.claude.options import ClaudeOptions
from agent_fleet.claude.provider import ClaudeProvider
from agent_fleet.claude.translate import ClaudePlan, Untranslated, plan_session

__all__ = ["ClaudeOptions", "ClaudePlan", "ClaudeProvider", "Untranslated", "plan_session"]
