"""A scripted stand-in for `codex app-server` (run as a child process by the tests).

On each turn/start it sends the server requests listed in $FAKE_SCENARIO (JSON list of
{"method", "params"}; "threadId"/"conversationId" filled in unless "global" is true), waits for every
answer, then finishes the turn with an agent message whose text is the JSON list of the answers it received.
"""

import json
import os
import sys

scenario = json.loads(os.environ.get("FAKE_SCENARIO", "[]"))
flood = int(os.environ.get("FAKE_FLOOD", "0"))  # agent-message deltas sent at the start of each turn
silent = bool(os.environ.get("FAKE_SILENT"))  # start turns, then never send anything for them
threads = 0


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


turns = {}  # server-request id -> (thread id, turn id, next scenario index, answers)


def ask(tid, turn, n, answers):
    """Send scenario request n for this turn, or finish the turn when none is left."""
    if n == len(scenario):
        item = {"type": "agentMessage", "id": "m1", "text": json.dumps(answers)}
        send({"method": "item/completed", "params": {"threadId": tid, "turnId": turn, "item": item}})
        done = {"id": turn, "status": "completed", "items": []}
        send({"method": "turn/completed", "params": {"threadId": tid, "turn": done}})
        return
    req = scenario[n]
    p = dict(req["params"], threadId=tid, turnId=turn)
    if req.get("global"):  # a connection-wide request (e.g. auth refresh): no thread to route by
        p = dict(req["params"])
    if req["method"] in ("execCommandApproval", "applyPatchApproval"):
        p = dict(req["params"], conversationId=tid)
    if isinstance(p.get("command"), str):
        p["command"] = p["command"].replace("${CMD}", "slow" if tid == "thr-1" else "fast")
    rid = f"srv-{tid}-{n}" if n % 2 == 0 else 1000 * len(tid) + n
    turns[rid] = (tid, turn, n, answers)
    send({"id": rid, "method": req["method"], "params": p})


def main():
    global threads
    while True:
        msg = read()
        method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None:  # an answer to one of our server requests
            tid, turn, n, answers = turns.pop(mid)
            answers.append({"id": mid, **{k: msg[k] for k in ("result", "error") if k in msg}})
            ask(tid, turn, n + 1, answers)
        elif method == "initialize":
            send({"id": mid, "result": {"userAgent": "fake"}})
        elif method == "initialized":
            pass
        elif method in ("thread/start", "thread/resume"):
            threads += 1
            tid = params.get("threadId") or f"thr-{threads}"
            send({"id": mid, "result": {"thread": {"id": tid, "environments": [{"cwd": os.getcwd()}]}}})
        elif method == "turn/start":
            tid = params["threadId"]
            turn = f"turn-{tid}"
            send({"id": mid, "result": {"turn": {"id": turn, "status": "inProgress", "items": []}}})
            send({"method": "turn/started", "params": {"threadId": tid, "turn": {"id": turn}}})
            delta = {"threadId": tid, "turnId": turn, "itemId": "m1", "delta": "x"}
            for _ in range(flood):
                send({"method": "item/agentMessage/delta", "params": delta})
            if not silent:
                ask(tid, turn, 0, [])
        elif method == "model/list":
            if params.get("cursor"):
                send({"id": mid, "result": {"data": [{"id": "b"}], "nextCursor": None}})
            else:
                send({"id": mid, "result": {"data": [{"id": "a"}], "nextCursor": "c1"}})
        elif method == "config/batchWrite":
            send({"id": mid, "error": {"code": -32601, "message": "config/batchWrite not supported"}})
        elif mid is not None:
            send({"id": mid, "result": {}})


main()
