"""``Spec.tools`` on Claude Code: the same ``Tool`` definitions served by claude-agent-sdk's in-process
MCP server (``create_sdk_mcp_server``), one per session.

Claude sees them as ``mcp__agent_fleet__<name>``; agent-fleet reports them by their plain name (as the
codex provider does) and the approval policy decides them as ``kind="tool"`` requests. The SDK checks
the arguments against the schema first; ``Tool.call`` then converts them, runs the function and turns
its result (or its exception) into MCP content: text parts and base64 image parts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from claude_agent_sdk import SdkMcpTool, create_sdk_mcp_server

from agent_fleet import __version__
from agent_fleet.claude.translate import TOOLS_SERVER
from agent_fleet.tools import Image, Tool, ToolOutput

#: The MCP server name of a session's tools (``Spec.mcp_servers`` may not use it).
SERVER: Final = TOOLS_SERVER


def mcp_content(output: ToolOutput) -> dict[str, Any]:
    """A ``ToolOutput`` as the SDK tool handler's result."""
    content: list[dict[str, Any]] = []
    for part in output.content:
        if isinstance(part, Image):
            content.append({"type": "image", "data": part.base64(), "mimeType": part.mime_type})
        else:
            content.append({"type": "text", "text": part})
    return {"content": content, "is_error": output.is_error}


def _handler(tool: Tool) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    async def handle(arguments: dict[str, Any]) -> dict[str, Any]:
        return mcp_content(await tool.call(arguments))

    return handle


def sdk_server(tools: Sequence[Tool]) -> dict[str, Any]:
    """The in-process MCP server that serves ``tools``.

    ``alwaysLoad``: Claude Code otherwise defers MCP tools behind its tool search, and the model would
    have to look them up before it could call them; the caller gave these tools for this task.
    """
    config = create_sdk_mcp_server(
        name=SERVER,
        version=__version__,
        tools=[
            SdkMcpTool(
                name=tool.name,
                description=tool.description,
                input_schema=tool.input_schema,
                handler=_handler(tool),
            )
            for tool in tools
        ],
    )
    return {**config, "alwaysLoad": True}
