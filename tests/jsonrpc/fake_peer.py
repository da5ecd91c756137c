"""A scripted JSON-RPC peer on stdin/stdout, run as ``python fake_peer.py '<json script>'``.

The script is a JSON list of steps, run in order:

- ``["recv"]``           read one JSONL message from stdin (exit 0 at EOF) and remember it
- ``["send", obj]``      write ``obj`` as one line; an ``"id": "$id"`` is replaced by the last received id
- ``["raw", text]``      write ``text`` verbatim (for malformed input)
- ``["report"]``         send ``{"method": "report", "params": {"received": [...]}}`` with all received
- ``["sleep", seconds]``
- ``["close_stdin"]``    close our stdin so the other side's writes fail with EPIPE
- ``["echo"]``           answer every request with ``{"echo": params}`` until EOF
- ``["exit", code]``     exit immediately (stdout is flushed first)

After the last step the peer reads stdin until EOF and exits 0. Only the standard library is used.
"""

import json
import os
import sys
import time


def main() -> None:
    script = json.loads(sys.argv[1])
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    received: list[object] = []
    last_id: object = None
    stdin_open = True

    def write(obj: object) -> None:
        stdout.write(json.dumps(obj).encode() + b"\n")
        stdout.flush()

    for step in script:
        op = step[0]
        if op == "recv":
            line = stdin.readline()
            if not line:
                sys.exit(0)
            msg = json.loads(line)
            received.append(msg)
            last_id = msg.get("id")
        elif op == "send":
            obj = dict(step[1])
            if obj.get("id") == "$id":
                obj["id"] = last_id
            write(obj)
        elif op == "raw":
            stdout.write(step[1].encode())
            stdout.flush()
        elif op == "report":
            write({"method": "report", "params": {"received": received}})
        elif op == "sleep":
            time.sleep(step[1])
        elif op == "close_stdin":
            os.close(0)
            stdin_open = False
        elif op == "echo":
            for line in stdin:
                msg = json.loads(line)
                if "id" in msg and "method" in msg:
                    write({"id": msg["id"], "result": {"echo": msg.get("params")}})
        elif op == "exit":
            stdout.flush()
            os._exit(step[1])
        else:
            raise SystemExit(f"unknown step {step!r}")
    if stdin_open:
        for _ in stdin:
            pass


if __name__ == "__main__":
    main()
