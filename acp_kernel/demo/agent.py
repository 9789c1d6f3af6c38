"""acp-kernel demo agent: a script, no model; it answers documented prompt words.

A scripted ACP v1 agent that needs no API key, so Binder demos, notebooks in CI
and tests can show everything an ACP client renders. Run it with
``python -m acp_kernel.demo.agent`` (or ``acp-kernel demo-agent``); it speaks
JSON-RPC on stdin/stdout and logs to stderr.

Prompt words
------------
The first word of a prompt selects a behaviour (case-insensitive; a leading
``/`` works too, so every word is also a slash command):

- ``help`` (``?``): lists these words.
- ``hello`` (``hi``): a short greeting that says this is a script.
- ``long`` (``markdown``): a long markdown text (headings, lists, code blocks,
  a table) streamed in many 5-20 character chunks.
- ``think``: an ``agent_thought_chunk`` stream, then an answer.
- ``plan``: a plan whose entries go pending -> in_progress -> completed (the
  whole list is sent each time).
- ``tools``: simulated tool calls (nothing touches disk or network) of kinds
  read, search, edit (with a ``diff``), fetch, and a delete that fails; each
  goes pending -> in_progress -> completed/failed, with locations and rawInput.
- ``diff``: one simulated edit tool call with a ``diff``.
- ``shell`` (``terminal``): ``terminal/create`` with command ``/bin/bash`` and
  args ``["-c", script]`` (a few lines over ~1 s) shown in an execute tool
  call as ``{type: "terminal"}`` content, then ``terminal/wait_for_exit``,
  ``terminal/output`` and ``terminal/release``.
- ``files`` (``fs``): ``fs/write_text_file`` of ``acp-demo-notes.md`` in the
  session cwd, then ``fs/read_text_file`` of it, both shown as tool calls.
- ``permission``: ``session/request_permission`` (allow_once, allow_always,
  reject_once, reject_always) for an edit. On allow it writes
  ``demo-permission.txt`` in the cwd through the client's fs; on reject it
  says so and ends the turn normally; a cancelled outcome ends the turn with
  ``stopReason: "cancelled"``. An ``*_always`` answer is remembered for the
  session.
- ``slow``: 100 chunks over ~10 s, so a client can cancel mid-turn.
- ``usage``: the session's (estimated) usage numbers as a table.
- ``refuse``: ends the turn with ``stopReason: "refusal"``.
- ``fail``: the ``session/prompt`` request fails with a JSON-RPC error.
- ``echo <text>``: repeats the text.
- ``tour`` (``everything``): hello, think, tools, files, shell, permission,
  long and usage in sequence, driven by a plan that progresses.
- ``notebook``: calls the tools of the ``notebook`` MCP server the client
  offered in ``mcpServers`` (issue 16), as a real MCP client over stdio:
  ``notebook`` alone calls ``cells`` then ``variables`` (those the server
  lists) and reports what it saw; ``notebook vars [NAME]`` calls
  ``variables``; ``notebook cells`` calls ``cells``; ``notebook run CODE``
  (the rest of the prompt, or a fenced ```python block in it) calls
  ``execute``. Each call is an ACP tool call ("notebook: execute", rawInput
  the arguments, content the tool's text and images); a tool error (e.g.
  refused by the user) fails the tool call. ``notebook ask ...`` first asks
  ``session/request_permission`` for its own tool call (rawInput the
  arguments), as real agents do for MCP tools. ``notebook insert [after
  CELL_ID]`` + a fenced block proposes a new cell (``insert_cell``),
  ``notebook edit CELL_ID`` + a fenced block its new source (``edit_cell``),
  ``notebook delete CELL_ID`` its deletion (``delete_cell``), ``notebook
  run-cell CELL_ID`` runs a cell (``run_cell``). ``notebook all``
  then one such command per line (``insert``, ``edit``, ``delete``, ``run``,
  ``cells``, ``vars``, each with its own fenced block) makes the calls at once,
  as real agents make parallel tool calls. No ``notebook`` server offered: the
  reply says so.

Anything else gets an echo that says this is a script and lists the words.
Embedded resources and resource links in a prompt are acknowledged by name.

``session/cancel`` stops the running turn at its next chunk, withdraws
requests waiting on the client (``$/cancel_request``), releases a terminal it
created, marks tool calls still in flight as failed, and answers the prompt
with ``stopReason: "cancelled"`` (also when the cancel races the turn's end).

Every turn ends with a ``usage_update`` (characters / 4 as "tokens"; the cost
is always 0 because there is no model). The first prompt of a session sets its
title (``session_info_update``).

Client features are used only when the client advertised them in
``initialize`` (``fs.readTextFile``, ``fs.writeTextFile``, ``terminal``);
otherwise the reply says what was skipped and why.

Sessions
--------
Modes ``code`` / ``ask`` / ``plan`` and the config options ``model``
(category "model": demo-fast / demo-thorough, which set the streaming pace)
and ``thinking`` (category "thought_level": off / brief / deep, a thought
stream before each answer) only change pacing and what replies report: the
script does the same things in every mode. ``session/set_model`` (legacy) is
answered too.

Each session is a JSON file ``<sessionId>.json`` in the state directory:
``--state-dir``, else ``$ACP_DEMO_STATE_DIR``, else ``acp-kernel-demo`` under
``$XDG_CACHE_HOME`` (default ``~/.cache``), else ``acp-kernel-demo-<uid>`` in
the temp directory.
So ``session/load`` in a new process replays the history (each message as a
single ``user_message_chunk`` / ``agent_message_chunk``), ``session/resume``
restores it without replay, ``session/list`` lists them (``cwd`` filter) and
``session/close`` / ``session/delete`` end or remove one.
``additionalDirectories`` (absolute paths) on ``session/new``, ``load`` and
``resume`` are the session's other workspace roots, replaced each time (the
spec: omitted means none); the word ``workspace`` lists them and reads the
first file of each through the client. ``logout`` is answered (the demo has
no account: nothing changes, so the tour can show ``%logout``).

MCP servers: the stdio entries of ``mcpServers`` in ``session/new``,
``session/load`` and ``session/resume`` are remembered per session (not saved;
other transports and invalid entries are skipped with a line on stderr). Only
the one named ``notebook`` is used, by the ``notebook`` word: its server is
started on first use (demo/mcp_client.py) and stopped when the session closes,
is deleted, gets different servers from a load or resume, or the agent exits,
so no server outlives its session. A cancel during a call cancels the MCP
request.

Options: ``--state-dir DIR``; ``--log-level LEVEL`` (or
``$ACP_DEMO_LOG_LEVEL``, default WARNING). stdout carries only the protocol:
at startup fd 1 is pointed at stderr and the wire keeps a private copy.

This module deliberately does not import ``acp.schema`` (about 0.8 s): it
builds plain dicts in the exact ACP v1 camelCase shapes. (demo/mcp_client.py
imports it, and the ``mcp`` SDK, only when MCP servers are offered / used.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..protocol.connection import Connection
from ..errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    RESOURCE_NOT_FOUND,
    ConnectionClosed,
    RpcError,
)
from ..protocol.transport import StdioTransport
from .mcp_client import McpClient, McpClientError, ServerEntry, ToolResult, stdio_entries

log = logging.getLogger("acp_kernel.demo.agent")

PROTOCOL_VERSION = 1
AGENT_NAME = "acp-kernel-demo"
AGENT_TITLE = "acp-kernel demo agent — a script, no model; it answers documented prompt words"
AGENT_VERSION = "0.1.0"
STATE_ENV = "ACP_DEMO_STATE_DIR"
CONTEXT_SIZE = 200_000

MODES = [
    {"id": "code", "name": "Code", "description": "Default. The demo script behaves the same in every mode."},
    {"id": "ask", "name": "Ask", "description": "Shown in replies and saved with the session; the script does not change."},
    {"id": "plan", "name": "Plan", "description": "Shown in replies and saved with the session; the script does not change."},
]
MODE_IDS = {m["id"] for m in MODES}

CONFIG_CHOICES: dict[str, dict[str, Any]] = {
    "model": {
        "name": "Model",
        "category": "model",
        "description": "There is no model: this only sets how fast the script streams.",
        "default": "demo-fast",
        "options": [
            {"value": "demo-fast", "name": "demo-fast", "description": "Streams with short pauses."},
            {"value": "demo-thorough", "name": "demo-thorough", "description": "Streams slowly, like typing."},
        ],
    },
    "thinking": {
        "name": "Thinking",
        "category": "thought_level",
        "description": "Whether each answer starts with a (scripted) thought stream.",
        "default": "off",
        "options": [
            {"value": "off", "name": "Off"},
            {"value": "brief", "name": "Brief"},
            {"value": "deep", "name": "Deep"},
        ],
    },
}

PACE = {"demo-fast": 0.25, "demo-thorough": 1.0}

_SESSION_ID_RE = re.compile(r"^demo-[0-9a-f]{32}$")

LONG_MARKDOWN = """\
# The acp-kernel demo agent

This text is **scripted**: no model wrote it. It exists so that a client can show
*long* streamed markdown — headings, lists, code, a table — arriving in many small
chunks. Accents and symbols survive the trip: naïve café, Grüße, ✓, →, 日本語.

## What a client should render

1. Headings at three levels.
2. Ordered and unordered lists:
   - nested items,
   - `inline code`, **bold**, _italics_ and [links](https://agentclientprotocol.com).
3. Fenced code blocks with a language.
4. Tables with aligned columns.

> A quote, to check block quotes. Streaming must never reorder chunks:
> the concatenation of all chunks is exactly this document.

### A code block

```python
import asyncio


async def main() -> None:
    for i in range(3):
        print(f"chunk {i}")
        await asyncio.sleep(0.1)


asyncio.run(main())
```

### A shell block

```bash
python -m acp_kernel.demo.agent --help
echo "stdout is the wire; logs go to stderr" >&2
```

## The prompt words

| word         | what happens                                  |
|--------------|-----------------------------------------------|
| `hello`      | a short greeting                              |
| `long`       | this document, in many chunks                 |
| `think`      | a thought stream, then an answer              |
| `plan`       | a plan that progresses                        |
| `tools`      | tool calls: read, search, edit, fetch         |
| `shell`      | a terminal through `terminal/create`          |
| `files`      | `fs/write_text_file`, then `fs/read_text_file` |
| `permission` | a permission request for an edit              |
| `slow`       | a slow stream you can cancel                  |
| `tour`       | everything above, in order                    |

## Why a script?

- Binder demos run without API keys.
- Notebooks in CI execute top to bottom, deterministically.
- Tests see every kind of `session/update` a real agent sends.

That is all: the end of the long markdown.
"""


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def default_state_dir() -> str:
    env = os.environ.get(STATE_ENV)
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidate = os.path.join(base, "acp-kernel-demo")
    try:
        os.makedirs(candidate, exist_ok=True)
        if os.access(candidate, os.W_OK):
            return candidate
    except OSError:
        pass
    suffix = f"-{os.getuid()}" if hasattr(os, "getuid") else ""
    return os.path.join(tempfile.gettempdir(), f"acp-kernel-demo{suffix}")


def _chunks(text: str, rng: random.Random, lo: int = 5, hi: int = 20) -> list[str]:
    out, i = [], 0
    while i < len(text):
        n = rng.randint(lo, hi)
        out.append(text[i : i + n])
        i += n
    return out


def _text(s: str) -> dict[str, Any]:
    return {"type": "text", "text": s}


# -- sessions -----------------------------------------------------------------


@dataclass
class DemoSession:
    id: str
    cwd: str
    mode: str = "code"
    config: dict[str, str] = field(default_factory=lambda: {k: v["default"] for k, v in CONFIG_CHOICES.items()})
    title: str | None = None
    created_at: str = field(default_factory=_now_iso)
    updated_at: str = field(default_factory=_now_iso)
    #: [{"role": "user"|"agent", "text": str, "messageId": str}]
    history: list[dict[str, str]] = field(default_factory=list)
    #: permission kinds remembered with allow_always / reject_always
    always: str | None = None
    chars_in: int = 0
    chars_out: int = 0
    turn: asyncio.Task[Any] | None = None
    cancel_requested: bool = False
    #: stdio MCP servers from the last session/new, load or resume (not saved)
    mcp_servers: list[ServerEntry] = field(default_factory=list)
    #: the running client of the "notebook" server, started on first use
    mcp: McpClient | None = None
    #: ``additionalDirectories`` from the last session/new, load or resume (not saved)
    roots: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "sessionId": self.id,
            "cwd": self.cwd,
            "mode": self.mode,
            "config": self.config,
            "title": self.title,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "history": self.history,
            "always": self.always,
            "charsIn": self.chars_in,
            "charsOut": self.chars_out,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DemoSession:
        s = cls(id=str(data["sessionId"]), cwd=str(data["cwd"]))
        if data.get("mode") in MODE_IDS:
            s.mode = data["mode"]
        for key, value in (data.get("config") or {}).items():
            if key in CONFIG_CHOICES and value in _option_values(key):
                s.config[key] = value
        s.title = data.get("title")
        s.created_at = data.get("createdAt") or s.created_at
        s.updated_at = data.get("updatedAt") or s.updated_at
        s.history = [h for h in data.get("history") or [] if isinstance(h, dict) and "text" in h]
        s.always = data.get("always")
        s.chars_in = int(data.get("charsIn") or 0)
        s.chars_out = int(data.get("charsOut") or 0)
        return s

    def modes(self) -> dict[str, Any]:
        return {"currentModeId": self.mode, "availableModes": MODES}

    def config_options(self) -> list[dict[str, Any]]:
        out = []
        for key, spec in CONFIG_CHOICES.items():
            out.append(
                {
                    "type": "select",
                    "id": key,
                    "name": spec["name"],
                    "description": spec["description"],
                    "category": spec["category"],
                    "currentValue": self.config[key],
                    "options": spec["options"],
                }
            )
        return out

    @property
    def pace(self) -> float:
        return PACE.get(self.config.get("model", ""), 0.25)

    def usage(self) -> tuple[int, int]:
        return self.chars_in // 4, self.chars_out // 4


def _option_values(key: str) -> set[str]:
    return {o["value"] for o in CONFIG_CHOICES[key]["options"]}


class SessionStore:
    """One JSON file per session; writes are atomic (temp file + rename)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, sid: str) -> str:
        return os.path.join(self.root, sid + ".json")

    def save(self, s: DemoSession) -> None:
        try:
            os.makedirs(self.root, exist_ok=True)
            tmp = self.path(s.id) + f".{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(s.to_json(), f, ensure_ascii=False)
            os.replace(tmp, self.path(s.id))
        except OSError as exc:
            log.warning("could not save session %s in %s: %s", s.id, self.root, exc)

    def load(self, sid: str) -> DemoSession | None:
        try:
            with open(self.path(sid), encoding="utf-8") as f:
                return DemoSession.from_json(json.load(f))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("unreadable session file %s: %s", self.path(sid), exc)
            return None

    def delete(self, sid: str) -> None:
        try:
            os.remove(self.path(sid))
        except FileNotFoundError:
            pass

    def all(self) -> list[DemoSession]:
        try:
            names = os.listdir(self.root)
        except OSError:
            return []
        out = []
        for name in names:
            if name.endswith(".json") and _SESSION_ID_RE.match(name[:-5]):
                s = self.load(name[:-5])
                if s is not None:
                    out.append(s)
        return out


# -- one turn -----------------------------------------------------------------


class Turn:
    """What a prompt handler needs: send updates, call the client, record text."""

    def __init__(self, agent: DemoAgent, session: DemoSession) -> None:
        self.agent = agent
        self.conn = agent.conn
        self.s = session
        self.turn_id = uuid.uuid4().hex[:8]
        #: agent messages of this turn: (messageId, chunks); a tool call starts a new one
        self.messages: list[tuple[str, list[str]]] = []
        self._new_message = True
        self.rng = random.Random(0xAC9)
        self._tool_n = 0
        self.open_tools: set[str] = set()

    # updates
    def update(self, update: dict[str, Any]) -> None:
        self.conn.notify("session/update", {"sessionId": self.s.id, "update": update})

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds * self.s.pace)

    def say_now(self, text: str) -> None:
        """One message chunk at once."""
        if self._new_message:
            self.messages.append((uuid.uuid4().hex, []))
            self._new_message = False
        message_id, parts = self.messages[-1]
        parts.append(text)
        self.update({"sessionUpdate": "agent_message_chunk", "content": _text(text), "messageId": message_id})

    async def say(self, text: str, *, delay: float = 0.02, lo: int = 5, hi: int = 20) -> None:
        """Stream ``text`` in small chunks, pausing between them (a cancel point)."""
        for piece in _chunks(text, self.rng, lo, hi):
            self.say_now(piece)
            await self.pause(delay)

    async def think(self, text: str, *, delay: float = 0.03) -> None:
        for piece in _chunks(text, self.rng, 8, 24):
            self.update({"sessionUpdate": "agent_thought_chunk", "content": _text(piece)})
            await self.pause(delay)

    def plan(self, entries: list[tuple[str, str, str]]) -> None:
        self.update(
            {
                "sessionUpdate": "plan",
                "entries": [{"content": c, "priority": p, "status": st} for c, p, st in entries],
            }
        )

    def new_tool_id(self) -> str:
        self._tool_n += 1
        return f"demo-tool-{self.turn_id}-{self._tool_n}"

    def tool_call(self, tool_id: str, title: str, kind: str, **fields: Any) -> None:
        update = {"sessionUpdate": "tool_call", "toolCallId": tool_id, "title": title, "kind": kind, "status": "pending"}
        update.update(fields)
        self.open_tools.add(tool_id)
        self._new_message = True
        self.update(update)

    def tool_update(self, tool_id: str, **fields: Any) -> None:
        update = {"sessionUpdate": "tool_call_update", "toolCallId": tool_id}
        update.update(fields)
        if fields.get("status") in ("completed", "failed"):
            self.open_tools.discard(tool_id)
        self.update(update)

    def close_tools(self, why: str) -> None:
        """Give every tool call still in flight a final status (a cancel, an error)."""
        for tool_id in sorted(self.open_tools):
            self.tool_update(tool_id, status="failed", content=[{"type": "content", "content": _text(why)}])

    # client requests
    async def call(self, method: str, params: dict[str, Any], timeout: float | None = 60.0) -> Any:
        params = {"sessionId": self.s.id, **params}
        return await self.conn.request(method, params, timeout=timeout)

    def fire(self, method: str, params: dict[str, Any]) -> None:
        """A request whose answer nobody waits for (cleanup, e.g. while cancelled)."""
        try:
            _, fut = self.conn.send_request(method, {"sessionId": self.s.id, **params})
        except ConnectionClosed:
            return
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())


Behaviour = Callable[[Turn, str], Awaitable[str | None]]


# -- behaviours (each returns None for end_turn, or a stop reason) --------------


async def do_help(t: Turn, rest: str) -> None:
    t.say_now(help_text())


async def do_hello(t: Turn, rest: str) -> None:
    await t.say(
        "Hello! I am the acp-kernel demo agent: a script, not a model. "
        f"This session is in mode `{t.s.mode}` with config `{t.s.config['model']}`. "
        "Type `help` to see the words I answer.\n"
    )


async def do_long(t: Turn, rest: str) -> None:
    await t.say(LONG_MARKDOWN, delay=0.008)


THOUGHT = (
    "The user asked me to think. I am a script, so this is a scripted thought: "
    "first I restate the request, then I pick an approach, then I check it. "
    "A client should show these chunks apart from the answer, perhaps folded away.\n"
)


async def do_think(t: Turn, rest: str) -> None:
    await t.think(THOUGHT)
    await t.say("Done thinking. The answer: thoughts stream as `agent_thought_chunk`, answers as `agent_message_chunk`.\n")


PLAN_STEPS = [
    ("Read the notebook", "high"),
    ("Sketch the change", "medium"),
    ("Apply the edit", "medium"),
    ("Run the tests", "low"),
]


async def do_plan(t: Turn, rest: str) -> None:
    status = ["pending"] * len(PLAN_STEPS)

    def send() -> None:
        t.plan([(c, p, st) for (c, p), st in zip(PLAN_STEPS, status)])

    send()
    t.say_now("Here is a plan; I will work through it step by step.\n\n")
    for i, (content, _) in enumerate(PLAN_STEPS):
        status[i] = "in_progress"
        send()
        await t.pause(0.3)
        t.say_now(f"- {content}: done (simulated).\n")
        status[i] = "completed"
        send()
    t.say_now("\nAll plan entries are completed.\n")


def _demo_path(t: Turn, name: str) -> str:
    return os.path.join(t.s.cwd, name)


async def _tool(t: Turn, title: str, kind: str, *, result: str, raw_input: Any, locations=None, content=None, fail=False, delay=0.15) -> None:
    tid = t.new_tool_id()
    fields: dict[str, Any] = {"rawInput": raw_input}
    if locations:
        fields["locations"] = locations
    t.tool_call(tid, title, kind, **fields)
    await t.pause(delay)
    t.tool_update(tid, status="in_progress")
    await t.pause(delay)
    final = content if content is not None else [{"type": "content", "content": _text(result)}]
    t.tool_update(tid, status="failed" if fail else "completed", content=final, rawOutput={"result": result})


async def do_diff(t: Turn, rest: str) -> None:
    path = _demo_path(t, "demo/app.py")
    old = 'def greet(name):\n    return "Hello " + name\n'
    new = 'def greet(name: str) -> str:\n    return f"Hello, {name}!"\n'
    await _tool(
        t,
        "Edit demo/app.py (simulated: the file is not touched)",
        "edit",
        result="1 hunk applied (simulated)",
        raw_input={"path": path, "old_string": old, "new_string": new},
        locations=[{"path": path, "line": 1}],
        content=[{"type": "diff", "path": path, "oldText": old, "newText": new}],
    )
    t.say_now("Proposed an edit with a diff (simulated: nothing on disk changed).\n")


async def do_tools(t: Turn, rest: str) -> None:
    t.say_now("Running simulated tool calls of several kinds (nothing touches your disk or network):\n\n")
    readme = _demo_path(t, "README.md")
    await _tool(
        t, "Read README.md (simulated)", "read",
        result="# My project\n\nA simulated file: 3 lines.\n",
        raw_input={"path": readme}, locations=[{"path": readme, "line": 1}],
    )
    await _tool(
        t, "Search for 'TODO' (simulated)", "search",
        result="demo/app.py:3: # TODO: greet politely\nnotes.md:7: TODO: write docs\n",
        raw_input={"pattern": "TODO", "path": t.s.cwd},
        locations=[{"path": _demo_path(t, "demo/app.py"), "line": 3}, {"path": _demo_path(t, "notes.md"), "line": 7}],
    )
    await do_diff(t, rest)
    await _tool(
        t, "Fetch https://agentclientprotocol.com (simulated)", "fetch",
        result="200 OK (simulated): Agent Client Protocol — a protocol for coding agents and editors.",
        raw_input={"url": "https://agentclientprotocol.com"},
    )
    await _tool(
        t, "Delete build/ (simulated failure)", "delete",
        result="permission denied (a scripted failure, to show a failed tool call)",
        raw_input={"path": _demo_path(t, "build")}, fail=True,
    )
    t.say_now("\nDone: read, search, edit (with a diff), fetch, and one failed call.\n")


SHELL_SCRIPT = (
    'for i in 1 2 3 4 5; do echo "line $i from $(basename "$PWD")"; sleep 0.2; done; '
    'echo "a line on stderr" >&2; echo done'
)


async def do_shell(t: Turn, rest: str) -> str | None:
    if not t.agent.client_terminal:
        t.say_now(
            "Your client did not advertise `terminal: true` in `initialize`, so I will not call "
            "`terminal/create`. (I would have run a short bash script.)\n"
        )
        return None
    tid = t.new_tool_id()
    argv = ["/bin/bash", "-c", SHELL_SCRIPT]
    t.tool_call(tid, "Run a short bash script", "execute", rawInput={"command": argv[0], "args": argv[1:], "cwd": t.s.cwd})
    terminal_id = None
    try:
        try:
            created = await t.call(
                "terminal/create",
                {"command": argv[0], "args": argv[1:], "cwd": t.s.cwd, "outputByteLimit": 64 * 1024},
                timeout=30,
            )
            terminal_id = created["terminalId"]
        except (RpcError, asyncio.TimeoutError, KeyError, TypeError) as exc:
            t.tool_update(tid, status="failed", content=[{"type": "content", "content": _text(f"terminal/create failed: {exc}")}])
            t.say_now(f"The client could not create a terminal: {exc}\n")
            return None
        t.tool_update(tid, status="in_progress", content=[{"type": "terminal", "terminalId": terminal_id}])
        exit_status = await t.call("terminal/wait_for_exit", {"terminalId": terminal_id}, timeout=60)
        output = await t.call("terminal/output", {"terminalId": terminal_id}, timeout=30)
        code = (exit_status or {}).get("exitCode")
        ok = code == 0
        t.tool_update(
            tid,
            status="completed" if ok else "failed",
            content=[{"type": "terminal", "terminalId": terminal_id}],
            rawOutput={"exitCode": code, "signal": (exit_status or {}).get("signal")},
        )
        text = (output or {}).get("output", "")
        lines = text.strip().splitlines()
        t.say_now(
            f"The script exited with code {code} and printed {len(lines)} lines"
            + (f"; the last one: `{lines[-1]}`" if lines else "")
            + ".\n"
        )
        return None
    except (RpcError, asyncio.TimeoutError) as exc:
        t.tool_update(tid, status="failed")
        t.say_now(f"The terminal request failed: {exc}\n")
        return None
    finally:
        if terminal_id is not None:
            t.fire("terminal/release", {"terminalId": terminal_id})


FILE_NOTE = "# Notes from the acp-kernel demo agent\n\nWritten with fs/write_text_file, read back with fs/read_text_file.\n"


async def do_workspace(t: Turn, rest: str) -> None:
    roots = t.s.roots
    lines = [f"My workspace roots: `{t.s.cwd}` (the working directory)"]
    lines += [f"`{r}` (an additional directory)" for r in roots]
    t.say_now("\n".join(f"- {line}" for line in lines) + "\n\n")
    if not roots:
        t.say_now("No additional directories: `%cwd add DIR` then `%new` gives me one.\n")
        return
    if t.agent.client_fs.get("readTextFile") is not True:
        t.say_now("Your client did not advertise `fs.readTextFile`: I read nothing.\n")
        return
    for root in roots:
        try:
            name = next((e for e in sorted(os.listdir(root)) if os.path.isfile(os.path.join(root, e))), None)
        except OSError as exc:
            t.say_now(f"Cannot list `{root}`: {exc.strerror}\n")
            continue
        if name is None:
            t.say_now(f"`{root}` has no files to read.\n")
            continue
        path = os.path.join(root, name)
        try:
            got = await t.call("fs/read_text_file", {"path": path, "limit": 3}, timeout=30)
            first = (str((got or {}).get("content", "")).splitlines() or [""])[0][:80]
            t.say_now(f"Read `{path}` through the client; it begins: `{first}`\n")
        except (RpcError, asyncio.TimeoutError) as exc:
            t.say_now(f"Reading `{path}` through the client failed: {exc}\n")


async def do_files(t: Turn, rest: str) -> None:
    caps = t.agent.client_fs
    path = _demo_path(t, "acp-demo-notes.md")
    can_write, can_read = caps.get("writeTextFile") is True, caps.get("readTextFile") is True
    if not (can_write or can_read):
        t.say_now(
            "Your client did not advertise `fs.readTextFile` or `fs.writeTextFile`, so I will not "
            f"touch files. (I would have written and read back `{path}`.)\n"
        )
        return
    if can_write:
        tid = t.new_tool_id()
        t.tool_call(
            tid, "Write acp-demo-notes.md", "edit",
            locations=[{"path": path}], rawInput={"path": path, "content": FILE_NOTE},
            content=[{"type": "diff", "path": path, "oldText": None, "newText": FILE_NOTE}],
        )
        t.tool_update(tid, status="in_progress")
        try:
            await t.call("fs/write_text_file", {"path": path, "content": FILE_NOTE}, timeout=30)
            t.tool_update(tid, status="completed")
        except (RpcError, asyncio.TimeoutError) as exc:
            t.tool_update(tid, status="failed", content=[{"type": "content", "content": _text(f"write failed: {exc}")}])
            t.say_now(f"Writing `{path}` failed: {exc}\n")
            return
    else:
        t.say_now("Your client did not advertise `fs.writeTextFile`: skipping the write.\n")
    if not can_read:
        t.say_now(f"Wrote `{path}`. Your client did not advertise `fs.readTextFile`: skipping the read.\n")
        return
    tid = t.new_tool_id()
    t.tool_call(tid, "Read acp-demo-notes.md", "read", locations=[{"path": path, "line": 1}], rawInput={"path": path, "line": 1, "limit": 50})
    t.tool_update(tid, status="in_progress")
    try:
        got = await t.call("fs/read_text_file", {"path": path, "line": 1, "limit": 50}, timeout=30)
    except (RpcError, asyncio.TimeoutError) as exc:
        t.tool_update(tid, status="failed", content=[{"type": "content", "content": _text(f"read failed: {exc}")}])
        t.say_now(f"Reading `{path}` failed: {exc}\n")
        return
    content = (got or {}).get("content", "")
    t.tool_update(tid, status="completed", content=[{"type": "content", "content": _text(content)}])
    verdict = "matches what I wrote" if (not can_write or content == FILE_NOTE) else "differs from what I wrote"
    t.say_now(f"Read back `{path}`: {len(content.splitlines())} lines; the content {verdict}.\n")


PERMISSION_OPTIONS = [
    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
]
PERMISSION_TEXT = "This file was written by the acp-kernel demo agent after you allowed it.\n"


async def do_permission(t: Turn, rest: str) -> str | None:
    path = _demo_path(t, "demo-permission.txt")
    tid = t.new_tool_id()
    diff = [{"type": "diff", "path": path, "oldText": None, "newText": PERMISSION_TEXT}]
    call: dict[str, Any] = {"toolCallId": tid, "title": "Write demo-permission.txt", "kind": "edit", "status": "pending",
            "locations": [{"path": path}], "rawInput": {"path": path, "content": PERMISSION_TEXT}, "content": diff}
    t.tool_call(tid, call["title"], "edit", locations=call["locations"], rawInput=call["rawInput"], content=diff)
    if t.s.always:
        kind = t.s.always
        t.say_now(f"You chose `{kind}` earlier in this session, so I am not asking again.\n")
    else:
        try:
            answer = await t.call("session/request_permission", {"toolCall": call, "options": PERMISSION_OPTIONS}, timeout=None)
        except RpcError as exc:
            t.tool_update(tid, status="failed")
            t.say_now(f"The client could not answer the permission request ({exc}); I did not write the file.\n")
            return None
        outcome = (answer or {}).get("outcome") or {}
        if outcome.get("outcome") != "selected":
            t.tool_update(tid, status="failed", content=[{"type": "content", "content": _text("Cancelled.")}])
            t.say_now("The permission request was cancelled; ending the turn.\n")
            return "cancelled"
        by_id = {o["optionId"]: o["kind"] for o in PERMISSION_OPTIONS}
        kind = by_id.get(str(outcome.get("optionId")), "reject_once")
        if kind.endswith("_always"):
            t.s.always = kind
    if kind.startswith("reject"):
        t.tool_update(tid, status="failed", content=[{"type": "content", "content": _text(f"Rejected ({kind}).")}])
        t.say_now(f"Permission rejected (`{kind}`): I did not write `{path}`.\n")
        return None
    t.tool_update(tid, status="in_progress")
    if t.agent.client_fs.get("writeTextFile") is True:
        try:
            await t.call("fs/write_text_file", {"path": path, "content": PERMISSION_TEXT}, timeout=30)
        except (RpcError, asyncio.TimeoutError) as exc:
            t.tool_update(tid, status="failed")
            t.say_now(f"Permission granted (`{kind}`), but writing failed: {exc}\n")
            return None
        t.tool_update(tid, status="completed")
        t.say_now(f"Permission granted (`{kind}`): wrote `{path}`.\n")
    else:
        t.tool_update(tid, status="completed", content=[{"type": "content", "content": _text("Allowed (not written: no fs).")}])
        t.say_now(
            f"Permission granted (`{kind}`). Your client did not advertise `fs.writeTextFile`, "
            "so I only report it: nothing was written.\n"
        )
    return None


SIGNIN_MESSAGE = ("Sign in to the demo agent. The page is served by this agent on 127.0.0.1: "
                  "opening it signs you in to nothing and sends nothing anywhere.")
SIGNIN_WAIT = 120.0  # seconds the turn waits for the opened page to load


def _page(title: str, text: str) -> bytes:
    return (f"<!doctype html><meta charset=utf-8><title>{title}</title>"
            f"<body style='font-family:sans-serif;margin:3em'><h1>{title}</h1><p>{text}</p>").encode()


class SigninPages:
    """The pages ``signin`` asks the user to open, served on 127.0.0.1 (an ephemeral
    port, started on first use): loading ``/signin/<id>`` is the "sign-in"; the
    turn waiting for it then sends ``elicitation/complete``."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.waiting: dict[str, asyncio.Future[None]] = {}

    async def url(self, eid: str) -> str:
        if self.server is None:
            self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/signin/{eid}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            words = head.split(b"\r\n", 1)[0].split(b" ")
            path = words[1].decode("ascii", "replace") if len(words) > 2 else ""
            fut = self.waiting.get(path.removeprefix("/signin/")) if path.startswith("/signin/") else None
            if fut is not None and not fut.done():
                body = _page("Signed in", "Signed in to the demo agent. You can close this tab.")
                fut.set_result(None)
            else:
                body = _page("Nothing to sign in to", "This sign-in is over, or was never asked for.")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


async def do_signin(t: Turn, rest: str) -> None:
    if not t.agent.client_url:
        t.say_now("Your client did not offer to open pages for me (URL elicitation; a headless run or the "
                  "CLI does not), so I cannot ask you to sign in here.\n")
        return
    eid = "demo-signin-" + uuid.uuid4().hex[:12]
    pages = t.agent.pages
    url = await pages.url(eid)
    loaded: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    pages.waiting[eid] = loaded
    try:
        try:
            answer = await t.call("elicitation/create", {"mode": "url", "elicitationId": eid, "url": url,
                                                         "message": SIGNIN_MESSAGE}, timeout=None)
        except RpcError as exc:
            t.say_now(f"The client could not show the sign-in page ({exc}).\n")
            return
        action = (answer or {}).get("action")
        if action != "accept":
            t.say_now(f"You did not open the sign-in page (`{action}`): not signed in.\n")
            return
        t.say_now("You opened the sign-in page; waiting for it to load (interrupt to stop waiting).\n")
        try:
            await asyncio.wait_for(loaded, SIGNIN_WAIT)
        except asyncio.TimeoutError:
            t.say_now(f"The page was not loaded within {SIGNIN_WAIT:.0f} s: not signed in.\n")
            return
        t.conn.notify("elicitation/complete", {"elicitationId": eid})
        t.say_now("Signed in (to nothing: the page only counted your visit).\n")
    finally:
        pages.waiting.pop(eid, None)


async def do_slow(t: Turn, rest: str) -> None:
    t.say_now("Streaming 100 chunks over about 10 seconds; cancel any time.\n\n")
    for i in range(1, 101):
        t.say_now(f"{i} " + ("\n" if i % 10 == 0 else ""))
        await asyncio.sleep(0.1)  # not paced: the point is to be slow
    t.say_now("\nFinished without being cancelled.\n")


async def do_usage(t: Turn, rest: str) -> None:
    used_in, used_out = t.s.usage()
    t.say_now(
        "Usage of this session (estimated as characters / 4; there is no model, so no cost):\n\n"
        "| | tokens |\n|---|---:|\n"
        f"| input | {used_in} |\n| output | {used_out} |\n| context size | {CONTEXT_SIZE} |\n"
    )


async def do_refuse(t: Turn, rest: str) -> str:
    t.say_now("I refuse (this is the scripted refusal, to show `stopReason: \"refusal\"`).\n")
    return "refusal"


async def do_fail(t: Turn, rest: str) -> None:
    raise RpcError(INTERNAL_ERROR, "the demo agent fails on purpose (prompt word `fail`)")


async def do_echo(t: Turn, rest: str) -> None:
    await t.say(f"{rest}\n" if rest else "(nothing to echo)\n")


async def do_tour(t: Turn, rest: str) -> str | None:
    steps: list[tuple[str, Behaviour]] = [
        ("Say hello", do_hello),
        ("Think", do_think),
        ("Call tools", do_tools),
        ("Write and read a file", do_files),
        ("Run a shell script", do_shell),
        ("Ask permission", do_permission),
        ("Stream long markdown", do_long),
        ("Report usage", do_usage),
    ]
    status = ["pending"] * len(steps)

    def send() -> None:
        t.plan([(title, "medium", st) for (title, _), st in zip(steps, status)])

    t.say_now("A tour of everything this demo agent does, driven by a plan.\n\n")
    send()
    for i, (title, behaviour) in enumerate(steps):
        status[i] = "in_progress"
        send()
        t.say_now(f"\n## {i + 1}. {title}\n\n")
        stop = await behaviour(t, "")
        status[i] = "completed"
        send()
        if stop:
            return stop
    t.say_now("\nThat was the tour.\n")
    return None


NOTEBOOK_SERVER = "notebook"
NOTEBOOK_USAGE = (
    "Use `notebook` alone (cells and variables), `notebook vars [NAME]`, `notebook cells`, "
    "or `notebook run CODE` (or a fenced python block after `notebook run`); "
    "`notebook insert [after CELL_ID]`, `notebook edit CELL_ID` (each with a fenced block) and "
    "`notebook delete CELL_ID` propose changes to the notebook; `notebook run-cell CELL_ID` runs a "
    "cell; `notebook all` then one of "
    "these per line makes the calls at once; "
    "`notebook ask ...` asks permission for its tool call first, as real agents do.\n"
)
#: ACP tool kind per notebook tool (variables with a name is a read)
NOTEBOOK_KINDS = {"execute": "execute", "variables": "search", "cells": "read", "insert_cell": "edit",
                  "edit_cell": "edit", "delete_cell": "delete", "run_cell": "execute"}
#: seconds per call: execute may wait for the user to answer a permission prompt
NOTEBOOK_TIMEOUTS = {"execute": 600.0, "run_cell": 600.0, "insert_cell": 960.0, "edit_cell": 960.0,
                     "delete_cell": 960.0}
NOTEBOOK_TIMEOUT = 60.0
# A fence of three or more backticks, closed by the same run on a line of its own
# (CommonMark's rule), so code holding ``` can travel in a longer fence.
_FENCE_RE = re.compile(r"(`{3,})[ \t]*(?:python3?|py|ipython)?[ \t]*\n(.*?)\n?^\1[ \t]*$", re.DOTALL | re.IGNORECASE | re.MULTILINE)


def notebook_request(rest: str) -> tuple[str, dict[str, Any]] | None:
    """``notebook`` arguments -> (tool, arguments); ("", {}) for the overview; None: not understood."""
    fenced = _FENCE_RE.search(rest)
    parts = rest.split(None, 1)
    if not parts:
        return "", {}
    sub, tail = parts[0].lower(), (parts[1] if len(parts) > 1 else "")
    if sub in ("vars", "variables"):
        name = tail.strip().split()[0] if tail.strip() else ""
        return "variables", ({"name": name} if name else {})
    if sub == "cells":
        return "cells", {}
    if sub in ("run", "execute", "exec") or rest.lstrip().startswith("```"):
        code = fenced.group(2) if fenced else tail
        return ("execute", {"code": code}) if code.strip() else None
    words = tail.split()
    if sub == "insert" and fenced:
        after = words[1] if len(words) > 1 and words[0].lower() == "after" else None
        return "insert_cell", {"source": fenced.group(2), **({"after": after} if after else {})}
    if sub == "edit" and fenced and words and not words[0].startswith("`"):
        return "edit_cell", {"cell_id": words[0], "source": fenced.group(2)}
    if sub == "delete" and words:
        return "delete_cell", {"cell_id": words[0]}
    if sub == "run-cell" and words:
        return "run_cell", {"cell_id": words[0]}
    return None


_SUBCOMMANDS = ("insert", "edit", "delete", "run", "run-cell", "execute", "exec", "cells", "vars", "variables")
_FENCE_LINE = re.compile(r"^(`{3,})")


def notebook_requests(rest: str) -> list[str]:
    """``notebook all`` arguments: one command per line, each with the fenced block under it
    (a command word inside a fence is code, not a command)."""
    commands: list[list[str]] = []
    fence = ""
    for line in rest.splitlines():
        if fence:
            if line.strip().startswith(fence) and set(line.strip()) == {"`"}:
                fence = ""
        elif (m := _FENCE_LINE.match(line.strip())) is not None:
            fence = m.group(1)
        elif line.split(None, 1)[:1] and line.split(None, 1)[0].lower() in _SUBCOMMANDS:
            commands.append([])
        if commands:
            commands[-1].append(line)
    return ["\n".join(c) for c in commands]


def _fence(text: str) -> str:
    """``text`` as a fenced block whose fence no backtick run inside can close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}\n"


def _tool_content(result: ToolResult) -> list[dict[str, Any]]:
    content = [{"type": "content", "content": _text(text)} for text in result.texts]
    content += [{"type": "content", "content": {"type": "image", "mimeType": mime, "data": data}} for mime, data in result.images]
    content += [{"type": "content", "content": _text(f"({note})")} for note in result.notes]
    return content


async def _notebook_client(t: Turn) -> McpClient | None:
    """The session's notebook client, started on first use; None (and a reply) when there is none."""
    s = t.s
    entry = next((e for e in s.mcp_servers if e.name == NOTEBOOK_SERVER), None)
    if entry is None:
        t.say_now(
            "Your client did not offer a `notebook` MCP server in `mcpServers` for this session, "
            "so there is no notebook for me to look at. (acp-kernel offers one when it connects; "
            "other clients may not.)\n"
        )
        return None
    client = s.mcp
    if client is None or not client.usable or client.entry != entry:
        old, client = s.mcp, McpClient(entry, s.cwd, client_name=AGENT_NAME, client_version=AGENT_VERSION)
        s.mcp = client  # owned by the session from now on: session/close, load, resume or exit stop it
        if old is not None:
            await old.aclose()
    try:
        await client.open()
    except McpClientError as exc:
        t.say_now(f"I could not reach the `notebook` MCP server: {exc}\n")
        return None
    return client


async def _notebook_call(t: Turn, client: McpClient, tool: str, args: dict[str, Any]) -> ToolResult | None:
    """One tool call shown as an ACP tool call; None when it failed at the protocol level."""
    tid = t.new_tool_id()
    kind = "read" if tool == "variables" and args.get("name") else NOTEBOOK_KINDS.get(tool, "other")
    t.tool_call(tid, f"notebook: {tool}", kind, rawInput=args)
    t.tool_update(tid, status="in_progress")
    try:
        result = await client.call(tool, args, NOTEBOOK_TIMEOUTS.get(tool, NOTEBOOK_TIMEOUT))
    except McpClientError as exc:
        t.tool_update(tid, status="failed", content=[{"type": "content", "content": _text(str(exc))}])
        t.say_now(f"The `{tool}` call did not complete: {exc}\n")
        return None
    t.tool_update(tid, status="failed" if result.is_error else "completed", content=_tool_content(result))
    if result.is_error:
        t.say_now(f"The notebook refused the `{tool}` call (or it failed); its answer is in the tool call above.\n")
    return result


def _counts(result: ToolResult) -> str:
    lines = len(result.text.splitlines())
    out = f"{lines} line{'s' if lines != 1 else ''} of text"
    if result.images:
        out += f" and {len(result.images)} image{'s' if len(result.images) != 1 else ''}"
    return out


async def _ask_for_tool(t: Turn, tool: str, args: dict[str, Any]) -> bool:
    """Ask the client before calling ``tool``, as Gemini CLI, Claude Code and Codex do
    for every MCP tool call; True when allowed."""
    tid = t.new_tool_id()
    call: dict[str, Any] = {"toolCallId": tid, "title": f"notebook: {tool} (asking first)", "kind": NOTEBOOK_KINDS.get(tool, "other"),
            "status": "pending", "rawInput": args}
    t.tool_call(tid, call["title"], call["kind"], rawInput=args)
    try:
        answer = await t.call("session/request_permission", {"toolCall": call, "options": PERMISSION_OPTIONS},
                              timeout=None)
    except RpcError as exc:
        answer = {"outcome": {"outcome": "cancelled"}, "error": str(exc)}
    outcome = (answer or {}).get("outcome") or {}
    kinds = {o["optionId"]: o["kind"] for o in PERMISSION_OPTIONS}
    allowed = outcome.get("outcome") == "selected" and kinds.get(str(outcome.get("optionId")), "").startswith("allow")
    t.tool_update(tid, status="completed" if allowed else "failed",
                  content=[{"type": "content", "content": _text("Allowed." if allowed else "Not allowed.")}])
    if not allowed:
        t.say_now(f"You did not allow the `{tool}` call; I did not make it.\n")
    return allowed


async def _notebook_all(t: Turn, rest: str) -> None:
    """Several calls at once (parallel tool calls); a summary of what each answered."""
    requests = [notebook_request(c) for c in notebook_requests(rest)]
    if not requests or any(r is None or not r[0] for r in requests):
        t.say_now("I did not understand that: after `notebook all`, put one command per line "
                  "(insert, edit, delete, run, cells, vars), each with its fenced block. " + NOTEBOOK_USAGE)
        return
    client = await _notebook_client(t)
    if client is None:
        return
    calls = [r for r in requests if r is not None]
    missing = sorted({tool for tool, _ in calls if tool not in client.tools})
    if missing:
        t.say_now(f"The `notebook` server does not offer {', '.join(f'`{m}`' for m in missing)} here.\n")
        return
    results = await asyncio.gather(*(_notebook_call(t, client, tool, args) for tool, args in calls))
    lines = [f"- `{tool}`: " + ("did not complete" if r is None else
                                 ("refused or failed" if r.is_error else "done") + f", {_counts(r)}")
             for (tool, _), r in zip(calls, results)]
    t.say_now(f"I made {len(calls)} notebook calls at once:\n\n" + "\n".join(lines) + "\n")


async def do_notebook(t: Turn, rest: str) -> None:
    if rest.split(None, 1)[:1] == ["all"]:
        await _notebook_all(t, rest.split(None, 1)[1] if len(rest.split(None, 1)) > 1 else "")
        return
    ask_first = rest.split(None, 1)[:1] == ["ask"]
    if ask_first:
        rest = rest.split(None, 1)[1] if len(rest.split(None, 1)) > 1 else ""
    request = notebook_request(rest)
    if request is None:
        t.say_now("I did not understand that. " + NOTEBOOK_USAGE)
        return
    client = await _notebook_client(t)
    if client is None:
        return
    tool, args = request
    offered = ", ".join(f"`{name}`" for name in client.tools) or "no tools"
    if not tool:
        wanted = [name for name in ("cells", "variables") if name in client.tools]
        if not wanted:
            t.say_now(f"The `notebook` server offers {offered}, neither `cells` nor `variables`: nothing to look at.\n")
            return
        seen = []
        for name in wanted:
            result = await _notebook_call(t, client, name, {})
            if result is not None and not result.is_error:
                seen.append((name, result))
        if seen:
            report = "I looked at your notebook through the `notebook` MCP server:\n\n"
            for name, result in seen:
                head = "\n".join(result.text.splitlines()[:6])
                report += f"- `{name}` answered {_counts(result)}" + (":\n\n" + _fence(head) + "\n" if head else ".\n")
            t.say_now(report)
        return
    if tool not in client.tools:
        said = f" It says:\n\n{_fence((client.instructions or '').strip())}" if (client.instructions or "").strip() else "\n"
        t.say_now(f"The `notebook` server does not offer `{tool}` here; it offers {offered}.{said}")
        return
    if ask_first and not await _ask_for_tool(t, tool, args):
        return
    result = await _notebook_call(t, client, tool, args)
    if result is None or result.is_error:
        return
    if tool == "execute":
        t.say_now(f"I ran the code in your notebook with the `execute` tool; it answered {_counts(result)} (in the tool call above).\n")
    else:
        t.say_now(f"The notebook's `{tool}` tool answered {_counts(result)} (in the tool call above).\n")


@dataclass(frozen=True)
class Word:
    names: tuple[str, ...]
    description: str
    run: Behaviour
    hint: str | None = None


WORDS: list[Word] = [
    Word(("help", "?"), "List the prompt words", do_help),
    Word(("hello", "hi"), "A short greeting (this agent is a script)", do_hello),
    Word(("long", "markdown"), "Long markdown streamed in many small chunks", do_long),
    Word(("think",), "A thought stream, then an answer", do_think),
    Word(("plan",), "A plan that progresses", do_plan),
    Word(("tools",), "Simulated tool calls: read, search, edit (diff), fetch, a failure", do_tools),
    Word(("diff",), "One edit tool call with a diff (simulated)", do_diff),
    Word(("shell", "terminal"), "Run a bash script in a client terminal", do_shell),
    Word(("files", "fs"), "Write then read a file through the client", do_files),
    Word(("workspace", "roots"), "List my workspace roots; read a file from each additional directory", do_workspace),
    Word(("permission",), "Ask permission to write demo-permission.txt", do_permission),
    Word(("slow",), "100 chunks over ~10 s (cancel me)", do_slow),
    Word(("signin", "link"), "Ask you to open a sign-in page on 127.0.0.1 (URL elicitation); done when it loads", do_signin),
    Word(("usage",), "Report the session's estimated usage", do_usage),
    Word(("refuse",), "End the turn with stopReason refusal", do_refuse),
    Word(("fail",), "Fail the prompt with a JSON-RPC error", do_fail),
    Word(("echo",), "Repeat the text", do_echo, hint="text to echo"),
    Word(("tour", "everything"), "Hello, think, tools, files, shell, permission, long, usage, in sequence", do_tour),
    Word(("notebook",), "Call the notebook MCP server's tools: alone, `vars [NAME]`, `cells`, `run CODE`", do_notebook,
         hint="vars [NAME] | cells | run CODE"),
]
_BY_NAME = {name: w for w in WORDS for name in w.names}


def help_text() -> str:
    lines = [("I am the acp-kernel demo agent: a script, no model. I answer these prompt words "
             "(also as slash commands, e.g. `/tour`):\n")]
    for w in WORDS:
        names = " / ".join(f"`{n}`" for n in w.names)
        lines.append(f"- {names}: {w.description}")
    return "\n".join(lines) + "\n"


def available_commands() -> list[dict[str, Any]]:
    out = []
    for w in WORDS:
        cmd: dict[str, Any] = {"name": w.names[0], "description": w.description}
        if w.hint:
            cmd["input"] = {"hint": w.hint}
        out.append(cmd)
    return out


def parse_prompt(blocks: Any) -> tuple[str, list[str]]:
    """(the text of the prompt, notes about non-text blocks)."""
    texts, notes = [], []
    if not isinstance(blocks, list):
        raise RpcError(INVALID_PARAMS, "invalid params: prompt must be a list of content blocks")
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "resource":
            res = block.get("resource") or {}
            size = len(res.get("text") or res.get("blob") or "")
            notes.append(f"an embedded resource `{res.get('uri', '?')}` ({size} characters)")
        elif kind == "resource_link":
            notes.append(f"a link to `{block.get('uri', '?')}`")
        else:
            notes.append(f"a `{kind}` block (not supported: ignored)")
    return "".join(texts), notes


def select(text: str) -> tuple[Word | None, str]:
    stripped = text.strip()
    stripped = stripped.removeprefix("/")
    parts = stripped.split(None, 1)
    if not parts:
        return None, ""
    key = parts[0].lower()
    word = _BY_NAME.get(key) or _BY_NAME.get(key.rstrip("!?.,:;"))
    return word, (parts[1].strip() if len(parts) > 1 else "")


# -- the agent ----------------------------------------------------------------


def _require_dict(params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "invalid params: expected an object")
    return params


def _roots(params: dict[str, Any]) -> list[str]:
    """``additionalDirectories``: absolute paths, or an invalid-params error (the spec's MUST)."""
    roots = params.get("additionalDirectories")
    if roots is None:
        return []
    if not isinstance(roots, list) or not all(isinstance(r, str) and os.path.isabs(r) for r in roots):
        raise RpcError(INVALID_PARAMS, "invalid params: additionalDirectories must be absolute paths")
    return [os.path.normpath(r) for r in roots]


def _require_cwd(params: dict[str, Any]) -> str:
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise RpcError(INVALID_PARAMS, "invalid params: cwd must be an absolute path")
    return os.path.normpath(cwd)


class DemoAgent:
    def __init__(self, conn: Connection, state_dir: str) -> None:
        self.conn = conn
        self.store = SessionStore(state_dir)
        self.sessions: dict[str, DemoSession] = {}
        self.client_fs: dict[str, Any] = {}
        self.client_terminal = False
        #: The client opens pages for the user (``elicitation.url`` advertised).
        self.client_url = False
        self.pages = SigninPages()
        self.client_info: dict[str, Any] = {}
        for method, handler in {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "session/new": self.new_session,
            "session/load": self.load_session,
            "session/resume": self.resume_session,
            "session/list": self.list_sessions,
            "session/close": self.close_session,
            "session/delete": self.delete_session,
            "logout": self.logout,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
            "session/set_model": self.set_model,
            "session/prompt": self.prompt,
        }.items():
            conn.on_request(method, handler)
        conn.on_notification("session/cancel", self.cancel)

    # -- lifecycle

    async def initialize(self, params: Any) -> dict[str, Any]:
        params = _require_dict(params)
        caps = params.get("clientCapabilities") or {}
        if isinstance(caps, dict):
            fs = caps.get("fs")
            self.client_fs = fs if isinstance(fs, dict) else {}
            self.client_terminal = caps.get("terminal") is True
            elicitation = caps.get("elicitation")
            self.client_url = isinstance(elicitation, dict) and isinstance(elicitation.get("url"), dict)
        info = params.get("clientInfo")
        self.client_info = info if isinstance(info, dict) else {}
        log.info("initialize from %s: fs=%s terminal=%s", self.client_info.get("name", "?"), self.client_fs, self.client_terminal)
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentInfo": {"name": AGENT_NAME, "title": AGENT_TITLE, "version": AGENT_VERSION},
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {},
                                        "additionalDirectories": {}},
                "auth": {"logout": {}},
            },
            "authMethods": [],
        }

    async def authenticate(self, params: Any) -> dict[str, Any]:
        return {}

    async def logout(self, params: Any) -> dict[str, Any]:
        log.info("logout: the demo has no account; nothing to forget")
        return {}

    # -- sessions

    def _announce(self, s: DemoSession) -> None:
        """After the response: the slash commands (call_soon runs after the reply is written)."""

        def send() -> None:
            try:
                self.conn.notify(
                    "session/update",
                    {"sessionId": s.id, "update": {"sessionUpdate": "available_commands_update", "availableCommands": available_commands()}},
                )
            except ConnectionClosed:
                pass

        asyncio.get_running_loop().call_soon(send)

    def _session(self, params: Any) -> DemoSession:
        sid = _require_dict(params).get("sessionId")
        s = self.sessions.get(sid) if isinstance(sid, str) else None
        if s is None:
            raise RpcError(INVALID_PARAMS, f"invalid params: unknown sessionId {sid!r} (create, load or resume it first)")
        return s

    def _stored(self, params: dict[str, Any]) -> DemoSession:
        sid = params.get("sessionId")
        if not isinstance(sid, str) or not _SESSION_ID_RE.match(sid):
            raise RpcError(INVALID_PARAMS, f"invalid params: {sid!r} is not a demo agent session id")
        s = self.sessions.get(sid) or self.store.load(sid)
        if s is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"session not found: {sid}")
        return s

    async def new_session(self, params: Any) -> dict[str, Any]:
        params = _require_dict(params)
        cwd = _require_cwd(params)
        s = DemoSession(id="demo-" + uuid.uuid4().hex, cwd=cwd, roots=_roots(params))
        s.mcp_servers = stdio_entries(params.get("mcpServers"))
        self.sessions[s.id] = s
        self.store.save(s)
        self._announce(s)
        return {"sessionId": s.id, "modes": s.modes(), "configOptions": s.config_options()}

    async def load_session(self, params: Any) -> dict[str, Any]:
        params = _require_dict(params)
        cwd = _require_cwd(params)
        s = self._stored(params)
        if s.turn is not None:
            raise RpcError(INVALID_REQUEST, "the session has a turn running")
        s.cwd, s.roots = cwd, _roots(params)
        self.sessions[s.id] = s
        await self._set_servers(s, params.get("mcpServers"))
        for msg in s.history:
            kind = "user_message_chunk" if msg.get("role") == "user" else "agent_message_chunk"
            update: dict[str, Any] = {"sessionUpdate": kind, "content": _text(msg["text"])}
            if msg.get("messageId"):
                update["messageId"] = msg["messageId"]
            self.conn.notify("session/update", {"sessionId": s.id, "update": update})
        self._announce(s)
        return {"modes": s.modes(), "configOptions": s.config_options()}

    async def resume_session(self, params: Any) -> dict[str, Any]:
        params = _require_dict(params)
        cwd = _require_cwd(params)
        s = self._stored(params)
        s.cwd, s.roots = cwd, _roots(params)
        self.sessions[s.id] = s
        await self._set_servers(s, params.get("mcpServers"))
        self._announce(s)
        return {"modes": s.modes(), "configOptions": s.config_options()}

    async def _set_servers(self, s: DemoSession, raw: Any) -> None:
        """New ``mcpServers`` for a loaded or resumed session: a running server they replace stops."""
        s.mcp_servers = stdio_entries(raw)
        if s.mcp is not None and s.mcp.entry not in s.mcp_servers:
            old, s.mcp = s.mcp, None
            await old.aclose()

    @staticmethod
    async def _close_mcp(s: DemoSession) -> None:
        if s.mcp is not None:
            old, s.mcp = s.mcp, None
            await old.aclose()

    async def list_sessions(self, params: Any) -> dict[str, Any]:
        params = params if isinstance(params, dict) else {}
        cwd = params.get("cwd")
        want = os.path.normpath(cwd) if isinstance(cwd, str) and cwd else None
        found = {s.id: s for s in self.store.all()}
        found.update(self.sessions)
        rows = [s for s in found.values() if want is None or s.cwd == want]
        rows.sort(key=lambda s: s.updated_at, reverse=True)
        try:
            start = int(params.get("cursor") or 0)
        except (TypeError, ValueError):
            raise RpcError(INVALID_PARAMS, "invalid params: bad cursor") from None
        page = rows[start : start + 50]
        out: dict[str, Any] = {
            "sessions": [
                {"sessionId": s.id, "cwd": s.cwd, "title": s.title, "updatedAt": s.updated_at,
                 **({"additionalDirectories": s.roots} if s.roots else {})} for s in page
            ]
        }
        if start + 50 < len(rows):
            out["nextCursor"] = str(start + 50)
        return out

    async def close_session(self, params: Any) -> dict[str, Any]:
        s = self._session(params)
        self._cancel_turn(s)
        self.sessions.pop(s.id, None)
        await self._close_mcp(s)
        return {}

    async def delete_session(self, params: Any) -> dict[str, Any]:
        params = _require_dict(params)
        s = self._stored(params)
        self._cancel_turn(s)
        self.sessions.pop(s.id, None)
        self.store.delete(s.id)
        await self._close_mcp(s)
        return {}

    # -- settings

    def _after_reply(self, s: DemoSession, update: dict[str, Any]) -> None:
        def send() -> None:
            try:
                self.conn.notify("session/update", {"sessionId": s.id, "update": update})
            except ConnectionClosed:
                pass

        asyncio.get_running_loop().call_soon(send)

    async def set_mode(self, params: Any) -> dict[str, Any]:
        s = self._session(params)
        mode = params.get("modeId")
        if mode not in MODE_IDS:
            raise RpcError(INVALID_PARAMS, f"invalid params: unknown modeId {mode!r}; known: {sorted(MODE_IDS)}")
        s.mode = mode
        s.updated_at = _now_iso()
        self.store.save(s)
        self._after_reply(s, {"sessionUpdate": "current_mode_update", "currentModeId": mode})
        return {}

    def _set_option(self, s: DemoSession, key: Any, value: Any) -> None:
        if key not in CONFIG_CHOICES:
            raise RpcError(INVALID_PARAMS, f"invalid params: unknown configId {key!r}; known: {sorted(CONFIG_CHOICES)}")
        if value not in _option_values(key):
            raise RpcError(INVALID_PARAMS, f"invalid params: {value!r} is not a value of {key!r}; known: {sorted(_option_values(key))}")
        s.config[key] = value
        s.updated_at = _now_iso()
        self.store.save(s)
        self._after_reply(s, {"sessionUpdate": "config_option_update", "configOptions": s.config_options()})

    async def set_config_option(self, params: Any) -> dict[str, Any]:
        s = self._session(params)
        self._set_option(s, params.get("configId"), params.get("value"))
        return {"configOptions": s.config_options()}

    async def set_model(self, params: Any) -> dict[str, Any]:
        """Legacy ``session/set_model {sessionId, modelId}``: the "model" config option."""
        s = self._session(params)
        self._set_option(s, "model", params.get("modelId"))
        return {}

    # -- turns

    def cancel(self, params: Any) -> None:
        sid = params.get("sessionId") if isinstance(params, dict) else None
        s = self.sessions.get(sid) if isinstance(sid, str) else None
        if s is None:
            log.info("session/cancel for unknown session %r", sid)
            return
        self._cancel_turn(s)

    def _cancel_turn(self, s: DemoSession) -> None:
        if s.turn is not None and not s.turn.done():
            s.cancel_requested = True
            s.turn.cancel()  # awaited client requests send $/cancel_request

    async def prompt(self, params: Any) -> dict[str, Any]:
        s = self._session(params)
        if s.turn is not None:
            raise RpcError(INVALID_REQUEST, "a turn is already running in this session; cancel it first")
        text, notes = parse_prompt(params.get("prompt"))
        word, rest = select(text)
        t = Turn(self, s)
        s.cancel_requested = False
        user_msg = {"role": "user", "text": text, "messageId": uuid.uuid4().hex}
        s.history.append(user_msg)
        s.chars_in += len(text)
        if s.title is None:
            s.title = (text.strip().splitlines() or ["(empty prompt)"])[0][:60] or "(empty prompt)"
            t.update({"sessionUpdate": "session_info_update", "title": s.title, "updatedAt": _now_iso()})
        task = asyncio.get_running_loop().create_task(self._run(t, word, rest, text, notes))
        s.turn = task
        error: BaseException | None = None
        try:
            try:
                await asyncio.wait({task})
            except asyncio.CancelledError:
                task.cancel()  # the connection is closing
                raise
            if task.cancelled():
                stop = "cancelled"
            elif task.exception() is not None:
                error = task.exception()
                stop = "end_turn"
            else:
                stop = task.result() or "end_turn"
            if s.cancel_requested:
                stop = "cancelled"  # a cancel racing the turn's end still reports cancelled
            if t.open_tools:
                t.close_tools("Cancelled." if stop == "cancelled" else "Interrupted: the turn ended.")
        finally:
            s.turn = None
            s.cancel_requested = False
            for message_id, parts in t.messages:
                s.history.append({"role": "agent", "text": "".join(parts), "messageId": message_id})
                s.chars_out += sum(map(len, parts))
            s.updated_at = _now_iso()
            self.store.save(s)
        used_in, used_out = s.usage()
        try:
            t.update({"sessionUpdate": "usage_update", "used": used_in + used_out, "size": CONTEXT_SIZE,
                      "cost": {"amount": 0.0, "currency": "USD"}})
        except ConnectionClosed:
            pass
        if error is not None:
            raise error
        return {
            "stopReason": stop,
            "usage": {"totalTokens": used_in + used_out, "inputTokens": used_in, "outputTokens": used_out},
        }

    async def _run(self, t: Turn, word: Word | None, rest: str, text: str, notes: list[str]) -> str | None:
        level = t.s.config.get("thinking", "off")
        if level != "off" and (word is None or word.run is not do_think):
            thought = "The prompt starts with a known word; I follow its script.\n" if word else "No known word: I will echo.\n"
            if level == "deep":
                thought += "Deep thinking, scripted: check the session's mode and model, then answer.\n"
            await t.think(thought)
        if notes:
            t.say_now("You attached " + "; ".join(notes) + ".\n\n")
        if word is None:
            shown = text.strip()
            if len(shown) > 200:
                shown = shown[:200] + "…"
            t.say_now(
                (f"You said: “{shown}”.\n\n" if shown else "You sent an empty prompt.\n\n")
                + f"(mode `{t.s.mode}`, model `{t.s.config['model']}`)\n\n"
                + help_text()
            )
            return None
        return await word.run(t, rest)


# -- entry point --------------------------------------------------------------


def _wire_stdout() -> Any:
    """Keep the real stdout for the protocol; point fd 1 (print, C code,
    children) at stderr so that nothing else can ever reach the wire."""
    sys.stdout.flush()
    wire_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(wire_fd, "wb", buffering=0)


async def serve(state_dir: str) -> None:
    wire = _wire_stdout()
    transport = StdioTransport(stdout=wire)
    conn = Connection(transport, name="client")
    # Answers to requests a cancel already gave up on are expected, not alarming.
    conn.on_report = lambda kind, text: log.log(
        logging.DEBUG if kind == "stray-response" else logging.WARNING, "%s: %s", kind, text
    )
    agent = DemoAgent(conn, state_dir)
    await conn.start()
    log.info("demo agent ready (state dir %s)", state_dir)
    reason = await conn.wait_closed()
    log.info("exiting: %s", reason)
    agent.pages.close()
    for s in agent.sessions.values():
        if s.turn is not None:
            s.turn.cancel()
    # No MCP server outlives the agent (each close is bounded).
    closing = [asyncio.ensure_future(DemoAgent._close_mcp(s)) for s in agent.sessions.values() if s.mcp is not None]
    if closing:
        await asyncio.wait(closing)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="acp-kernel demo-agent",
        description=AGENT_TITLE + ". Speaks ACP v1 on stdin/stdout; logs go to stderr. "
        "Prompt 'help' for the words.",
    )
    parser.add_argument("--state-dir", help=f"where sessions are saved (default: ${STATE_ENV}, else ~/.cache/acp-kernel-demo)")
    parser.add_argument("--log-level", default=os.environ.get("ACP_DEMO_LOG_LEVEL", "WARNING"), help="stderr log level (default WARNING)")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="demo-agent %(levelname)s %(message)s")
    state_dir = args.state_dir or default_state_dir()
    try:
        asyncio.run(serve(state_dir))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
