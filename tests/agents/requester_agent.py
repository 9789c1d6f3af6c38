"""A scripted test agent: sends agent->client requests from a JSON script.

Usage: ``python requester_agent.py script.json`` (stdlib only).

The script is ``{"steps": [...]}``; each step is one of

- ``{"send": method, "params": {...}, "key": name, "id": optional id}``:
  send a request (ids count from 0 unless given; strings allowed). Strings
  in params of the form ``"${key.field}"`` are replaced by that field of an
  earlier response's result (waiting for it).
- ``{"notify": method, "params": {...}}``: send a notification.
- ``{"await": key}``: wait until the response for ``key`` has arrived.
- ``{"wait_go": name}``: wait for the client's notification
  ``_test/go {"name": name}``.

Every response is reported as it arrives with the notification
``_test/response {"key", "response"}``; when the script ends,
``_test/done`` is sent and the agent stays until its stdin closes.
"""

from __future__ import annotations

import json
import re
import sys
import threading

_lock = threading.Lock()
_cond = threading.Condition(_lock)
_responses: dict[str, dict] = {}
_ids: dict[object, str] = {}
_go: set[str] = set()
_eof = False


def send(msg: dict) -> None:
    line = json.dumps(msg, ensure_ascii=False) + "\n"
    with _lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def reader() -> None:
    global _eof
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        if "method" in msg and "id" in msg:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}})
        elif "method" in msg:
            if msg["method"] == "_test/go":
                with _cond:
                    _go.add(msg["params"]["name"])
                    _cond.notify_all()
        else:
            with _cond:
                key = _ids.get(json.dumps(msg.get("id")))
                if key is not None:
                    _responses[key] = msg
                    _cond.notify_all()
            if key is not None:
                send({"jsonrpc": "2.0", "method": "_test/response", "params": {"key": key, "response": msg}})
    with _cond:
        _eof = True
        _cond.notify_all()


def wait_for(pred) -> None:
    with _cond:
        while not pred():
            if _eof:
                sys.exit(0)
            _cond.wait()


_REF = re.compile(r"^\$\{(\w+)\.(\w+)\}$")


def substitute(value):
    if isinstance(value, str):
        m = _REF.match(value)
        if m:
            key, field = m.groups()
            wait_for(lambda: key in _responses)
            return _responses[key]["result"][field]
        return value
    if isinstance(value, dict):
        return {k: substitute(v) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v) for v in value]
    return value


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        script = json.load(f)
    threading.Thread(target=reader, daemon=True).start()
    next_id = 0
    for step in script["steps"]:
        if "send" in step:
            rid = step.get("id", next_id)
            if "id" not in step:
                next_id += 1
            params = substitute(step.get("params"))
            with _cond:
                _ids[json.dumps(rid)] = step["key"]
            send({"jsonrpc": "2.0", "id": rid, "method": step["send"], "params": params})
        elif "notify" in step:
            send({"jsonrpc": "2.0", "method": step["notify"], "params": substitute(step.get("params"))})
        elif "await" in step:
            key = step["await"]
            wait_for(lambda key=key: key in _responses)
        elif "wait_go" in step:
            name = step["wait_go"]
            wait_for(lambda name=name: name in _go)
    send({"jsonrpc": "2.0", "method": "_test/done", "params": {}})
    wait_for(lambda: False)


if __name__ == "__main__":
    main()
