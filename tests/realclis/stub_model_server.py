"""A stub model server on 127.0.0.1 for the real agent CLIs (issue 12).

It speaks just enough of the APIs that Claude Code, Codex, Gemini CLI, pi,
kimi-cli and OpenCode call, streaming included, so that each CLI can be run
under a PTY without network or an account:

- Anthropic Messages: ``POST .../messages`` (SSE when ``stream``), ``.../messages/count_tokens``
- OpenAI Chat Completions: ``POST .../chat/completions`` (SSE chunks + ``[DONE]``)
- OpenAI Responses: ``POST .../responses`` (Codex's event stream)
- Gemini: ``POST .../models/M:streamGenerateContent?alt=sse``, ``:generateContent``, ``:countTokens``
- model lists: ``GET .../models`` (OpenAI and Anthropic shape), ``GET .../v1beta/models`` (Gemini shape)

Replies are scripted from the last user text of the request:

- default: ``stub reply to: <last user text>`` streamed in a few chunks;
- the prompt contains ``SLOW``: about 20 s of chunks (for interrupt tests);
- the prompt contains ``THINK``: silent about 8 s, then the reply (a long "thinking" phase);
- the prompt contains ``TOOL:<name> <json-args>`` (e.g. ``TOOL:variables {}``) and the request
  offers a tool whose name is ``<name>`` or ends with it (``mcp__notebook__variables``,
  ``notebook_variables``...): a call of that tool, in the API's own shape (Anthropic ``tool_use``,
  OpenAI chat ``tool_calls``, Responses ``function_call`` (with ``namespace`` for a tool of a
  Responses ``namespace`` entry), Gemini ``functionCall``);
- the request's last message is a tool result: ``tool result: <its first 200 characters>``
  (whitespace runs made one space), so the CLI shows what the tool returned;
- the ``TOOL:`` tool is not offered yet but Claude Code's ``WaitForMcpServers`` is (its MCP
  servers are still connecting): a call of that first, then, on its ``ready: ...`` result, the
  call of the wanted tool, as a model does;
- several ``TOOL:`` markers in one prompt are a chain: the first is called, and each tool result
  of the turn (Claude Code's waits not counted) is answered with the call of the next marker,
  the last one's result quoted as above. A ``{{cell N}}`` in a later marker's arguments becomes
  the id of cell N as the latest ``cells`` result of the conversation named it
  (``## Cell N: code, id "..."``), so a chain learns cell ids the way a model does.

Every request is logged as one JSON line (method, path, headers without secrets,
body size, the prompt it answered, the mode) to the log file, for diagnosis.

Run by hand: ``python tests/realclis/stub_model_server.py [--port N] [--log FILE]``;
it prints ``listening http://127.0.0.1:PORT`` and serves until Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import re
import select
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator, Optional
from urllib.parse import urlsplit

SECRET_HEADERS = {"authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie", "proxy-authorization"}
MODELS = ("stub-model", "claude-sonnet-4-5", "claude-haiku-4-5", "gpt-5", "gpt-5-codex", "gemini-2.5-pro",
          "gemini-2.5-flash", "kimi-k2")
SLOW_SECONDS = 20.0
THINK_SECONDS = 8.0
# Markers a CLI adds around the user's words; the scripted reply quotes the words only.
_REMINDER = re.compile(r"<(system-reminder|environment_context|user_instructions|context)>.*?</\1>", re.S)


# -- pure logic: what to answer -------------------------------------------------------


@dataclass(frozen=True)
class Script:
    """What to send for one request: the text, its chunks, and the pacing."""

    prompt: str
    mode: str  # "echo", "slow", "think", "json", "tool_call", "tool_result", "no_tool"
    chunks: tuple[str, ...]
    first_delay: float
    chunk_delay: float
    call: Optional["ToolCall"] = None  # mode "tool_call": what to call instead of the text

    @property
    def text(self) -> str:
        return "".join(self.chunks)


@dataclass(frozen=True)
class ToolCall:
    """A tool call the stub makes: the tool's name as the CLI offered it, and its arguments."""

    id: str
    name: str
    args: dict[str, Any]
    namespace: Optional[str] = None  # Responses "namespace" tools (Codex groups an MCP server's tools)

    @property
    def arguments(self) -> str:
        return json.dumps(self.args)


_TOOL_MARKER = re.compile(r"TOOL:([A-Za-z0-9_.:/-]+)")
RESULT_QUOTE = 200
RESULT_LOG = 20_000  # the log keeps this much of each tool result the model got back
_SEPARATORS = ("", "_", "-", ".", "/", ":")  # what may precede a matched suffix (a whole name part)


def tool_markers(prompt: str) -> list[tuple[str, dict[str, Any]]]:
    """Every ``TOOL:<name> <json-args>`` in a prompt, in order: (name, args); args ``{}`` when
    absent or not JSON. A marker's JSON arguments are skipped whole (a ``TOOL:`` inside them is
    data, not a marker)."""
    found: list[tuple[str, dict[str, Any]]] = []
    pos = 0
    while (m := _TOOL_MARKER.search(prompt, pos)) is not None:
        pos = m.end()
        rest = prompt[pos:]
        stripped = rest.lstrip()
        args: Any = {}
        if stripped.startswith("{"):
            try:
                args, end = json.JSONDecoder().raw_decode(stripped)
                pos += len(rest) - len(stripped) + end
            except ValueError:
                args = {}
        found.append((m.group(1), args if isinstance(args, dict) else {}))
    return found


def tool_marker(prompt: str) -> Optional[tuple[str, dict[str, Any]]]:
    """The first ``TOOL:<name> <json-args>`` of a prompt (see :func:`tool_markers`)."""
    markers = tool_markers(prompt)
    return markers[0] if markers else None


#: ``{{cell N}}`` in a chained marker's arguments; a ``cells`` result's heading of cell N (its
#: id a JSON string; inside Codex's verbatim content JSON the quotes come escaped).
_CELL_REF = re.compile(r"\{\{cell (\d+)\}\}")
_CELL_HEADING = r'## Cell {n}: [a-z]+(?:, execution count \d+)?, id \\?"([A-Za-z0-9_-]{{1,64}})\\?"'


def cell_id_in(results: list[str], n: int) -> Optional[str]:
    """The id of cell ``n`` as the latest result that names it says."""
    pattern = re.compile(_CELL_HEADING.format(n=n))
    for text in reversed(results):
        m = pattern.search(text)
        if m:
            return m.group(1)
    return None


def fill_cells(value: Any, results: list[str]) -> Any:
    """``value`` with each ``{{cell N}}`` in its strings replaced by that cell's id (left as is
    when no result names cell N)."""
    if isinstance(value, str):
        return _CELL_REF.sub(lambda m: cell_id_in(results, int(m.group(1))) or m.group(0), value)
    if isinstance(value, dict):
        return {k: fill_cells(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_cells(v, results) for v in value]
    return value


def match_tool(wanted: str, offered: list[str]) -> Optional[str]:
    """The offered tool ``wanted`` means: the same name, else one ending with it, else one ending
    with its last part (``mcp__notebook__variables`` finds ``notebook_variables``); the shortest wins."""
    if wanted in offered:
        return wanted
    tail = re.split(r"__|[._/:-]", wanted)[-1]
    for suffix in (wanted, tail):
        found = sorted((n for n in offered if n.endswith(suffix) and n[:len(n) - len(suffix)][-1:] in _SEPARATORS),
                       key=len)
        if found:
            return found[0]
    return None


#: Claude Code offers this tool while its MCP servers are still connecting (it waits up to
#: 5 s and answers "ready: ..."); a model asked for an MCP tool not yet offered calls it first,
#: and again while the answer is "ready: false" (a server starting on a loaded machine), at
#: most this many times in all.
WAIT_TOOL = "WaitForMcpServers"
MAX_WAITS = 3
NAMESPACE_SEP = "."  # a Responses namespace tool is listed as "<namespace>.<name>"


def tool_names(body: dict[str, Any]) -> list[str]:
    """The names of the tools a request offers, in any of the shapes served here. A Responses
    ``{"type": "namespace", "name": NS, "tools": [...]}`` entry (Codex puts each MCP server's tools
    in one) gives ``NS.<tool>`` for each of its tools."""
    names: list[str] = []
    tools = body.get("tools")
    if not isinstance(tools, list):
        return names
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            names += [f"{tool.get('name')}{NAMESPACE_SEP}{t['name']}" for t in tool["tools"]
                      if isinstance(t, dict) and isinstance(t.get("name"), str)]
            continue
        fn = tool.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):  # OpenAI chat
            names.append(fn["name"])
        elif isinstance(tool.get("name"), str):  # Anthropic, Responses
            names.append(tool["name"])
        for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or []:  # Gemini
            if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                names.append(decl["name"])
    return names


def _result_text(value: Any) -> str:
    """The readable text of a tool result in any shape (a string, content blocks, a Gemini response)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (_result_text(v) for v in value) if t)
    if isinstance(value, dict):
        if isinstance(value.get("text"), str):
            return value["text"]
        for key in ("output", "content", "response", "llmContent", "result", "error"):
            if key in value:
                return _result_text(value[key])
        return json.dumps(value)
    return "" if value is None else json.dumps(value)


def tool_result(body: dict[str, Any]) -> Optional[str]:
    """The text of the tool result when the request's LAST message is one (the turn goes on after
    the stub's tool call), else None. Claude Code 2.1.185 (under claude-agent-acp 0.49) puts
    ``{"role": "system"}`` messages (MCP server instructions) after it: they are skipped."""
    messages = body.get("messages")
    if isinstance(messages, list):
        messages = [m for m in messages if not (isinstance(m, dict) and m.get("role") == "system")]
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        last = messages[-1]
        if last.get("role") == "tool":  # OpenAI chat
            return _result_text(last.get("content"))
        content = last.get("content")
        if last.get("role") == "user" and isinstance(content, list):  # Anthropic
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            if results:
                return _result_text([b.get("content") for b in results])
    items = body.get("input")
    if isinstance(items, list) and items and isinstance(items[-1], dict):  # Responses
        if items[-1].get("type") == "function_call_output":
            return _result_text(items[-1].get("output"))
    contents = body.get("contents")
    if isinstance(contents, list) and contents and isinstance(contents[-1], dict):  # Gemini
        parts = [p.get("functionResponse") for p in contents[-1].get("parts") or []
                 if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
        if parts:
            return _result_text([p.get("response") for p in parts])
    return None


def tool_results(body: dict[str, Any], turn: bool = False) -> list[str]:
    """The texts of the tool results in a request's conversation, in order; ``turn``: only those
    after the last prompt (a user message that is not tool results), i.e. of the running turn."""
    found: list[str] = []  # newest first

    def user_prompt(results: list[str]) -> bool:
        """One message's results (newest first) into ``found``; True when it was a prompt instead."""
        if results:
            found.extend(reversed(results))
            return False
        return True

    messages = body.get("messages")
    if isinstance(messages, list):  # Anthropic, OpenAI chat
        for msg in reversed(messages):
            if not isinstance(msg, dict):
                continue
            content = msg.get("content")
            if msg.get("role") == "tool":
                found.append(_result_text(content))
            elif msg.get("role") == "user":
                blocks = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
                    if isinstance(content, list) else []
                if user_prompt([_result_text(b.get("content")) for b in blocks]) and turn:
                    break
        return found[::-1]
    items = body.get("input")
    if isinstance(items, list):  # Responses
        for item in reversed(items):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call_output":
                found.append(_result_text(item.get("output")))
            elif item.get("role") == "user" and turn:
                break
        return found[::-1]
    contents = body.get("contents")
    if isinstance(contents, list):  # Gemini
        for msg in reversed(contents):
            if not isinstance(msg, dict) or msg.get("role", "user") != "user":
                continue
            parts = [p.get("functionResponse") for p in msg.get("parts") or []
                     if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
            if user_prompt([_result_text(p.get("response")) for p in parts]) and turn:
                break
    return found[::-1]


def _waited(result: str) -> bool:
    """A result of Claude Code's WAIT_TOOL (``ready: ...``), not of a tool the prompt named."""
    return result.lstrip().startswith("ready:")


def wait_calls(body: Any) -> int:
    """How many times the conversation so far (Anthropic's messages) called WAIT_TOOL."""
    n = 0
    for message in body.get("messages") or [] if isinstance(body, dict) else []:
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == WAIT_TOOL:
                n += 1
    return n


def _wait_for_mcp(short: str) -> Script:
    """A call of Claude Code's WAIT_TOOL, as a model makes it while its MCP servers connect."""
    return Script(short, "wait_for_mcp", (), 0.0, 0.0, ToolCall("call_" + uuid.uuid4().hex[:16], WAIT_TOOL, {}))


def plan(prompt: str, *, want_json: bool = False, slow_seconds: float = SLOW_SECONDS,
         think_seconds: float = THINK_SECONDS, tools: Optional[list[str]] = None,
         result: Optional[str] = None, waits: int = 0, done: Optional[int] = None,
         results: Optional[list[str]] = None) -> Script:
    """The scripted answer for a prompt (see the module docstring). ``tools``: the names the
    request offers; ``result``: the tool result the request ends with, if it does; ``waits``:
    how many times the conversation has called WAIT_TOOL; ``done``: how many of the prompt's
    markers this turn has called already (their results in, WAIT_TOOL's not counted; by default
    one when ``result`` is a tool's, none else); ``results``: the conversation's tool results,
    for ``{{cell N}}``."""
    short = " ".join(prompt.split())[:120]
    markers = tool_markers(prompt) if tools and not want_json else []
    if done is None:
        done = 0 if result is None or _waited(result) else 1
    marker = markers[done] if done < len(markers) else None
    if marker is not None and done:
        marker = (marker[0], fill_cells(marker[1], list(results or []) + [result or ""]))
    if result is not None and not want_json:
        waited = _waited(result)
        offered = marker is not None and match_tool(marker[0], tools or []) is not None
        again = waited and not offered and WAIT_TOOL in (tools or []) and waits < MAX_WAITS
        if again:
            return _wait_for_mcp(short)
        if marker is None or (waited and not offered):
            text = "tool result: " + " ".join(result.split())[:RESULT_QUOTE]
            return Script(short, "tool_result", (text,), 0.0, 0.0)
    if marker is not None:
        name = match_tool(marker[0], tools or [])
        if name is None and WAIT_TOOL in (tools or []):  # its MCP servers are still connecting
            return _wait_for_mcp(short)
        if name is None:
            text = f"stub: no tool matching {marker[0]} among {len(tools or [])}: {', '.join(tools or [])}"[:2000]
            return Script(short, "no_tool", (text,), 0.0, 0.0)
        namespace, dot, short_name = name.rpartition(NAMESPACE_SEP) if NAMESPACE_SEP in name else ("", "", name)
        call = ToolCall("call_" + uuid.uuid4().hex[:16], short_name if dot else name, marker[1], namespace or None)
        return Script(short, "tool_call", (), 0.0, 0.0, call)
    if want_json:  # Gemini CLI's side calls (next speaker, routing) ask for a JSON object
        body = json.dumps({"reasoning": "stub", "next_speaker": "user", "model_choice": "flash",
                           "complexity_reasoning": "stub", "complexity_score": 1})
        return Script(short, "json", (body,), 0.0, 0.0)
    if "SLOW" in prompt:
        n = 40
        words = tuple(f"slow chunk {i + 1} of {n}. " for i in range(n))
        return Script(short, "slow", (f"stub reply to: {short}\n",) + words, 0.0, slow_seconds / n)
    text = f"stub reply to: {short}"
    pieces = tuple(re.findall(r"\S+\s*", text)) or (text,)
    first = think_seconds if "THINK" in prompt else 0.0
    return Script(short, "think" if first else "echo", pieces, first, 0.02)


def _texts(content: Any) -> list[str]:
    """The text parts of a message content (a string, or a list of blocks/parts)."""
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                kind = part.get("type")
                if kind in (None, "text", "input_text") and isinstance(part.get("text"), str):
                    out.append(part["text"])
    return out


def _clean(texts: list[str]) -> str:
    kept = [_REMINDER.sub("", t).strip() for t in texts]
    kept = [t for t in kept if t and not t.startswith("<")]
    return kept[-1] if kept else (texts[-1].strip() if texts else "")


def last_user_text(body: dict[str, Any]) -> str:
    """The last thing the user said, in any of the request shapes served here."""
    messages = body.get("messages")
    if isinstance(messages, list):  # Anthropic, OpenAI chat
        for msg in reversed(messages):
            if isinstance(msg, dict) and msg.get("role") == "user":
                text = _clean(_texts(msg.get("content")))
                if text:
                    return text
    items = body.get("input")
    if isinstance(items, str):
        return items
    if isinstance(items, list):  # OpenAI Responses
        for item in reversed(items):
            if isinstance(item, dict) and item.get("role") == "user":
                text = _clean(_texts(item.get("content")))
                if text:
                    return text
    contents = body.get("contents")
    if isinstance(contents, list):  # Gemini
        for msg in reversed(contents):
            if isinstance(msg, dict) and msg.get("role", "user") == "user":
                text = _clean([p.get("text", "") for p in msg.get("parts", []) if isinstance(p, dict)])
                if text:
                    return text
    return ""


# -- wire shapes ----------------------------------------------------------------------


def _sse(event: Optional[str], data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data)
    return f"{head}data: {payload}\n\n".encode()


def anthropic_stream(s: Script, model: str) -> Iterator[bytes | float]:
    mid = "msg_" + uuid.uuid4().hex[:20]
    usage = {"input_tokens": 10, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    yield _sse("message_start", {"type": "message_start", "message": {
        "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": usage}})
    yield s.first_delay
    if s.call is not None:
        yield _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_" + s.call.id[5:], "name": s.call.name, "input": {}}})
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "input_json_delta", "partial_json": s.call.arguments}})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use",
                                                                        "stop_sequence": None},
                                     "usage": {"output_tokens": 5}})
        yield _sse("message_stop", {"type": "message_stop"})
        return
    yield _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}})
    yield _sse("ping", {"type": "ping"})
    for chunk in s.chunks:
        yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": chunk}})
        yield s.chunk_delay
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                 "usage": {"output_tokens": len(s.chunks)}})
    yield _sse("message_stop", {"type": "message_stop"})


def anthropic_message(s: Script, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": s.text}]
    if s.call is not None:
        content = [{"type": "tool_use", "id": "toolu_" + s.call.id[5:], "name": s.call.name, "input": s.call.args}]
    return {"id": "msg_" + uuid.uuid4().hex[:20], "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "tool_use" if s.call else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": len(s.chunks)}}


def chat_stream(s: Script, model: str, usage: bool) -> Iterator[bytes | float]:
    cid, now = "chatcmpl-" + uuid.uuid4().hex[:20], int(time.time())

    def chunk(delta: dict[str, Any], finish: Optional[str] = None) -> bytes:
        return _sse(None, {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    yield chunk({"role": "assistant", "content": ""})
    yield s.first_delay
    if s.call is not None:
        yield chunk({"tool_calls": [{"index": 0, "id": s.call.id, "type": "function",
                                     "function": {"name": s.call.name, "arguments": ""}}]})
        yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": s.call.arguments}}]})
    for piece in s.chunks:
        yield chunk({"content": piece})
        yield s.chunk_delay
    yield chunk({}, "tool_calls" if s.call else "stop")
    if usage:
        yield _sse(None, {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model, "choices": [],
                          "usage": {"prompt_tokens": 10, "completion_tokens": len(s.chunks),
                                    "total_tokens": 10 + len(s.chunks)}})
    yield _sse(None, "[DONE]")


def _chat_message(s: Script) -> dict[str, Any]:
    if s.call is None:
        return {"role": "assistant", "content": s.text}
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": s.call.id, "type": "function", "function": {"name": s.call.name, "arguments": s.call.arguments}}]}


def chat_completion(s: Script, model: str) -> dict[str, Any]:
    return {"id": "chatcmpl-" + uuid.uuid4().hex[:20], "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": _chat_message(s),
                                         "finish_reason": "tool_calls" if s.call else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": len(s.chunks), "total_tokens": 10 + len(s.chunks)}}


def _responses_usage(n: int) -> dict[str, Any]:
    return {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": n,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 10 + n}


def responses_stream(s: Script, model: str) -> Iterator[bytes | float]:
    rid, iid = "resp_" + uuid.uuid4().hex[:20], "msg_" + uuid.uuid4().hex[:20]
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model, "output": []}
    yield _sse("response.created", {"type": "response.created", "response": {**base, "status": "in_progress"}})
    yield _sse("response.in_progress", {"type": "response.in_progress", "response": {**base, "status": "in_progress"}})
    yield s.first_delay
    if s.call is not None:
        fid = "fc_" + uuid.uuid4().hex[:20]
        item = {"id": fid, "type": "function_call", "status": "in_progress", "call_id": s.call.id,
                "name": s.call.name, "arguments": "", **({"namespace": s.call.namespace} if s.call.namespace else {})}
        yield _sse("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                  "item": item})
        yield _sse("response.function_call_arguments.delta", {
            "type": "response.function_call_arguments.delta", "item_id": fid, "output_index": 0,
            "delta": s.call.arguments})
        yield _sse("response.function_call_arguments.done", {
            "type": "response.function_call_arguments.done", "item_id": fid, "output_index": 0,
            "arguments": s.call.arguments})
        done = {**item, "status": "completed", "arguments": s.call.arguments}
        yield _sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                                 "item": done})
        yield _sse("response.completed", {"type": "response.completed", "response": {
            **base, "status": "completed", "output": [done], "usage": _responses_usage(5)}})
        return
    item = {"id": iid, "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    yield _sse("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item})
    yield _sse("response.content_part.added", {"type": "response.content_part.added", "item_id": iid,
                                               "output_index": 0, "content_index": 0,
                                               "part": {"type": "output_text", "text": "", "annotations": []}})
    for piece in s.chunks:
        yield _sse("response.output_text.delta", {"type": "response.output_text.delta", "item_id": iid,
                                                  "output_index": 0, "content_index": 0, "delta": piece})
        yield s.chunk_delay
    part = {"type": "output_text", "text": s.text, "annotations": []}
    yield _sse("response.output_text.done", {"type": "response.output_text.done", "item_id": iid, "output_index": 0,
                                             "content_index": 0, "text": s.text})
    yield _sse("response.content_part.done", {"type": "response.content_part.done", "item_id": iid,
                                              "output_index": 0, "content_index": 0, "part": part})
    done = {**item, "status": "completed", "content": [part]}
    yield _sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": done})
    yield _sse("response.completed", {"type": "response.completed", "response": {
        **base, "status": "completed", "output": [done], "usage": _responses_usage(len(s.chunks))}})


def gemini_chunk(text: str, finish: bool, n: int) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
    out: dict[str, Any] = {"candidates": [cand], "modelVersion": "gemini-2.5-pro"}
    if finish:
        cand["finishReason"] = "STOP"
        out["usageMetadata"] = {"promptTokenCount": 10, "candidatesTokenCount": n, "totalTokenCount": 10 + n}
    return out


def gemini_call(call: ToolCall) -> dict[str, Any]:
    return {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": call.name, "args": call.args}}]}, "index": 0, "finishReason": "STOP"}],
        "modelVersion": "gemini-2.5-pro",
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}


def gemini_reply(s: Script) -> dict[str, Any]:
    """A whole (not streamed) Gemini answer."""
    return gemini_call(s.call) if s.call else gemini_chunk(s.text, True, len(s.chunks))


def gemini_stream(s: Script) -> Iterator[bytes | float]:
    yield s.first_delay
    if s.call is not None:
        yield _sse(None, gemini_call(s.call))
        return
    for i, piece in enumerate(s.chunks):
        yield _sse(None, gemini_chunk(piece, i == len(s.chunks) - 1, len(s.chunks)))
        yield s.chunk_delay


def model_list(path: str) -> dict[str, Any]:
    if "v1beta" in path:
        return {"models": [{"name": f"models/{m}", "displayName": m, "supportedGenerationMethods":
                            ["generateContent", "streamGenerateContent", "countTokens"],
                            "inputTokenLimit": 1_000_000, "outputTokenLimit": 65_536} for m in MODELS]}
    data = [{"id": m, "object": "model", "type": "model", "created": 1_700_000_000, "owned_by": "stub",
             "display_name": m, "created_at": "2025-01-01T00:00:00Z"} for m in MODELS]
    return {"object": "list", "data": data, "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1],
            "models": [{"slug": m, "display_name": m} for m in MODELS]}


# -- I/O: the HTTP server -------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "StubServer"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the log file gets it instead
        pass

    def _body(self) -> tuple[bytes, dict[str, Any]]:
        size = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(size) if size else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self._read_chunked()
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {}
        return raw, data if isinstance(data, dict) else {}

    def _read_chunked(self) -> bytes:
        out = b""
        while True:
            line = self.rfile.readline().strip()
            n = int(line.split(b";")[0] or b"0", 16)
            if n == 0:
                self.rfile.readline()
                return out
            out += self.rfile.read(n)
            self.rfile.readline()

    def _log(self, raw: bytes, **extra: Any) -> None:
        headers = {k: ("<redacted>" if k.lower() in SECRET_HEADERS else v) for k, v in self.headers.items()}
        self.server.log({"t": round(time.time(), 3), "method": self.command, "path": self.path,
                         "headers": headers, "body_bytes": len(raw), **extra})

    def _json(self, status: int, data: Any) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _hung_up(self) -> bool:
        """The client closed its end of the connection (EOF waiting to be read, not a next request)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _wait(self, seconds: float) -> str:
        """Sleep ``seconds`` between events, watching the connection: "" slept, "stopping", "hung up"."""
        end = time.monotonic() + seconds
        while True:
            if self._hung_up():
                return "hung up"
            left = end - time.monotonic()
            if left <= 0:
                return ""
            if self.server.stopping.wait(min(left, 0.05)):
                return "stopping"

    def _stream(self, events: Iterator[bytes | float], prompt: str = "") -> None:
        """Send SSE events; log whether the client took the whole reply or hung up, and when
        (``hung_up_after``: seconds from the stream's start to the client closing the
        connection, seen while the stub waits between events or at a failed write)."""
        completed = False
        started, hung_up_after = time.monotonic(), None
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for ev in events:
                if isinstance(ev, float):
                    waited = self._wait(ev) if ev else ""
                    if waited == "hung up":
                        raise ConnectionResetError("the client closed the connection")
                    if waited:
                        break
                    continue
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            completed = not self.server.stopping.is_set()
        except (BrokenPipeError, ConnectionResetError):  # the CLI cancelled: fine
            self.close_connection = True
            hung_up_after = round(time.monotonic() - started, 3)
        self.server.log({"t": round(time.time(), 3), "event": "stream_end", "path": self.path,
                         "prompt": prompt, "completed": completed, "hung_up_after": hung_up_after})

    def do_HEAD(self) -> None:
        self._log(b"")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self._log(b"")
        if path.rstrip("/").endswith("/models") or path.rstrip("/").endswith("/v1beta/models"):
            self._json(200, model_list(path))
        elif "/models/" in path:
            name = path.rsplit("/", 1)[-1]
            self._json(200, {"id": name, "object": "model", "type": "model", "display_name": name,
                             "name": f"models/{name}"})
        else:
            self._json(404, {"error": {"message": f"stub: no GET {path}", "type": "not_found"}})

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        path = url.path
        raw, body = self._body()
        model = str(body.get("model") or path.rsplit("/", 1)[-1].split(":")[0] or "stub-model")
        prompt = last_user_text(body)
        gen = body.get("generationConfig") if isinstance(body.get("generationConfig"), dict) else {}
        want_json = gen.get("responseMimeType") == "application/json" or "responseJsonSchema" in gen
        tools = tool_names(body)
        result = tool_result(body)
        done = len([r for r in tool_results(body, turn=True) if not _waited(r)]) if result is not None else 0
        script = plan(prompt, want_json=want_json, slow_seconds=self.server.slow_seconds,
                      think_seconds=self.server.think_seconds, tools=tools, result=result,
                      waits=wait_calls(body), done=done, results=tool_results(body))
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        if result is not None:  # what the model got back, whole (bounded), for the tests to read
            extra["result"] = result[:RESULT_LOG]
        if self.server.log_bodies:
            extra["body"] = body
        if script.call is not None:
            extra["call"] = {"name": script.call.name, "args": script.call.args,
                             **({"namespace": script.call.namespace} if script.call.namespace else {})}
        if script.mode in ("tool_result", "no_tool"):
            extra["reply"] = script.text
        self._log(raw, prompt=script.prompt, mode=script.mode, stream=bool(body.get("stream")), **extra)
        route: Optional[Callable[[], None]] = None
        if path.endswith("/messages/count_tokens"):
            route = lambda: self._json(200, {"input_tokens": max(1, len(raw) // 4)})  # noqa: E731
        elif path.endswith("/messages"):
            route = (lambda: self._stream(anthropic_stream(script, model), script.prompt)) if body.get("stream") else \
                (lambda: self._json(200, anthropic_message(script, model)))
        elif path.endswith("/chat/completions"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            route = (lambda: self._stream(chat_stream(script, model, usage), script.prompt)) if body.get("stream") else \
                (lambda: self._json(200, chat_completion(script, model)))
        elif path.endswith("/responses"):
            route = lambda: self._stream(responses_stream(script, model), script.prompt)  # noqa: E731
        elif path.endswith(":streamGenerateContent"):
            route = lambda: self._stream(gemini_stream(script), script.prompt)  # noqa: E731
        elif path.endswith(":generateContent"):
            route = lambda: self._json(200, gemini_reply(script))  # noqa: E731
        elif path.endswith(":countTokens"):
            route = lambda: self._json(200, {"totalTokens": max(1, len(raw) // 4)})  # noqa: E731
        if route is None:
            self._json(404, {"error": {"message": f"stub: no POST {path}", "type": "not_found"}})
        else:
            route()


class StubServer(ThreadingHTTPServer):
    """The stub on 127.0.0.1 (port 0: a free one); ``start()`` serves on a thread."""

    daemon_threads = True

    def __init__(self, port: int = 0, log_path: Optional[Path] = None, *, slow_seconds: float = SLOW_SECONDS,
                 think_seconds: float = THINK_SECONDS, log_bodies: bool = False) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.log_path = log_path
        self.log_bodies = log_bodies  # each request's JSON body in its log line (diagnosis; large)
        self.slow_seconds = slow_seconds
        self.think_seconds = think_seconds
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def log(self, entry: dict[str, Any]) -> None:
        if self.log_path is None:
            return
        with self._lock, open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    def start(self) -> "StubServer":
        self._thread = threading.Thread(target=self.serve_forever, name="stub-model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "StubServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--log", type=Path, default=Path("/tmp/realclis/stub-requests.jsonl"))
    args = ap.parse_args(argv)
    args.log.parent.mkdir(parents=True, exist_ok=True)
    server = StubServer(args.port, args.log)
    print(f"listening {server.url} (log: {args.log})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
