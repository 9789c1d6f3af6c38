"""A small ACP agent that writes down every request it gets, for resume tests.

Stdlib only. Usage: ``python recording_agent.py LOG [CAPS]`` where LOG is a
file that gets one JSON line ``{"pid", "method", "params"}`` per request, and
CAPS is ``resume`` (default: advertises ``session/resume`` and
``loadSession``) or ``none`` (advertises neither: sessions cannot be reopened).
A prompt is answered with one chunk naming the session and its directory.
"""

from __future__ import annotations

import json
import os
import sys
import uuid


def main() -> None:
    log_path = sys.argv[1]
    caps = sys.argv[2] if len(sys.argv) > 2 else "resume"
    sessions: dict[str, str] = {}

    def send(msg: dict) -> None:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, params, rid = msg.get("method"), msg.get("params") or {}, msg.get("id")
        if method is None or rid is None:
            continue  # responses and notifications (session/cancel)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"pid": os.getpid(), "method": method, "params": params}) + "\n")
        if method == "initialize":
            agent_caps = ({"loadSession": True, "sessionCapabilities": {"resume": {}, "list": {}}}
                          if caps == "resume" else {})
            result = {"protocolVersion": 1, "agentCapabilities": agent_caps,
                      "agentInfo": {"name": "recording", "version": "1"}, "authMethods": []}
        elif method == "session/new":
            sid = "rec-" + uuid.uuid4().hex[:8]
            sessions[sid] = params.get("cwd", "")
            result = {"sessionId": sid}
        elif method in ("session/resume", "session/load"):
            sessions[params.get("sessionId")] = params.get("cwd", "")
            result = {}
        elif method == "session/list":
            result = {"sessions": [{"sessionId": s, "cwd": c} for s, c in sessions.items()]}
        elif method == "session/prompt":
            sid = params.get("sessionId")
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": f"recorded {sid} in {sessions.get(sid)}"}}}})
            result = {"stopReason": "end_turn"}
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})
            continue
        send({"jsonrpc": "2.0", "id": rid, "result": result})


if __name__ == "__main__":
    main()
