"""A scripted stand-in for `codex app-server` (run as a child process by the tests).

On each turn/start it sends the server requests listed in $FAKE_SCENARIO (JSON list of
{"method", "params"}; "threadId"/"conversationId" filled in unless "global" is true), waits for every
answer, then finishes the turn with an agent message whose text is the JSON list of the answers it received.
An entry with "notify": true is sent as a notification (no answer awaited, none listed); "thread": ID
sends it for another thread (a sub-agent's); "raw": true sends its params as given (no ids added);
"only": ID skips it on every thread but that one.
"""

import json
import os
import sys

scenario = json.loads(os.environ.get("FAKE_SCENARIO", "[]"))
# Turns after a thread's first use $FAKE_LATER_SCENARIO when set; with $FAKE_INTERRUPT_ON_CANCEL a
# "cancel" answer interrupts the turn (turn/completed, status interrupted), as codex does.
later = json.loads(os.environ["FAKE_LATER_SCENARIO"]) if "FAKE_LATER_SCENARIO" in os.environ else None
interrupt_on_cancel = bool(os.environ.get("FAKE_INTERRUPT_ON_CANCEL"))
flood = int(os.environ.get("FAKE_FLOOD", "0"))  # agent-message deltas sent at the start of each turn
notices = os.environ.get("FAKE_NOTICES") == "1"  # connection-wide and between-turn notices too
silent = bool(os.environ.get("FAKE_SILENT"))  # start turns, then never send anything for them
# refuse this many of each of thread/start and turn/start with -32001, as an overloaded codex does
overload = {"thread/start": int(os.environ.get("FAKE_OVERLOAD", "0"))}
overload["turn/start"] = overload["thread/start"]
threads = 0


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)


turns_started = {}  # thread id -> turns started
turns = {}  # server-request id -> (thread id, turn id, next scenario index, answers)


def ask(tid, turn, n, answers, scenario):
    """Send scenario request n for this turn, or finish the turn when none is left."""
    if n == len(scenario):
        item = {"type": "agentMessage", "id": "m1", "text": json.dumps(answers)}
        send({"method": "item/completed", "params": {"threadId": tid, "turnId": turn, "item": item}})
        if notices:  # the session's token total grows by 50 a turn
            total = {"totalTokens": 50 * turns_started[tid], "inputTokens": 50 * turns_started[tid]}
            usage = {"threadId": tid, "turnId": turn, "tokenUsage": {"total": total, "last": {}}}
            send({"method": "thread/tokenUsage/updated", "params": usage})
        done = {"id": turn, "status": "completed", "items": []}
        send({"method": "turn/completed", "params": {"threadId": tid, "turn": done}})
        if notices:  # between turns: kept for the thread's next turn; a late item of this one is not
            send({"method": "thread/name/updated", "params": {"threadId": tid, "threadName": "named"}})
            late = {"type": "agentMessage", "id": "m2", "text": "late"}
            send({"method": "item/completed", "params": {"threadId": tid, "turnId": turn, "item": late}})
        return
    req = scenario[n]
    if req.get("only") not in (None, tid):
        ask(tid, turn, n + 1, answers, scenario)
        return
    p = dict(req["params"], threadId=req.get("thread", tid), turnId=turn)
    if req.get("raw"):
        p = dict(req["params"])
    if req.get("notify"):  # a notification (e.g. item/started), sent without waiting for anything
        send({"method": req["method"], "params": p})
        ask(tid, turn, n + 1, answers, scenario)
        return
    if req.get("global"):  # a connection-wide request (e.g. auth refresh): no thread to route by
        p = dict(req["params"])
    if req["method"] in ("execCommandApproval", "applyPatchApproval"):
        p = dict(req["params"], conversationId=req.get("thread", tid))
    if isinstance(p.get("command"), str):
        p["command"] = p["command"].replace("${CMD}", "slow" if tid == "thr-1" else "fast")
    rid = f"srv-{tid}-{n}" if n % 2 == 0 else 1000 * len(tid) + n
    turns[rid] = (tid, turn, n, answers, scenario)
    send({"id": rid, "method": req["method"], "params": p})


logged_in = None  # the account the fake "stores" (account/login/start, account/logout)


def account(method, mid, params):
    """account/*: an API key is stored as given; a device-code login completes at once unless
    $FAKE_LOGIN_FAIL, with a ChatGPT account (me@example.com, plus)."""
    global logged_in
    if method == "account/read":
        send({"id": mid, "result": {"account": logged_in, "requiresOpenaiAuth": True}})
    elif method == "account/logout":
        logged_in = None
        send({"id": mid, "result": {}})
    elif method == "account/login/cancel":
        send({"id": mid, "result": {"status": "canceled"}})
    elif params.get("type") == "apiKey":
        logged_in = {"type": "apiKey"}
        send({"id": mid, "result": {"type": "apiKey"}})
    elif params.get("type") == "chatgptDeviceCode":
        code = {"type": "chatgptDeviceCode", "loginId": "login-1", "userCode": "ABCD-1234"}
        send({"id": mid, "result": {**code, "verificationUrl": "https://example.invalid/device"}})
        if os.environ.get("FAKE_LOGIN_FAIL"):
            done = {"loginId": "login-1", "success": False, "error": "denied by the user"}
        else:
            logged_in = {"type": "chatgpt", "email": "me@example.com", "planType": "plus"}
            done = {"loginId": "login-1", "success": True, "error": None}
        send({"method": "account/login/completed", "params": done})
    else:
        send({"id": mid, "error": {"code": -32600, "message": f"unsupported login {params.get('type')}"}})


def main():
    global threads
    while True:
        msg = read()
        method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if overload.get(method, 0) > 0:
            overload[method] -= 1
            send({"id": mid, "error": {"code": -32001, "message": "Server overloaded; retry later."}})
            continue
        if method is None:  # an answer to one of our server requests
            tid, turn, n, answers, script = turns.pop(mid)
            answers.append({"id": mid, **{k: msg[k] for k in ("result", "error") if k in msg}})
            if interrupt_on_cancel and (msg.get("result") or {}).get("decision") == "cancel":
                done = {"id": turn, "status": "interrupted", "items": []}
                send({"method": "turn/completed", "params": {"threadId": tid, "turn": done}})
                continue
            ask(tid, turn, n + 1, answers, script)
        elif method == "initialize":
            agent = f"agent-fleet/{os.environ.get('FAKE_VERSION', '0.163.0')} (fake)"
            send({"id": mid, "result": {"userAgent": agent}})
            if notices:  # before any session: only the provider's notice stream has it
                send({"method": "configWarning", "params": {"summary": "no bubblewrap", "details": None}})
        elif method == "initialized":
            pass
        elif method.startswith("account/"):
            account(method, mid, params)
        elif method in ("thread/start", "thread/resume"):
            threads += 1
            tid = params.get("threadId") or f"thr-{threads}"
            send({"id": mid, "result": {"thread": {"id": tid, "environments": [{"cwd": os.getcwd()}]}}})
            if notices:  # may reach the provider before the handle subscribes
                status = {"threadId": tid, "name": "docs", "status": "ready", "error": None}
                send({"method": "mcpServer/startupStatus/updated", "params": status})
        elif method == "turn/start":
            tid = params["threadId"]
            turns_started[tid] = turns_started.get(tid, 0) + 1
            turn = f"turn-{tid}" + (f"-{turns_started[tid]}" if turns_started[tid] > 1 else "")
            script = later if turns_started[tid] > 1 and later is not None else scenario
            send({"id": mid, "result": {"turn": {"id": turn, "status": "inProgress", "items": []}}})
            send({"method": "turn/started", "params": {"threadId": tid, "turn": {"id": turn}}})
            if notices:
                window = {"usedPercent": 95, "resetsAt": 1700000000, "windowDurationMins": 300}
                send({"method": "account/rateLimits/updated", "params": {"rateLimits": {"primary": window}}})
            delta = {"threadId": tid, "turnId": turn, "itemId": "m1", "delta": "x"}
            for _ in range(flood):
                send({"method": "item/agentMessage/delta", "params": delta})
            if not silent:
                ask(tid, turn, 0, [], script)
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
