"""The public surface is pinned: adding or removing a name is a deliberate change to this list."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import agent_fleet
from agent_fleet import errors

EXPECTED = {
    "AgentFleetError",
    "AssistantMessage",
    "Diff",
    "Compaction",
    "Goal",
    "ImageView",
    "McpServerStatus",
    "RateLimits",
    "ReasoningDelta",
    "ReviewMode",
    "SubAgent",
    "ToolProgress",
    "WebSearch",
    "AuthenticationError",
    "Capabilities",
    "ConnectionClosed",
    "Error",
    "Event",
    "Handle",
    "PermissionConfig",
    "Plan",
    "PlanStep",
    "Provider",
    "ProviderUnavailable",
    "RPCError",
    "Reasoning",
    "RemoteProtocolError",
    "RequestTimeout",
    "Result",
    "Spec",
    "System",
    "TextDelta",
    "TokenUsage",
    "Tool",
    "ToolResult",
    "ToolUse",
    "TransportError",
    "TurnFailed",
    "UnknownEvent",
    "Unsupported",
    "UsageError",
    "__version__",
}


# Every public subpackage (and the contract module): the names each exports. ``jsonrpc`` has its own pin
# in tests/jsonrpc/test_public_api.py.
SUBPACKAGES: dict[str, set[str]] = {
    "claude": {
        "ClaudeOptions",
        "ClaudePlan",
        "ClaudeProvider",
        "Untranslated",
        "plan_session",
    },
    "cli": {
        "cli",
        "describe",
        "main",
        "parse_config_overrides",
    },
    "codex": {
        "ApprovalHandler",
        "AuthRefreshHandler",
        "AuthTokens",
        "CodexAccount",
        "CodexExecHandle",
        "CodexExecProvider",
        "CodexHandle",
        "CodexOptions",
        "CodexProvider",
        "CredentialSource",
        "DeviceCodeLogin",
        "SpawnPlan",
        "Untranslated",
        "codex_version",
        "codex_version_async",
        "credential_sources",
        "find_codex",
        "is_retryable",
        "plan_spawn",
        "retry_on_overload",
    },
    "execserver": {
        "DirectoryEntry",
        "ExecServerClient",
        "ExecServerError",
        "ExecServerStats",
        "FileMetadata",
        "FileSystem",
        "InternalServerError",
        "InvalidParamsError",
        "InvalidRequestError",
        "MethodNotFoundError",
        "NotFoundError",
        "ProcessResult",
        "ProcessTimeout",
        "RemoteProcess",
        "Stream",
        "WebSocketTransport",
        "WriteRejected",
        "serve_websocket",
    },
    "policy": {
        "Action",
        "ApprovalPolicy",
        "ApprovalRequest",
        "Decision",
        "ParsedScript",
        "RULES",
        "Redirect",
        "RequestKind",
        "SimpleCommand",
        "UnparsableCommand",
        "check_paths",
        "evaluate_command",
        "parse_command",
        "parse_script",
    },
    "runner": {
        "BatchEntry",
        "BatchResult",
        "BatchTask",
        "EventSink",
        "Finding",
        "GateCheck",
        "GateConfig",
        "GateResult",
        "GitError",
        "PRIORITY_NAMES",
        "PROVIDER_NAMES",
        "ProviderEntry",
        "Redactor",
        "ReviewConfig",
        "ReviewResult",
        "ReviewTarget",
        "Source",
        "Task",
        "TaskCounters",
        "TaskEvent",
        "TaskResult",
        "TaskStatus",
        "TranscriptWriter",
        "check_provider",
        "event_record",
        "load_tasks",
        "make_provider",
        "parse_priority",
        "provider_entry",
        "register",
        "run_batch",
        "run_gate",
        "run_task",
        "validate_task",
    },
    "testing": {
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
    },
    "serve": {"Daemon", "ServeConfig", "default_state_dir", "is_loopback"},
    "remote": {"RemoteBatch", "RemoteHandle", "RemoteProvider"},
    "tools": {"Image", "Tool", "ToolOutput", "as_tools"},
    "user_input": {
        "NO_ONE_TO_ASK",
        "CannedAnswers",
        "InputAnswer",
        "InputHandler",
        "InputRequest",
        "Question",
        "default_answer",
        "input_notice",
    },
    "contract": {
        "Capabilities",
        "Finding",
        "Handle",
        "Mode",
        "ModelInfo",
        "PermissionConfig",
        "Provider",
        "ReviewResult",
        "ReviewTarget",
        "Sandbox",
        "SessionInfo",
        "Spec",
        "Untranslated",
    },
}


@pytest.mark.parametrize("name", sorted(SUBPACKAGES))
def test_subpackage_all_is_pinned(name: str) -> None:
    module = importlib.import_module(f"agent_fleet.{name}")
    assert set(module.__all__) == SUBPACKAGES[name]
    for attr in module.__all__:
        assert hasattr(module, attr), f"agent_fleet.{name}.{attr}"


def test_every_public_subpackage_is_pinned() -> None:
    root = Path(agent_fleet.__file__).parent
    packages = {p.parent.name for p in root.glob("*/__init__.py") if not p.parent.name.startswith("_")}
    assert packages - {"jsonrpc"} <= set(SUBPACKAGES)


def test_all_is_pinned() -> None:
    assert set(agent_fleet.__all__) == EXPECTED
    for name in agent_fleet.__all__:
        assert hasattr(agent_fleet, name), name


def test_every_error_has_one_root() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.AgentFleetError), name


def test_py_typed_ships() -> None:
    from importlib.resources import files

    assert files("agent_fleet").joinpath("py.typed").is_file()
