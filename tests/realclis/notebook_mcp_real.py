"""Real agents reach the ``notebook`` MCP server (issue 16), offline against the stub model.

For each real ACP agent (Gemini CLI ``--acp``, OpenCode ``acp``, the Claude Agent ACP adapter)
and a real kernel started through jupyter_client:

- python3 kernel: ``%load_ext acp_kernel``, ``x = 5``, ``%acp connect --command "AGENT ..."
  --permissions allow-all``, then ``%%acp TOOL:variables {}``: the stub model asks the CLI to call
  its tool named ``...variables``; the CLI calls our server (started by the agent from the
  ``mcpServers`` entry it got in ``session/new``); the stub answers the tool result with
  ``tool result: <first 200 characters>``, so the turn's text shows ``x: int = 5``. Then
  ``TOOL:execute {"code": "x = 41 + 1"}`` and the next cell sees ``x == 42``. Then
  ``%acp disconnect`` and the server processes are gone.
- the ACP kernel (its own ``cells`` tool only): a first prompt, then ``TOOL:cells {}``: the reply
  quotes the cells run in the kernel.

And one passthrough CLI (Claude Code): ``%passthrough claude`` gets the generated ``--mcp-config``
file; a typed ``TOOL:mcp__notebook__variables {}`` prompt makes it call the server, and its screen
shows the result.

What each agent did comes from the stub's request log (the tool names each request offered, the
call it was told to make, the result it sent back) and the processes under the kernel (from
/proc), never from timing; the seconds are recorded for FINDINGS.md only.

    python tests/realclis/notebook_mcp_real.py [NAME ...] [--json FILE] [--keep]

NAME: gemini, opencode, claude-agent-acp (python3 kernel), NAME:acp (the ACP kernel's ``cells``),
claude:passthrough.

Ask mode (issue 23): how many questions one ``execute`` shows under ``--permissions ask``.

    python tests/realclis/notebook_mcp_real.py --ask [NAME ...] [--kernel-pythonpath DIR] [--json FILE]

(or NAME:ask specs). The python3 kernel is a notebook's (``JPY_SESSION_NAME`` set, a widget
manager announced), the agent is connected with ``--permissions ask`` behind acp_tee.py (a
transparent stdio proxy that logs its ``session/request_permission`` requests and tool call
updates), and ``%%acp TOOL:execute {"code": "x = 41 + 1"}`` runs while every permission block of
the turn widget is answered with its ``allow_once`` option ("Allow once") through the widget's
comm, as the page's button does, each as it appears. Recorded: the questions (the agent's own,
and our server's "Run Python in this notebook's kernel"), whether the agent's showed the code,
``x == 42`` in the next cell, and each request's shape (rawInput, content text, the tool call's
earlier announced input). ``--kernel-pythonpath DIR`` puts DIR first on the kernel's PYTHONPATH
(an older checkout of acp_kernel, e.g. a git worktree); the row records the ``acp_kernel.__file__``
the kernel imported and the PYTHONPATH our server process got.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clis import KIMI_BIN, NPM_BIN, ROOT, prepare  # noqa: E402
from run_matrix import (Cell, Notebook, alive, cmdline, descendants, kernelspec_dir, record_output,  # noqa: E402
                        under, wait_for)
from stub_model_server import StubServer  # noqa: E402

from acp_kernel.notebook_mcp.wire import TOOLS  # noqa: E402

SERVER_MARK = "acp_kernel.notebook_mcp"
VARIABLES = "TOOL:variables {}"
EXECUTE = 'TOOL:execute {"code": "x = 41 + 1"}'
CELLS = "TOOL:cells {}"
FIRST_ACP_CELL = "echo alpha-one"
EXECUTE_CODE = "x = 41 + 1"
#: The title of our own server's question (acp_kernel.client.notebook.EXECUTE_TITLE).
SERVER_TITLE = "Run Python in this notebook's kernel"
#: ``--action shell``: the agent's own shell tool (Claude Code's Bash), one command; the kernel
#: asks about its ``terminal/create`` with the title "Run COMMAND in CWD" (services/terminals.py).
SHELL_COMMAND = "echo legacy-one"
SHELL = 'TOOL:Bash {"command": "echo legacy-one", "description": "Print a word", "timeout": 60000}'
TERMINAL_TITLE = "Run "
TEE = Path(__file__).resolve().parent / "acp_tee.py"


@dataclass(frozen=True)
class AcpAgent:
    """One real agent in ACP mode: its executable, arguments, and the clis.py profile whose
    settings point it at the stub (the same files and environment as its passthrough run)."""

    name: str
    profile: str
    executable: Path
    args: tuple[str, ...]
    package: str
    env: tuple[tuple[str, str], ...] = ()  # added to the profile's environment

    def installed(self) -> bool:
        return self.executable.exists()

    def argv(self) -> list[str]:
        return [str(self.executable), *self.args]


ACP_AGENTS: dict[str, AcpAgent] = {a.name: a for a in [
    AcpAgent("gemini", "gemini", NPM_BIN / "gemini", ("--acp",), "@google/gemini-cli (npm)"),
    AcpAgent("opencode", "opencode", NPM_BIN / "opencode", ("acp",), "opencode-ai (npm)"),
    AcpAgent("codex-acp", "codex", NPM_BIN / "codex-acp", (),
             "@zed-industries/codex-acp (npm, into REALCLIS_HOME/npm)"),
    # kimi-cli's console scripts are deprecation gates (FINDINGS.md): the Typer app, `acp` subcommand
    AcpAgent("kimi", "kimi", KIMI_BIN / "python", ("-m", "kimi_cli.cli", "acp"), "kimi-cli (PyPI, a venv)"),
    # As root the adapter passes --allow-dangerously-skip-permissions when IS_SANDBOX is set at
    # all, and its Claude Code (2.1.185) exits 1 on that flag unless IS_SANDBOX is exactly "1".
    AcpAgent("claude-agent-acp", "claude", NPM_BIN / "claude-agent-acp", (),
             "@agentclientprotocol/claude-agent-acp (npm, into REALCLIS_HOME/npm)", (("IS_SANDBOX", "1"),)),
    # The legacy adapter (runs shell commands through the client's terminal/create, adding
    # CLAUDECODE=1); its own npm prefix, so its Agent SDK does not meet claude-agent-acp's.
    AcpAgent("claude-legacy", "claude", ROOT / "legacy" / "node_modules" / ".bin" / "claude-code-acp", (),
             "@zed-industries/claude-code-acp (npm, into REALCLIS_HOME/legacy)", (("IS_SANDBOX", "1"),)),
]}


@dataclass
class McpRow:
    """What one real agent did with the notebook server."""

    agent: str
    kernel: str
    connected: bool = False
    tools_seen: list[str] = field(default_factory=list)  # the notebook tools' names as the agent offered them
    calls: list[dict[str, Any]] = field(default_factory=list)  # what the stub told it to call
    results: list[str] = field(default_factory=list)  # what came back to the model (the stub's quoted reply)
    servers_started: int = 0
    variables_reply: str = ""
    variables_ok: bool = False
    execute_ok: bool = False  # the next cell sees x == 42
    cells_reply: str = ""
    cells_ok: bool = False
    servers_left: list[int] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# -- reading the run ------------------------------------------------------------------


def log_entries(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


#: The notebook server's tools: a python3 kernel with the magics offers all of them, the ACP
#: kernel (no Python namespace) cells and the three edit tools.
NOTEBOOK_TOOLS = TOOLS


def tool_of(name: str) -> str:
    """Our tool a name as offered means (``mcp__notebook__edit_cell``, ``mcp_notebook_edit_cell``,
    ``notebook_edit_cell``, ``mcp__notebook.edit_cell``, ``edit_cell`` -> ``edit_cell``); else the name."""
    found = re.search(r"(?:^|[_.])(" + "|".join(NOTEBOOK_TOOLS) + r")$", name)
    return found.group(1) if found else name


def notebook_tools(entries: list[dict[str, Any]]) -> list[str]:
    """The tool names of our server as the agent offered them to the model (first request that had any)."""
    for entry in entries:
        offered = entry.get("tools", [])
        names = [n for n in offered if tool_of(n) in NOTEBOOK_TOOLS and n != tool_of(n) and "notebook" in n.lower()]
        names = names or [n for n in offered if n in NOTEBOOK_TOOLS]
        if names:
            return names
    return []


def servers_under(pid: int) -> set[int]:
    """Our server processes under the kernel: a ``python -m acp_kernel.notebook_mcp`` (not a shell
    or wrapper whose command line names it: one whose parent is a server too is the same server)."""
    found = {p for p in descendants(pid) if SERVER_MARK in cmdline(p)}
    return {p for p in found if parent(p) not in found}


def parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def server_parents(pid: int) -> list[str]:
    """Who started each server (the agent, or a helper process of it)."""
    return sorted(cmdline(parent(p))[:70] for p in servers_under(pid))


def cell_value(nb: Notebook, expr: str, timeout: float = 30) -> str:
    """``repr(expr)`` as printed by the kernel (python3 kernel only)."""
    cell = nb.run(f"print(repr({expr}), end='')", timeout)
    return "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")


def _short(text: str, n: int = 160) -> str:
    return " ".join(text.split())[:n]


# -- one agent, one kernel ------------------------------------------------------------


def _environment(work: Path, base: Path, setup_env: dict[str, str], config: dict[str, Any]) -> dict[str, str]:
    config_path = work / "acp_kernel.json"
    config_path.write_text(json.dumps(config), encoding="utf-8")
    env = {**os.environ, **setup_env, "JUPYTER_PATH": str(kernelspec_dir(base)),
           "ACP_KERNEL_CONFIG": str(config_path), "ACP_KERNEL_STATE": str(work / "state" / "sessions.json")}
    for key in ("ACP_KERNEL_AGENT", "JPY_SESSION_NAME"):
        env.pop(key, None)
    return env


def _save(nb: Notebook, work: Path) -> None:
    (work / "cells.json").write_text(json.dumps(
        [{"code": c.code, "done": c.done, "status": c.status, "outputs": c.outputs} for c in nb.cells.values()],
        indent=1, default=str), encoding="utf-8")


def _finish(row: McpRow, nb: Optional[Notebook], work: Path, log: Path, server: StubServer) -> None:
    entries = log_entries(log)
    row.tools_seen = notebook_tools(entries)
    row.calls = [e["call"] for e in entries if "call" in e]
    row.results = [e["reply"] for e in entries if e.get("mode") == "tool_result"]
    for e in entries:
        if e.get("mode") == "no_tool":
            row.notes.append(_short(e.get("reply", ""), 300))
    if nb is not None:
        _save(nb, work)
        leftover = descendants(nb.pid) | under(work / "home")
        nb.close()
        for pid in leftover:  # ours: started by this kernel for this run
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    server.stop()


def _connect(nb: Notebook, row: Any, argv: list[str], permissions: str, timeout: float) -> bool:
    """``%acp connect`` the agent; its time, and why not in ``row.notes``."""
    t0 = time.monotonic()
    conn = nb.run(f"%acp connect --command {shlex.join(argv)} --permissions {permissions}", timeout)
    row.seconds["connect"] = round(time.monotonic() - t0, 2)
    row.connected = conn.done and "Connected" in conn.text() and "UsageError" not in conn.text()
    if not row.connected:
        row.notes.append("connect: " + _short(conn.text(), 300))
    return row.connected


def run_python3(name: str, base: Path, timeout: float = 120.0) -> McpRow:
    """``%acp connect --command`` a real ACP agent in a python3 kernel; variables, then execute."""
    agent = ACP_AGENTS[name]
    row = McpRow(name, "python3")
    work = base / f"{name}-python3"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "stub.jsonl"
    server = StubServer(0, log).start()
    nb: Optional[Notebook] = None
    try:
        setup = prepare(agent.profile, server.url, work / "home", work / "cwd")
        nb = Notebook(_environment(work, base, {**setup.env, **dict(agent.env)}, {}), work / "cwd",
                      kernel_name="python3")
        nb.run("%load_ext acp_kernel", 60)
        nb.run("x = 5", 30)
        if not _connect(nb, row, agent.argv(), "allow-all", timeout):
            return row
        status = nb.run("%acp status", 30).text()
        if "notebook MCP server" in status:
            row.notes.append(_short(status[status.index("notebook MCP server"):], 80))
        t0 = time.monotonic()
        nb.run(f"%%acp\n{VARIABLES}", timeout)
        row.seconds["variables turn"] = round(time.monotonic() - t0, 2)
        row.servers_started = len(servers_under(nb.pid))
        row.notes.append("servers started by: " + ", ".join(server_parents(nb.pid)))
        row.variables_reply = cell_value(nb, "_acp.text")
        row.variables_ok = "x: int = 5" in row.variables_reply
        if not row.variables_ok:
            row.notes.append("variables turn: " + _short(cell_value(nb, "_acp"), 200))
        t0 = time.monotonic()
        nb.run(f"%%acp\n{EXECUTE}", timeout)
        row.seconds["execute turn"] = round(time.monotonic() - t0, 2)
        row.execute_ok = cell_value(nb, "x") == "42"
        if not row.execute_ok:
            row.notes.append("execute turn: " + _short(cell_value(nb, "_acp.text"), 200))
        family = servers_under(nb.pid)
        nb.run("%acp disconnect", 60)
        wait_for(lambda: not any(alive(p) for p in family), 15)
        row.servers_left = sorted(p for p in family if alive(p))
    except Exception as exc:  # a harness failure is a row, not a crash of the whole run
        row.notes.append(f"harness: {type(exc).__name__}: {exc}"[:300])
    finally:
        _finish(row, nb, work, log, server)
    return row


def run_acp_kernel(name: str, base: Path, timeout: float = 120.0) -> McpRow:
    """The ACP kernel with a real agent as its agent: ``cells`` (the only tool it offers)."""
    agent = ACP_AGENTS[name]
    row = McpRow(name, "acp")
    work = base / f"{name}-acp"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "stub.jsonl"
    server = StubServer(0, log).start()
    nb: Optional[Notebook] = None
    try:
        setup = prepare(agent.profile, server.url, work / "home", work / "cwd")
        config = {"default_agent": name, "permissions": "allow-all",
                  "agents": {name: {"title": name, "command": agent.argv()}}}
        nb = Notebook(_environment(work, base, {**setup.env, **dict(agent.env)}, config), work / "cwd",
                      kernel_name="acp")
        t0 = time.monotonic()
        first = nb.run(FIRST_ACP_CELL, timeout)
        row.seconds["first turn"] = round(time.monotonic() - t0, 2)
        row.connected = first.done and first.status != "error"
        if not row.connected:
            row.notes.append("first cell: " + _short(first.text(), 300))
            return row
        t0 = time.monotonic()
        cells = nb.run(CELLS, timeout)
        row.seconds["cells turn"] = round(time.monotonic() - t0, 2)
        row.servers_started = len(servers_under(nb.pid))
        row.cells_reply = _short(cells.text(), 600)
        row.cells_ok = "tool result:" in cells.text() and FIRST_ACP_CELL in cells.text()
        row.notes.append("servers started by: " + ", ".join(server_parents(nb.pid)))
        # the ACP kernel's session lives as long as the kernel: shut it down, the servers go with it
        family = servers_under(nb.pid) | descendants(nb.pid)
        servers = servers_under(nb.pid)
        _save(nb, work)
        nb.close()
        nb = None
        wait_for(lambda: not any(alive(p) for p in servers), 15)
        row.servers_left = sorted(p for p in servers if alive(p))
        for pid in family:  # ours (the kernel's children), whatever stayed
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    except Exception as exc:
        row.notes.append(f"harness: {type(exc).__name__}: {exc}"[:300])
    finally:
        _finish(row, nb, work, log, server)
    return row


def run_passthrough(name: str, base: Path, timeout: float = 120.0) -> McpRow:
    """``%acp passthrough NAME`` (a CLI with ``mcp_args``: claude) in a python3 kernel: the prompts
    are typed into its terminal; the reply on its screen is the cell's ``_acp.text``."""
    row = McpRow(name, "python3 passthrough")
    work = base / f"{name}-passthrough"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "stub.jsonl"
    server = StubServer(0, log).start()
    nb: Optional[Notebook] = None
    try:
        setup = prepare(name, server.url, work / "home", work / "cwd")
        config = {"permissions": "allow-all",
                  "agents": {name: {"env": setup.env, "passthrough": {"command": setup.argv}}}}
        nb = Notebook(_environment(work, base, setup.env, config), work / "cwd", kernel_name="python3")
        nb.run("%load_ext acp_kernel", 60)
        nb.run("x = 5", 30)
        t0 = time.monotonic()
        opened = nb.run(f"%acp passthrough {name}", timeout)
        row.seconds["open"] = round(time.monotonic() - t0, 2)
        row.connected = opened.done and "UsageError" not in opened.text()
        cli = [p for p in descendants(nb.pid) if "--mcp-config" in cmdline(p)]
        row.notes.append("argv: " + (" ".join(cmdline(cli[0]).split()[1:])[:90] if cli else "no --mcp-config"))
        if not row.connected:
            row.notes.append("open: " + _short(opened.text(), 300))
            return row
        t0 = time.monotonic()
        nb.run("%%acp\nTOOL:mcp__notebook__variables {}", timeout)
        row.seconds["variables prompt"] = round(time.monotonic() - t0, 2)
        row.servers_started = len(servers_under(nb.pid))
        row.notes.append("servers started by: " + ", ".join(server_parents(nb.pid)))
        row.variables_reply = cell_value(nb, "_acp.text")
        row.variables_ok = "x: int = 5" in row.variables_reply
        if not row.variables_ok:
            row.notes.append("variables reply: " + _short(row.variables_reply, 300))
        t0 = time.monotonic()
        nb.run(f"%%acp\n{EXECUTE.replace('TOOL:execute', 'TOOL:mcp__notebook__execute')}", timeout)
        row.seconds["execute prompt"] = round(time.monotonic() - t0, 2)
        row.execute_ok = cell_value(nb, "x") == "42"
        if not row.execute_ok:
            row.notes.append("execute reply: " + _short(cell_value(nb, "_acp.text"), 300))
        family = servers_under(nb.pid)
        nb.run(f"%acp disconnect {name}-cli", 60)
        wait_for(lambda: not any(alive(p) for p in family), 15)
        row.servers_left = sorted(p for p in family if alive(p))
    except Exception as exc:
        row.notes.append(f"harness: {type(exc).__name__}: {exc}"[:300])
    finally:
        _finish(row, nb, work, log, server)
    return row


# -- ask mode: questions per execute (issue 23) ---------------------------------------


@dataclass
class Question:
    """One permission block of the turn widget."""

    title: str
    detail: str
    options: list[str]
    ours: bool  # our server's own question (its title)
    clicked: str = ""  # the option we answered with
    state: str = "asking"
    chosen: str = ""
    shows_code: bool = False  # the code to run is in what the question shows


@dataclass
class AskRow:
    agent: str
    version: str = ""
    kernel_acp_kernel: str = ""  # acp_kernel.__file__ inside the kernel
    server_pythonpath: str = "?"  # PYTHONPATH of our server process (from /proc)
    connected: bool = False
    questions: list[Question] = field(default_factory=list)
    fallback_questions: int = 0  # "Permission requested" blocks in the cell's final text
    execute_ok: bool = False
    calls: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)  # the shape of each session/request_permission
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def agents_questions(self) -> list[Question]:
        return [q for q in self.questions if not q.ours]

    def servers_questions(self) -> list[Question]:
        return [q for q in self.questions if q.ours]


def _allow_once(options: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
    return (next((o for o in options if o.get("kind") == "allow_once"), None)
            or next((o for o in options if "Allow once" in str(o.get("name", ""))), None))


def run_answering(nb: Notebook, code: str, timeout: float, shell: bool = False) -> tuple[Cell, list[Question]]:
    """Run a cell; answer every permission block of its turn widget with "Allow once" through
    the widget comm as soon as it asks (tests/view/turnclick.py, for each block, not the first).
    ``shell``: the action is a shell command (the kernel's own question is its terminal's)."""
    cell = nb.send(code)
    seen: dict[tuple[str, str], Question] = {}
    end = time.monotonic() + timeout
    while not cell.done:
        left = end - time.monotonic()
        if left <= 0:
            break
        try:
            msg = nb.kc.get_iopub_msg(timeout=min(left, 0.5))
        except queue.Empty:
            continue
        if msg.get("parent_header", {}).get("msg_id") == cell.msg_id:
            record_output(cell, msg)
        if msg["msg_type"] not in ("comm_open", "comm_msg"):
            continue
        comm_id = msg["content"].get("comm_id", "")
        state = (msg["content"].get("data") or {}).get("state") or {}
        for key, block in state.items():
            if not (key.startswith("b:") and isinstance(block, dict) and block.get("type") == "permission"):
                continue
            q = seen.get((comm_id, key))
            if q is None:
                title, detail = str(block.get("title", "")), str(block.get("detail", ""))
                q = seen[(comm_id, key)] = Question(
                    title, detail, [str(o.get("name", "")) for o in block.get("options", [])],
                    ours=title.startswith(TERMINAL_TITLE if shell else SERVER_TITLE),
                    shows_code=(SHELL_COMMAND if shell else EXECUTE_CODE) in title + "\n" + detail)
            q.state, q.chosen = str(block.get("state", "")), str(block.get("chosen", ""))
            if q.state == "asking" and not q.clicked:
                option = _allow_once(block.get("options", []))
                if option is None:
                    continue
                click = nb.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {
                    "method": "custom", "content": {"type": "answer", "block": key, "option": option["id"]}}})
                nb.kc.shell_channel.send(click)
                q.clicked = str(option.get("name", ""))
    return cell, list(seen.values())


def _text_items(content: Any) -> list[str]:
    out = []
    for item in content if isinstance(content, list) else []:
        inner = item.get("content") if isinstance(item, dict) else None
        if isinstance(inner, dict) and inner.get("type") == "text":
            out.append(str(inner.get("text", "")))
    return out


def request_shapes(tee_log: Path) -> tuple[str, list[dict[str, Any]]]:
    """The agent's name and version (its initialize answer) and, for each of its permission
    requests, what it carried and what its tool call had announced before."""
    version = ""
    announced: dict[str, dict[str, Any]] = {}  # toolCallId -> what the updates before the question said
    shapes = []
    for entry in log_entries(tee_log):
        msg = entry["msg"]
        info = (msg.get("result") or {}).get("agentInfo") if isinstance(msg.get("result"), dict) else None
        if info:
            version = f"{info.get('name', '')} {info.get('version', '')}".strip()
        if msg.get("method") == "session/update":
            update = msg["params"]["update"]
            seen = announced.setdefault(str(update.get("toolCallId")), {"rawInput": None, "texts": []})
            if update.get("rawInput") is not None:
                seen["rawInput"] = update["rawInput"]
            seen["texts"] += _text_items(update.get("content"))
        elif msg.get("method") == "session/request_permission":
            call = msg["params"].get("toolCall") or {}
            before = announced.get(str(call.get("toolCallId")), {"rawInput": None, "texts": []})
            shapes.append({
                "title": call.get("title"), "kind": call.get("kind"), "keys": sorted(call),
                "rawInput": call.get("rawInput"),
                "content_texts": [t[:300] for t in _text_items(call.get("content"))],
                "announced_rawInput": before["rawInput"],
                "announced_texts": [t[:300] for t in before["texts"]][:5],
                "options": [f"{o.get('name')} ({o.get('kind')})" for o in msg["params"].get("options", [])],
            })
    return version, shapes


def environ_of(pid: int) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            pairs = f.read().split(b"\0")
    except OSError:
        return {}
    return dict(p.decode(errors="replace").partition("=")[::2] for p in pairs if b"=" in p)


def run_ask(name: str, base: Path, timeout: float = 120.0, pythonpath: str = "", agent_allow: bool = True,
            action: str = "execute") -> AskRow:
    """``%acp connect --permissions ask`` a real agent (behind acp_tee.py) in a python3 kernel
    that a notebook drives; one execute (``action="shell"``: one shell command of the agent's
    own Bash tool), every question answered "Allow once".

    ``agent_allow=False``: the claude profile without its ``mcp__notebook`` allow rule, so
    Claude Code asks about the call itself (clis.py keeps the rule for the TUI runs)."""
    agent = ACP_AGENTS[name]
    shell = action == "shell"
    row = AskRow((name if agent_allow else f"{name} (no allow rule)") + (" shell" if shell else ""))
    work = base / f"{name}-ask{'' if agent_allow else '-noallow'}{'-shell' if shell else ''}"
    work.mkdir(parents=True, exist_ok=True)
    log, tee_log = work / "stub.jsonl", work / "acp.jsonl"
    server = StubServer(0, log).start()
    nb: Optional[Notebook] = None
    try:
        setup = prepare(agent.profile, server.url, work / "home", work / "cwd")
        if not agent_allow and agent.profile == "claude":
            settings_file = work / "home" / ".claude" / "settings.json"
            settings = json.loads(settings_file.read_text())
            settings["permissions"]["allow"] = []
            settings_file.write_text(json.dumps(settings))
            row.notes.append("~/.claude/settings.json: permissions.allow = []")
        env = _environment(work, base, {**setup.env, **dict(agent.env)}, {})
        env["JPY_SESSION_NAME"] = str(work / "cwd" / "ask.ipynb")  # as Jupyter Server starts kernels
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, env.get("PYTHONPATH", "")) if p)
        nb = Notebook(env, work / "cwd", kernel_name="python3")
        nb.run("%load_ext acp_kernel", 60)
        msg_id = nb.kc.comm_info(target_name="jupyter.widget")  # a widget manager says hello
        while nb.kc.get_shell_msg(timeout=30)["parent_header"].get("msg_id") != msg_id:
            pass
        row.kernel_acp_kernel = cell_value(nb, "__import__('acp_kernel').__file__")
        nb.run("x = 5", 30)
        argv = [sys.executable, str(TEE), str(tee_log), "--", *agent.argv()]
        if not _connect(nb, row, argv, "ask", timeout):
            return row
        t0 = time.monotonic()
        cell, row.questions = run_answering(nb, f"%%acp\n{SHELL if shell else EXECUTE}", timeout, shell)
        row.seconds["execute turn"] = round(time.monotonic() - t0, 2)
        if not cell.done:
            row.notes.append(f"execute turn: not done in {timeout} s")
            nb.km.interrupt_kernel()
            nb.pump(lambda: cell.done, 30)
        row.fallback_questions = cell.text().count("Permission requested")
        servers = servers_under(nb.pid)
        if servers:
            row.server_pythonpath = environ_of(min(servers)).get("PYTHONPATH", "")
        if shell:  # the command ran: its output went back to the model
            row.execute_ok = any(e.get("mode") == "tool_result" and "legacy-one" in str(e.get("reply", ""))
                                 for e in log_entries(log))
        else:
            row.execute_ok = cell_value(nb, "x") == "42"
        if not row.execute_ok:
            row.notes.append("execute turn: " + _short(cell_value(nb, "_acp.text"), 300))
        unanswered = [q.title for q in row.questions if not q.clicked]
        if unanswered:
            row.notes.append(f"not answered (no Allow once): {unanswered}")
        nb.run("%acp disconnect", 60)
        wait_for(lambda: not any(alive(p) for p in servers), 15)
    except Exception as exc:
        row.notes.append(f"harness: {type(exc).__name__}: {exc}"[:300])
    finally:
        row.version, row.requests = request_shapes(tee_log)
        row.calls = [e["call"] for e in log_entries(log) if "call" in e]
        _finish(McpRow(name, "python3"), nb, work, log, server)
    return row


def ask_table(rows: list[AskRow]) -> str:
    lines = ["| agent | version | kernel's acp_kernel | questions shown (agent's / server's or terminal's) | "
             "code in the agent's question | all answered Allow once | x == 42 (shell: ran) | seconds | notes |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mine, ours = r.agents_questions(), r.servers_questions()
        code = "-" if not mine else ("yes" if all(q.shows_code for q in mine) else "NO")
        answered = all(q.clicked and q.state == "answered" for q in r.questions)
        secs = ", ".join(f"{k} {v}" for k, v in r.seconds.items())
        lines.append(f"| {r.agent} | {r.version or '?'} | {r.kernel_acp_kernel} | {len(r.questions)} "
                     f"({len(mine)} / {len(ours)}) | {code} | {'yes' if answered else 'NO'} | "
                     f"{'yes' if r.execute_ok else 'NO'} | {secs} | {'; '.join(r.notes).replace('|', '/')} |")
    return "\n".join(lines)


def ask_details(rows: list[AskRow]) -> str:
    """Each question as shown, and each request's shape."""
    out = []
    for r in rows:
        out.append(f"## {r.agent} ({r.version or '?'}), kernel imported {r.kernel_acp_kernel}, "
                   f"server PYTHONPATH={r.server_pythonpath!r}, "
                   f"'Permission requested' in the final text: {r.fallback_questions}")
        for q in r.questions:
            out.append(f"- question {'(server)' if q.ours else '(agent)'}: {q.title!r} -> {q.state} {q.chosen!r}; "
                       f"shows the code: {q.shows_code}; detail: {_short(q.detail, 300)!r}")
        for shape in r.requests:
            out.append("- request_permission: " + json.dumps(shape)[:1500])
    return "\n".join(out)


def table(rows: list[McpRow]) -> str:
    def yn(v: bool) -> str:
        return "yes" if v else "NO"

    lines = ["| agent | kernel | connected | notebook tools as offered to the model | calls | servers started | "
             "tool result back | next cell | servers left | seconds | notes |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        back = yn(r.cells_ok) if r.kernel == "acp" else yn(r.variables_ok)
        nxt = "-" if r.kernel == "acp" else yn(r.execute_ok)
        calls = ", ".join(f"{c['namespace'] + ' ' if c.get('namespace') else ''}{c['name']}({json.dumps(c['args'])})"
                          for c in r.calls)
        secs = ", ".join(f"{k} {v}" for k, v in r.seconds.items())
        lines.append(f"| {r.agent} | {r.kernel} | {yn(r.connected)} | {', '.join(r.tools_seen) or '-'} | "
                     f"{calls or '-'} | {r.servers_started} | {back} | {nxt} | {len(r.servers_left)} | {secs} | "
                     f"{'; '.join(r.notes).replace('|', '/')} |")
    return "\n".join(lines)


def run(spec: str, base: Path, timeout: float) -> McpRow:
    name, _, where = spec.partition(":")
    if where == "acp":
        return run_acp_kernel(name, base, timeout)
    if where == "passthrough":
        return run_passthrough(name, base, timeout)
    return run_python3(name, base, timeout)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Real agents call the notebook MCP server, against a stub model.")
    ap.add_argument("names", nargs="*", help="gemini, opencode, claude-agent-acp, NAME:acp, claude:passthrough")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--ask", action="store_true", help="ask mode: questions per execute (NAME:ask for one)")
    ap.add_argument("--kernel-pythonpath", default="", help="ask mode: first on the kernel's PYTHONPATH")
    ap.add_argument("--action", choices=["execute", "shell"], default="execute",
                    help="ask mode: the notebook server's execute, or one command of the agent's own shell tool")
    ap.add_argument("--no-agent-allow", action="store_true",
                    help="ask mode: the claude profile without its mcp__notebook allow rule (Claude Code asks too)")
    args = ap.parse_args(argv)
    names = args.names or [n for n, a in ACP_AGENTS.items() if a.installed()]
    base = Path(tempfile.mkdtemp(prefix="realcli-mcp-"))
    asks = [n.partition(":")[0] for n in names if args.ask or n.endswith(":ask")]
    if asks:
        ask_rows = []
        for name in asks:
            print(f"... {name} (ask)", file=sys.stderr, flush=True)
            ask_rows.append(run_ask(name, base, args.timeout, args.kernel_pythonpath, not args.no_agent_allow,
                                    args.action))
            print(ask_table(ask_rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
        print(ask_table(ask_rows))
        print(ask_details(ask_rows))
        if args.json:
            args.json.write_text(json.dumps([asdict(r) for r in ask_rows], indent=1), encoding="utf-8")
        names = [n for n in names if not (args.ask or n.endswith(":ask"))]
        if not names:
            print(f"work directory: {base}", file=sys.stderr)
            if not args.keep:
                subprocess.run(["rm", "-rf", str(base)], check=False)
            return 0
    rows = []
    for spec in names:
        print(f"... {spec}", file=sys.stderr, flush=True)
        rows.append(run(spec, base, args.timeout))
        print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1), encoding="utf-8")
    print(f"work directory: {base}", file=sys.stderr)
    if not args.keep:
        subprocess.run(["rm", "-rf", str(base)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
