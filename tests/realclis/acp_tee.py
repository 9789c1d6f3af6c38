"""A transparent stdio proxy in front of an ACP agent that logs the permission traffic.

    python acp_tee.py LOG -- AGENT [ARGS ...]

Every line passes through unchanged (kernel -> agent on stdin, agent -> kernel on
stdout; stderr is the agent's own). Appended to LOG as JSON lines: each agent message
that is a ``session/request_permission`` or ``terminal/create`` request, the ``initialize`` answer (its
``agentInfo``), or a ``session/update`` about a tool
call (``tool_call``, ``tool_call_update``), and each kernel message that answers one of
those requests; ``{"dir": "agent"|"client", "msg": ...}``. Used by
notebook_mcp_real.py's ask mode to record the shape of each agent's question.

Standard library only; the agent dies with this process (PR_SET_PDEATHSIG) and gets a
SIGTERM/SIGINT this process gets.
"""

from __future__ import annotations

import ctypes
import json
import signal
import subprocess
import sys
import threading

TOOL_UPDATES = ("tool_call", "tool_call_update")
MAX_LINE = 200_000


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: acp_tee.py LOG -- AGENT [ARGS ...]", file=sys.stderr)
        return 2
    log_path, command = argv[0], argv[2:]
    log = open(log_path, "a", encoding="utf-8")
    lock = threading.Lock()
    asked: set = set()  # ids of the agent's permission requests

    def record(direction: str, line: bytes) -> None:
        if len(line) > MAX_LINE:
            return
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        keep = False
        if direction == "agent":
            if msg.get("method") == "session/request_permission":
                asked.add(json.dumps(msg.get("id")))
                keep = True
            elif msg.get("method") == "session/update":
                update = (msg.get("params") or {}).get("update") or {}
                keep = update.get("sessionUpdate") in TOOL_UPDATES
            elif msg.get("method") == "terminal/create":
                keep = True  # the command the agent runs (and the environment it adds)
            elif isinstance(msg.get("result"), dict) and "agentInfo" in msg["result"]:
                keep = True  # the answer to initialize: who the agent is
        elif "method" not in msg and json.dumps(msg.get("id")) in asked:
            keep = True
        if keep:
            with lock:
                log.write(json.dumps({"dir": direction, "msg": msg}) + "\n")
                log.flush()

    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=_die_with_parent)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))

    def to_agent() -> None:
        assert child.stdin is not None
        try:
            for line in sys.stdin.buffer:
                record("client", line)
                child.stdin.write(line)
                child.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                child.stdin.close()
            except OSError:
                pass

    threading.Thread(target=to_agent, daemon=True).start()
    assert child.stdout is not None
    out = sys.stdout.buffer
    try:
        for line in child.stdout:
            out.write(line)
            out.flush()
            record("agent", line)
    except (BrokenPipeError, OSError):
        child.kill()
    return child.wait()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
