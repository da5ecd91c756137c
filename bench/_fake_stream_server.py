"""A stand-in for ``codex app-server`` that floods one turn with agent-message deltas (for benchmarks).

Answers ``initialize``, ``thread/start`` and ``turn/start`` with responses shaped like codex 0.163.0's
(so typed clients validate them), then writes ``turn/started``, ``item/started``, ``$FAKE_DELTAS``
``item/agentMessage/delta`` notifications (default 200,000), ``item/completed`` and ``turn/completed``
to stdout as fast as the pipe takes them. The whole burst is rendered before ``initialize`` is
answered, so producing it costs nothing inside a client's measured window. Any other request gets
``{}``. Exits at EOF on stdin.

    python bench/_fake_stream_server.py [app-server ...ignored arguments]
"""

from __future__ import annotations

import json
import os
import sys

THREAD_ID = "01a201d3-206a-7072-b60b-44b1d9ddc332"
TURN_ID = "01a201d3-209a-7280-95af-51bcdf1f0a4d"
ITEM_ID = "msg_4"
CWD = os.getcwd()
EMITTED = 1795326944385

THREAD = {
    "id": THREAD_ID,
    "environments": [{"environmentId": "local", "cwd": CWD, "runtimeWorkspaceRoots": [CWD]}],
    "extra": None,
    "sessionId": THREAD_ID,
    "forkedFromId": None,
    "parentThreadId": None,
    "preview": "",
    "ephemeral": False,
    "section": None,
    "sectionEnteredAt": None,
    "projectId": None,
    "historyMode": "paginated",
    "modelProvider": "scripted",
    "model": "gpt-5.5",
    "reasoningEffort": None,
    "createdAt": 1795326943,
    "updatedAt": 1795326943,
    "recencyAt": 1795326943,
    "status": {"type": "idle"},
    "path": None,
    "cwd": CWD,
    "cliVersion": "0.163.0",
    "originator": "bench",
    "source": "vscode",
    "canAcceptDirectInput": True,
    "threadSource": None,
    "agentNickname": None,
    "agentRole": None,
    "gitInfo": None,
    "name": None,
    "daybreakEnabled": None,
    "turns": [],
}
THREAD_RESULT = {
    "thread": THREAD,
    "model": "gpt-5.5",
    "modelProvider": "scripted",
    "serviceTier": None,
    "disabledPluginIds": [],
    "cwd": CWD,
    "runtimeWorkspaceRoots": [CWD],
    "instructionSources": [],
    "approvalPolicy": "untrusted",
    "approvalsReviewer": "user",
    "sandbox": {"type": "readOnly", "networkAccess": False},
    "activePermissionProfile": {"id": ":read-only", "extends": None},
    "reasoningEffort": None,
    "multiAgentMode": "explicitRequestOnly",
}


def _turn(status: str, items: list[dict[str, object]]) -> dict[str, object]:
    return {
        "id": TURN_ID,
        "rootTurnId": TURN_ID,
        "items": items,
        "itemsView": "notLoaded" if status == "inProgress" else "summary",
        "status": status,
        "error": None,
        "startedAt": 1795326943,
        "completedAt": None if status == "inProgress" else 1795326944,
        "durationMs": None if status == "inProgress" else 1009,
    }


def _line(obj: dict[str, object]) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def _message(text: str) -> dict[str, object]:
    return {
        "type": "agentMessage",
        "id": ITEM_ID,
        "text": text,
        "phase": None,
        "memoryCitation": None,
        "delivery": None,
        "questions": None,
    }


def render_burst(n: int) -> bytes:
    """The turn's notifications, byte for byte what codex would print (delta text varies)."""
    scope = {"threadId": THREAD_ID, "turnId": TURN_ID}
    head = [
        _line({"method": "turn/started", "params": {"threadId": THREAD_ID, "turn": _turn("inProgress", [])}}),
        _line({"method": "item/started", "params": {"item": _message(""), **scope}}),
    ]
    # The exact line codex 0.163.0 writes for a delta (key order included), rendered cheaply.
    prefix = (
        f'{{"method":"item/agentMessage/delta","params":{{"threadId":"{THREAD_ID}","turnId":"{TURN_ID}",'
        f'"itemId":"{ITEM_ID}",'
    )
    deltas = [f'{prefix}"delta":"tok{i} "}},"emittedAtMs":{EMITTED + i // 64}}}\n'.encode() for i in range(n)]
    text = "".join(f"tok{i} " for i in range(n))
    tail = [
        _line({"method": "item/completed", "params": {"item": _message(text), **scope}}),
        _line(
            {
                "method": "turn/completed",
                "params": {"threadId": THREAD_ID, "turn": _turn("completed", [_message(text)])},
            }
        ),
    ]
    return b"".join(head + deltas + tail)


def main() -> None:
    burst = render_burst(int(os.environ.get("FAKE_DELTAS", "200000")))
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        msg = json.loads(raw)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            continue  # a notification (initialized) or an answer: nothing to do
        if method == "initialize":
            result: dict[str, object] = {
                "userAgent": "fake_stream_server/0.163.0 (bench)",
                "codexHome": CWD,
                "platformFamily": "unix",
                "platformOs": "linux",
            }
        elif method in ("thread/start", "thread/resume"):
            result = THREAD_RESULT
        elif method == "turn/start":
            result = {"turn": _turn("inProgress", [])}
        else:
            result = {}
        out.write(_line({"id": rid, "result": result}))
        if method == "turn/start":
            out.write(burst)
        out.flush()


if __name__ == "__main__":
    main()
