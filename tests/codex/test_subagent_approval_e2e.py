"""A sub-agent's approvals, from the real codex binary (issue 16): its thread has no handle, its
requests reach the provider's fallback; they are judged by the session that spawned it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import Result, Spec, System, ToolResult, ToolUse
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.events import Event
from agent_fleet.testing import RecordedRequest, Reply, ScriptedModelServer, exec_command

pytestmark = pytest.mark.e2e  # runs the real binary

TASK = "SUBTASK: tidy the repository"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Items(Reply):
    """Raw output items: codex's multi-agent tools are found with ``tool_search`` and called in their
    namespace, item shapes the testing kit does not script."""

    raw: tuple[dict[str, Any], ...] = ()

    def sse_events(self) -> Iterator[dict[str, Any]]:
        yield {"type": "response.created", "response": {"id": "resp_raw"}}
        for item in self.raw:
            yield {"type": "response.output_item.done", "item": item}
        usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        yield {"type": "response.completed", "response": {"id": "resp_raw", "usage": usage}}


def _agent_tool(call_id: str, name: str, arguments: dict[str, Any]) -> Reply:
    item = {"type": "function_call", "call_id": call_id, "namespace": "multi_agent_v1", "name": name}
    return _Items(raw=({**item, "arguments": json.dumps(arguments)},))


def _outputs(request: RecordedRequest) -> list[dict[str, Any]]:
    return [i for i in request.input if str(i.get("type", "")).endswith("_output")]


def _responder(sub_refused: threading.Event) -> Callable[[RecordedRequest], Reply]:
    def respond(request: RecordedRequest) -> Reply:
        outputs = _outputs(request)
        if request.contains(TASK) and not request.contains("tool_search"):  # the sub-agent's own turn
            if not outputs:
                return Reply(items=(exec_command("echo sub-ran > proof.txt"),))
            if len(outputs) == 1:
                return Reply(items=(exec_command("git reset --hard"),))
            return Reply.text("sub-agent done")
        if not outputs:
            search = {
                "type": "tool_search_call",
                "call_id": "search-1",
                "execution": "client",
                "status": "completed",
            }
            return _Items(raw=({**search, "arguments": {"query": "spawn agent"}},))
        if len(outputs) == 1:
            return _agent_tool("spawn-1", "spawn_agent", {"message": TASK})
        if not sub_refused.is_set() and len(outputs) < 60:  # the parent waits until the refusal is seen
            agent = json.loads(str(outputs[1]["output"]))["agent_id"]
            return _agent_tool(f"wait-{len(outputs)}", "wait_agent", {"targets": [agent], "timeout_ms": 1000})
        return Reply.text("done")

    return respond


async def test_a_sub_agents_approvals_are_judged_by_its_session(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, staged_work: Path
) -> None:
    repo = staged_work
    sub_refused = threading.Event()
    scripted_model.responder = _responder(sub_refused)
    events: list[Event] = []
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="delegate", cwd=repo, sandbox="workspace-write"))
        async for event in handle.events():
            events.append(event)
            if isinstance(event, ToolResult) and event.synthetic and event.status == "cancel":
                sub_refused.set()

    assert (repo / "work.txt").read_text() == "uncommitted change\n"  # the sub-agent's reset never ran
    assert (repo / "proof.txt").read_text() == "sub-ran\n"  # its harmless command did
    uses = {e.id: e.input for e in events if isinstance(e, ToolUse) and e.synthetic}
    verdicts = [(uses[e.id], e.status) for e in events if isinstance(e, ToolResult) and e.id in uses]
    sub_thread = verdicts[0][0]["thread_id"]
    assert sub_thread and sub_thread != handle.session_id
    assert [(about["thread_id"], status) for about, status in verdicts] == [
        (sub_thread, "allow_once"),
        (sub_thread, "cancel"),
    ]
    denied = [e.data for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert [(d["rule"], d["thread_id"]) for d in denied] == [("git-reset-hard", sub_thread)]
    assert isinstance(events[-1], Result) and events[-1].text == "done"
