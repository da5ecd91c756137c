"""Test codex pipelines offline: a scripted Responses API server and the wiring to point codex at it.

    from agent_fleet.testing import Reply, ScriptedModelServer, scripted_codex_env

    with ScriptedModelServer([Reply.exec("pytest -q"), Reply.text("done")]) as server:
        env = scripted_codex_env(server, codex_home=tmp_path / "codex-home")
        # run codex with env.config (as -c overrides) and env.env (CODEX_HOME, dummy key)

The pytest plugin (loaded automatically) provides the ``scripted_model`` and ``codex_env`` fixtures.
``python -m agent_fleet.testing`` serves a scripted agent to try ``agent-fleet run`` and ``batch`` from
the command line (``example DIR``, then ``serve -- COMMAND``; see the README).
"""

from agent_fleet.testing._anthropic import (
    AnthropicBlock,
    AnthropicReply,
    AnthropicRequest,
    AnthropicResponder,
    AnthropicText,
    AnthropicThinking,
    AnthropicToolUse,
    ScriptedAnthropicServer,
    scripted_claude_env,
)
from agent_fleet.testing._env import CodexTestEnv, scripted_codex_env
from agent_fleet.testing._server import (
    CustomToolCall,
    FunctionCall,
    Item,
    ReasoningItem,
    RecordedRequest,
    Reply,
    Responder,
    ScriptedModelServer,
    Text,
    apply_patch,
    exec_command,
)

__all__ = [
    "AnthropicBlock",
    "AnthropicReply",
    "AnthropicRequest",
    "AnthropicResponder",
    "AnthropicText",
    "AnthropicThinking",
    "AnthropicToolUse",
    "CodexTestEnv",
    "CustomToolCall",
    "FunctionCall",
    "Item",
    "ReasoningItem",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedAnthropicServer",
    "ScriptedModelServer",
    "Text",
    "apply_patch",
    "exec_command",
    "scripted_claude_env",
    "scripted_codex_env",
]
