"""Error codes and retryability end to end: scripted API failures -> real codex -> ``Error`` events."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet import Error, Spec
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.testing import Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("reply", "code", "retryable"),
    [
        (Reply.http_error(400, "Invalid value for 'input'."), "bad_request", False),
        (Reply.http_error(401, "Incorrect API key provided"), "auth_failed", False),
        (Reply.http_error(404, "The model `gpt-x` does not exist"), "model_not_found", False),
        (Reply.rate_limited(1.0), "rate_limited", True),
        (Reply.http_error(500, "boom"), "server_error", True),
        (Reply.http_error(503, "overloaded"), "server_error", True),
        (Reply(failed=("server_error", "kaput")), "connection_failed", True),
        (Reply.context_window_exceeded(), "context_window_exceeded", False),
        (Reply.usage_limit_exceeded(), "usage_limit_exceeded", False),
    ],
    ids=["400", "401", "404", "429", "500", "503", "failed", "context", "usage"],
)
async def test_api_failures_map_to_codes(
    codex_options: CodexOptions,
    scripted_model: ScriptedModelServer,
    workspace: Path,
    reply: Reply,
    code: str,
    retryable: bool,
) -> None:
    scripted_model.enqueue(reply)
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="hi", cwd=workspace))
        events = [event async for event in handle.events()]
    terminal = events[-1]
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.retryable) == (code, retryable), terminal
