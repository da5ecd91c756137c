"""A minimal stdio MCP server (plain JSON-RPC lines) whose one tool asks its client for input.

``ask_colour`` sends ``elicitation/create`` (a form asking ``{"colour": str}``) and returns
``"<action>:<colour or ->"``, so a test can see in the tool's result what the client answered.
Hand-written rather than built on the ``mcp`` package so the wire is exactly what is shown here.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOL = {
    "name": "ask_colour",
    "description": "Ask the user for their favourite colour.",
    "inputSchema": {"type": "object", "properties": {}},
}
SCHEMA = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    pending: dict[str, Any] = {}  # our elicitation id -> the tools/call id waiting for it
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, mid = msg.get("method"), msg.get("id")
        if method is None and mid in pending:  # the client's answer to our elicitation
            result = msg.get("result") or {}
            content = result.get("content") or {}
            text = f"{result.get('action', 'error')}:{content.get('colour', '-')}"
            send(
                {
                    "jsonrpc": "2.0",
                    "id": pending.pop(mid),
                    "result": {"content": [{"type": "text", "text": text}]},
                }
            )
        elif method == "initialize":
            version = (msg.get("params") or {}).get("protocolVersion", "2025-06-18")
            info = {"name": "asker", "version": "1"}
            result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
            send({"jsonrpc": "2.0", "id": mid, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [TOOL]}})
        elif method == "tools/call":
            ask_id = f"elicit-{mid}"
            pending[ask_id] = mid
            params = {"mode": "form", "message": "Favourite colour?", "requestedSchema": SCHEMA}
            send({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create", "params": params})
        elif mid is not None and method is not None:
            send({"jsonrpc": "2.0", "id": mid, "result": {}})


if __name__ == "__main__":
    main()
