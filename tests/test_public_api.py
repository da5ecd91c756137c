"""The public surface is pinned: adding or removing a name is a deliberate change to this list."""

from __future__ import annotations

import agent_fleet
from agent_fleet import errors

EXPECTED = {
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
    "ToolResult",
    "ToolUse",
    "TransportError",
    "TurnFailed",
    "UnknownEvent",
    "Unsupported",
    "UsageError",
    "__version__",
}


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
