"""A scripted agent for runner tests: replies chosen by task, turn and step, not by arrival order.

Requests from many sessions interleave on one scripted model server, so a FIFO queue cannot drive them.
``ScriptedAgent`` reads each request instead: the task is the ``[task:<key>]`` tag in its first prompt,
the turn is how many prompts (first prompt + follow-ups) the session has sent, and the step is how
many tool outputs follow the latest prompt. Review requests (codex's review sub-agent) are answered
from ``reviews`` in order.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from agent_fleet.testing import CustomToolCall, FunctionCall, Item, RecordedRequest, Reply, Text

TAG = re.compile(r"\[task:([A-Za-z0-9_.-]+)\]")
USAGE = {"input_tokens": 100, "output_tokens": 20}


def run(cmd: str, *, escalate: bool = False) -> FunctionCall:
    """``exec_command`` without a login shell (a login shell's profile is slow on some machines)."""
    args: dict[str, Any] = {"cmd": cmd, "login": False}
    if escalate:
        args["sandbox_permissions"] = "require_escalated"
        args["justification"] = "write to .git to commit"
    return FunctionCall(name="exec_command", arguments=args)


def commit(message: str) -> FunctionCall:
    """Commit everything; escalated because workspace-write keeps .git read-only."""
    return run(f"git add -A && git commit -q -m '{message}'", escalate=True)


def write_file(path: str, content: str) -> CustomToolCall:
    body = "".join(f"+{line}\n" for line in content.splitlines())
    return CustomToolCall(
        name="apply_patch", input=f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"
    )


def is_review(request: RecordedRequest) -> bool:
    body = request.body if isinstance(request.body, dict) else {}
    meta = body.get("client_metadata")
    return isinstance(meta, dict) and meta.get("x-openai-subagent") == "review"


def review_json(*findings: tuple[int, str], explanation: str = "reviewed") -> str:
    """A review verdict in codex's output schema: ``(priority, title)`` per finding."""
    return json.dumps(
        {
            "findings": [
                {
                    "title": f"[P{p}] {title}",
                    "body": f"{title}: explained",
                    "confidence_score": 0.9,
                    "priority": p,
                    "code_location": {
                        "absolute_file_path": "/repo/x.txt",
                        "line_range": {"start": 1, "end": 1},
                    },
                }
                for p, title in findings
            ],
            "overall_correctness": "patch is incorrect" if findings else "patch is correct",
            "overall_explanation": explanation,
            "overall_confidence_score": 0.9,
        }
    )


def _prompts(request: RecordedRequest) -> list[int]:
    """Indexes of the user prompts in the request input (codex's context messages excluded)."""
    out = []
    for i, item in enumerate(request.input):
        if item.get("type") != "message" or item.get("role") != "user":
            continue
        content = item.get("content")
        texts = (
            [c.get("text", "") for c in content if isinstance(c, dict)] if isinstance(content, list) else []
        )
        # "[agent-fleet] ..." is the provider telling the agent a request was declined (the turn goes
        # on after a refusal codex only let us send as cancel): part of the same scripted turn.
        if any(t and not t.lstrip().startswith(("<", "[agent-fleet]")) for t in texts):
            out.append(i)
    return out


class ScriptedAgent:
    """``scripts[key][turn]`` is the list of items the agent emits, one reply per step, then "done".

    A ``Reply`` in place of an item is sent as it is (e.g. an HTTP error)."""

    def __init__(
        self,
        scripts: Mapping[str, Sequence[Sequence[Item | Reply]]],
        *,
        reviews: Sequence[str] = (),
    ) -> None:
        self.scripts = scripts
        self.reviews = list(reviews)
        self.review_requests: list[RecordedRequest] = []
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply | None:
        if is_review(request):
            with self._lock:
                self.review_requests.append(request)
                text = self.reviews.pop(0) if self.reviews else review_json()
            return Reply.text(text, usage=USAGE)
        prompts = _prompts(request)
        if not prompts:
            return None
        first = request.input[prompts[0]]
        match = TAG.search(json.dumps(first))
        if match is None:
            return None
        turns = self.scripts.get(match.group(1), ())
        turn = len(prompts) - 1
        step = sum(
            1
            for item in request.input[prompts[-1] :]
            if item.get("type") in ("function_call_output", "custom_tool_call_output")
        )
        items = list(turns[turn]) if turn < len(turns) else []
        if step < len(items):
            item = items[step]
            return item if isinstance(item, Reply) else Reply(items=(item,), usage=USAGE)
        return Reply(items=(Text(text=f"turn {turn + 1} done"),), usage=USAGE)
