"""SSE framing (shared by both scripted servers) and builders for OpenAI Responses API events."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def encode_sse(events: Iterable[dict[str, Any]]) -> bytes:
    """Encode events as an SSE body: ``event: <type>`` then ``data: <json>`` and a blank line."""
    out: list[bytes] = []
    for event in events:
        out.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
    return b"".join(out)


def response_created(response_id: str) -> dict[str, Any]:
    return {"type": "response.created", "response": {"id": response_id}}


def response_completed(response_id: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    u = usage or {}
    inp, out = u.get("input_tokens", 0), u.get("output_tokens", 0)
    return {
        "type": "response.completed",
        "response": {
            "id": response_id,
            "usage": {
                "input_tokens": inp,
                "input_tokens_details": {"cached_tokens": u.get("cached_tokens", 0)},
                "output_tokens": out,
                "output_tokens_details": {"reasoning_tokens": u.get("reasoning_tokens", 0)},
                "total_tokens": inp + out,
            },
        },
    }


def response_failed(response_id: str, code: str, message: str) -> dict[str, Any]:
    return {
        "type": "response.failed",
        "response": {"id": response_id, "error": {"code": code, "message": message}},
    }


def message_added(item_id: str) -> dict[str, Any]:
    return {
        "type": "response.output_item.added",
        "item": {"type": "message", "role": "assistant", "id": item_id, "content": []},
    }


def text_delta(item_id: str, delta: str) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "item_id": item_id,
        "output_index": 0,
        "content_index": 0,
        "delta": delta,
    }


def message_done(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "response.output_item.done",
        "item": {
            "type": "message",
            "role": "assistant",
            "id": item_id,
            "content": [{"type": "output_text", "text": text}],
        },
    }


def function_call_done(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "type": "response.output_item.done",
        "item": {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments},
    }


def custom_tool_call_done(call_id: str, name: str, input_text: str) -> dict[str, Any]:
    return {
        "type": "response.output_item.done",
        "item": {"type": "custom_tool_call", "call_id": call_id, "name": name, "input": input_text},
    }


def reasoning_added(item_id: str) -> dict[str, Any]:
    return {
        "type": "response.output_item.added",
        "item": {"type": "reasoning", "id": item_id, "summary": []},
    }


def reasoning_done(item_id: str, summary: str) -> dict[str, Any]:
    return {
        "type": "response.output_item.done",
        "item": {
            "type": "reasoning",
            "id": item_id,
            "summary": [{"type": "summary_text", "text": summary}],
        },
    }
