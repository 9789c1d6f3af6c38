#!/usr/bin/env python3
"""A synthetic ACP agent for benchmarks (stdlib only, built to be fast).

It answers ``initialize``, ``session/new`` and ``session/prompt``; a prompt
streams a configurable load and ends with ``stopReason: "end_turn"``:

- ``--chunks N`` ``agent_message_chunk`` updates of ``--size S`` characters;
- ``--tool-calls T`` ``tool_call`` + ``tool_call_update`` (completed) pairs;
- ``--tool-content C``: each finished call's content is a file of about C characters
  (Python source, ASCII; a file read as agents send it), not two lines;
- ``--terminals K`` terminal round trips (``terminal/create`` ``echo``,
  ``terminal/wait_for_exit``, ``terminal/output``, ``terminal/release``),
  each awaited, before the stream;
- ``--stamp``: each chunk's text starts with ``time.time_ns()`` (19 digits)
  taken just before the write, for latency measurements;
- ``--rate R``: pace chunks at R per second (one write per chunk), instead of
  writing as fast as the pipe takes them.

Lines are encoded once up front (unless stamped) and written in big batches
with ``os.write`` so the agent costs next to nothing beside the client.

``--dump FILE`` writes the exact bytes of the prompt's stream (updates and the
final response) to FILE and exits: the input of the floor benchmark.
``--raw`` writes the same bytes to stdout at once, with no handshake.

A prompt's text may override the load for that turn with ``key=value`` words
(``chunks``, ``size``, ``tool_calls``, ``tool_content``, ``terminals``, ``rate``) and the word
``stamp``, e.g. ``chunks=0`` (an empty turn) or ``chunks=10000 stamp
rate=2000``: one agent process (one kernel) serves several loads. Any other
prompt (``go``) streams the command line's load, encoded before the handshake.
An override's stream is encoded when first asked for and then cached.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

SESSION_ID = "bench-session-1"
BATCH = 1 << 16  # bytes per write


def _line(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _update(session_id: str, update: dict) -> dict:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}


def chunk_text(i: int, size: int) -> str:
    base = "lorem ipsum dolor sit amet, consectetur adipiscing elit "
    text = (base * (size // len(base) + 1))[:size]
    return text


def chunk_prefix_suffix(session_id: str) -> tuple[bytes, bytes]:
    """The bytes around a chunk's text, so a stamped line is one concatenation."""
    marker = "\x00MARK\x00"
    line = _line(_update(session_id, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": marker}}))
    enc_marker = json.dumps(marker)[1:-1].encode()
    pre, post = line.split(enc_marker)
    return pre, post


def chunk_lines(session_id: str, n: int, size: int, message_id: str | None = None) -> bytes:
    """``n`` chunks, each with ``message_id`` when given (claude-agent-acp stamps every chunk)."""
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": chunk_text(0, size)}}
    if message_id is not None:
        update["messageId"] = message_id
    return _line(_update(session_id, update)) * n


def file_text(chars: int) -> str:
    """About ``chars`` characters of Python source (ASCII: brackets, quotes, indents), ``@ID@``
    in its first line."""
    head = "# module @ID@: generated for the benchmark\n"
    body = "".join(f'def step_{i}(value):\n    return compute(value, [{i}, {i + 1}], {{"step": "{i}"}})  # {i}\n\n'
                   for i in range(chars // 70 + 1))
    return (head + body)[:max(chars, len(head))]


def tool_call_lines(session_id: str, n: int, content: int = 0) -> list[bytes]:
    """``n`` pairs, formatted from pre-encoded templates (no json.dumps per line); the finished
    call's content a file of about ``content`` characters (0: two lines)."""
    call = _line(_update(session_id, {
        "sessionUpdate": "tool_call",
        "toolCallId": "call_@ID@",
        "title": "Read src/module_@MOD@.py",
        "kind": "read",
        "status": "pending",
        "locations": [{"path": "/work/project/src/module_@MOD@.py", "line": 1}],
        "rawInput": {"path": "/work/project/src/module_@MOD@.py"},
    })).replace(b"%", b"%%").replace(b"@ID@", b"%(id)06d").replace(b"@MOD@", b"%(mod)d")
    done = _line(_update(session_id, {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_@ID@",
        "status": "completed",
        # Each call's own text, as a real agent's: the same text on every call let a
        # renderer's cache answer for all but 97 of them.
        "content": [{"type": "content", "content": {"type": "text", "text": file_text(content) if content
                                                    else "def main_@ID@():\n    return @ID@\n"}}],
        "rawOutput": {"lines": 2},
    })).replace(b"%", b"%%").replace(b"@ID@", b"%(id)06d")
    out = []
    for i in range(n):
        values = {b"id": i, b"mod": i % 97}
        out.append(call % values)
        out.append(done % values)
    return out


def step_lines(session_id: str, n: int) -> bytes:
    """``n`` steps of an ordinary agent turn: a short paragraph, then a tool call pair."""
    calls = tool_call_lines(session_id, n)
    out = []
    for i in range(n):
        out.append(_line(_update(session_id, {"sessionUpdate": "agent_message_chunk", "content": {
            "type": "text", "text": f"Step {i}: reading module {i % 97} to see what it does.\n\n"}})))
        out.append(calls[2 * i])
        out.append(calls[2 * i + 1])
    return b"".join(out)


def load_bytes(session_id: str, args: argparse.Namespace) -> bytes:
    """A load's updates: chunks, interleaved steps, then tool call pairs."""
    parts = [chunk_lines(session_id, args.chunks, args.size, "msg_01" if getattr(args, "message_id", False) else None)]
    if getattr(args, "steps", 0):
        parts.append(step_lines(session_id, args.steps))
    parts.extend(tool_call_lines(session_id, args.tool_calls, getattr(args, "tool_content", 0)))
    return b"".join(parts)


def stream_bytes(args: argparse.Namespace, session_id: str, rid: object) -> bytes:
    """Everything a prompt answers with (unstamped, unpaced)."""
    parts = [load_bytes(session_id, args)]
    parts.append(_line({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}))
    return b"".join(parts)


class Wire:
    def __init__(self) -> None:
        self.fd = sys.stdout.fileno()
        self.stdin = sys.stdin.buffer
        self.next_id = 0
        self.backlog: list[dict] = []  # client requests read while awaiting a response

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view[:BATCH] if len(view) > BATCH else view)
            view = view[n:]

    def send(self, obj: dict) -> None:
        self.write(_line(obj))

    def read(self) -> dict | None:
        if self.backlog:
            return self.backlog.pop(0)
        while True:
            line = self.stdin.readline()
            if not line:
                return None
            if line.strip():
                return json.loads(line)

    def call(self, method: str, params: dict) -> dict:
        """An agent->client request, awaited (client requests meanwhile are queued)."""
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            line = self.stdin.readline()
            if not line:
                raise SystemExit(0)
            msg = json.loads(line)
            if "method" not in msg and msg.get("id") == rid:
                if "error" in msg:
                    raise RuntimeError(f"{method} failed: {msg['error']}")
                return msg.get("result") or {}
            if "method" in msg and "id" in msg:
                self.backlog.append(msg)


def run_terminals(wire: Wire, session_id: str, k: int) -> None:
    for i in range(k):
        tid = f"term_{i}"
        wire.send(_update(session_id, {"sessionUpdate": "tool_call", "toolCallId": tid, "title": f"echo {i}",
                                       "kind": "execute", "status": "in_progress"}))
        term = wire.call("terminal/create", {"sessionId": session_id, "command": "echo",
                                             "args": [f"terminal {i}"], "outputByteLimit": 4096})["terminalId"]
        wire.call("terminal/wait_for_exit", {"sessionId": session_id, "terminalId": term})
        wire.call("terminal/output", {"sessionId": session_id, "terminalId": term})
        wire.call("terminal/release", {"sessionId": session_id, "terminalId": term})
        wire.send(_update(session_id, {"sessionUpdate": "tool_call_update", "toolCallId": tid, "status": "completed"}))


def stream(wire: Wire, args: argparse.Namespace, session_id: str, rid: object, body: bytes | None) -> None:
    if args.terminals:
        run_terminals(wire, session_id, args.terminals)
    if args.stamp or args.rate:
        pre, post = chunk_prefix_suffix(session_id)
        filler = chunk_text(0, max(0, args.size - 19)).encode()
        tail = filler + post
        n = args.chunks
        if args.rate:
            period = 1.0 / args.rate
            start = time.perf_counter()
            write, now_ns, perf, sleep = wire.write, time.time_ns, time.perf_counter, time.sleep
            for i in range(n):
                due = start + i * period
                delay = due - perf()
                if delay > 0:
                    sleep(delay)
                write(b"%s%019d%s" % (pre, now_ns(), tail))
        else:
            per_batch = max(1, BATCH // (len(pre) + len(tail) + 19))
            now_ns = time.time_ns
            for first in range(0, n, per_batch):
                count = min(per_batch, n - first)
                wire.write(b"".join([b"%s%019d%s" % (pre, now_ns(), tail) for _ in range(count)]))
        rest = b"".join(tool_call_lines(session_id, args.tool_calls, args.tool_content))
        wire.write(rest + _line({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}))
    elif body is not None and session_id == SESSION_ID:
        wire.write(body + _line({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}))
    else:
        wire.write(stream_bytes(args, session_id, rid))


OVERRIDES = {"chunks": int, "size": int, "tool_calls": int, "tool_content": int, "terminals": int, "rate": float,
             "steps": int}


def prompt_load(args: argparse.Namespace, params: dict) -> argparse.Namespace | None:
    """The load a prompt's ``key=value`` words ask for, or None (the default load)."""
    text = " ".join(b.get("text", "") for b in params.get("prompt") or [] if isinstance(b, dict))
    load = dict(vars(args))
    changed = False
    for word in text.split():
        key, eq, value = word.partition("=")
        key = key.replace("-", "_")
        if eq and key in OVERRIDES:
            load[key] = OVERRIDES[key](value)
            changed = True
        elif word == "stamp":
            load["stamp"] = changed = True
    return argparse.Namespace(**load) if changed else None


def serve(args: argparse.Namespace) -> int:
    wire = Wire()
    # Encoded before the handshake, so a prompt costs the agent only its writes.
    body = None
    if not (args.stamp or args.rate):
        body = load_bytes(SESSION_ID, args)
    bodies: dict[tuple, bytes] = {}  # override load -> its encoded stream (unstamped, unpaced)
    while True:
        msg = wire.read()
        if msg is None:
            return 0
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None or rid is None:
            continue  # a response or a notification (session/cancel): nothing to do
        if method == "initialize":
            wire.send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": False},
                "agentInfo": {"name": "synthetic-agent", "title": "Synthetic benchmark agent", "version": "1"},
                "authMethods": [],
            }})
        elif method == "session/new":
            wire.send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": SESSION_ID}})
        elif method == "session/prompt":
            load = prompt_load(args, params)
            if load is None:
                stream(wire, args, params.get("sessionId", SESSION_ID), rid, body)
            else:
                key = (load.chunks, load.size, load.tool_calls, load.tool_content, load.steps)
                cached = None
                if not (load.stamp or load.rate or load.terminals):
                    cached = bodies.get(key)
                    if cached is None:
                        cached = bodies[key] = load_bytes(SESSION_ID, load)
                stream(wire, load, params.get("sessionId", SESSION_ID), rid, cached)
        elif method == "authenticate":
            wire.send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            wire.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"method not found: {method}"}})


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chunks", type=int, default=100_000, help="agent_message_chunk updates per prompt")
    p.add_argument("--size", type=int, default=32, help="characters per chunk")
    p.add_argument("--tool-calls", type=int, default=0, help="tool_call + tool_call_update pairs per prompt")
    p.add_argument("--tool-content", type=int, default=0,
                   help="characters of each finished tool call's content: a file (0: two lines)")
    p.add_argument("--terminals", type=int, default=0, help="terminal round trips per prompt")
    p.add_argument("--steps", type=int, default=0, help="steps per prompt: a paragraph and a tool call pair each")
    p.add_argument("--stamp", action="store_true", help="start each chunk's text with time.time_ns()")
    p.add_argument("--message-id", action="store_true", help="a messageId on every chunk, as claude-agent-acp sends")
    p.add_argument("--rate", type=float, default=0.0, help="chunks per second (0 = as fast as possible)")
    p.add_argument("--dump", metavar="FILE", help="write the prompt's stream bytes to FILE and exit")
    p.add_argument("--raw", action="store_true", help="write the prompt's stream bytes to stdout and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dump or args.raw:
        data = stream_bytes(args, SESSION_ID, 2)
        if args.dump:
            with open(args.dump, "wb") as f:
                f.write(data)
        else:
            Wire().write(data)
        return 0
    try:
        return serve(args)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0


if __name__ == "__main__":
    sys.exit(main())
