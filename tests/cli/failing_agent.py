"""An agent that fails at a chosen request, for the start-up failure tests.

Stdlib only. Usage: ``python failing_agent.py '<scenario JSON>'`` with keys:
  at      the method to fail at ("initialize" or "session/new"); earlier
          requests are answered normally
  stderr  text written to stderr (flushed) when that request arrives
  error   answer it with this JSON-RPC error object, or
  exit    exit with this status without answering
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    scenario = json.loads(sys.argv[1])
    for raw in sys.stdin.buffer:
        msg = json.loads(raw)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            continue
        if method == scenario["at"]:
            if scenario.get("stderr"):
                sys.stderr.write(scenario["stderr"] + "\n")
                sys.stderr.flush()
            if "exit" in scenario:
                return int(scenario["exit"])
            reply = {"jsonrpc": "2.0", "id": rid, "error": scenario["error"]}
        elif method == "initialize":
            reply = {"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1, "agentCapabilities": {}}}
        elif method == "session/new":
            reply = {"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "s1"}}
        else:
            reply = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "not here"}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
