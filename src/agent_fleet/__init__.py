"""agent-fleet: run many coding agents (OpenAI Codex, Claude Code) behind one provider contract."""

from agent_fleet.contract import Capabilities, Handle, PermissionConfig, Provider, Spec
from agent_fleet.errors import (
    AgentFleetError,
    AuthenticationError,
    ConnectionClosed,
    ProviderUnavailable,
    RemoteProtocolError,
    RequestTimeout,
    RPCError,
    TransportError,
    TurnFailed,
    Unsupported,
    UsageError,
)
from agent_fleet.events import (
    AssistantMessage,
    Error,
    Event,
    Plan,
    PlanStep,
    Reasoning,
    Result,
    System,
    TextDelta,
    TokenUsage,
    ToolResult,
    ToolUse,
    UnknownEvent,
)
from agent_fleet.tools import Tool

__version__ = "0.1.0"

__all__ = [
    "AgentFleetError",
    "AssistantMessage",
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
]
