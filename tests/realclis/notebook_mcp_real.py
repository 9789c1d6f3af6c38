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
"""

from __future__ import annotations

import argparse
import json
import os
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
from clis import KIMI_BIN, NPM_BIN, prepare  # noqa: E402
from run_matrix import Notebook, alive, cmdline, descendants, kernelspec_dir, under, wait_for  # noqa: E402
from stub_model_server import StubServer  # noqa: E402

SERVER_MARK = "acp_kernel.notebook_mcp"
VARIABLES = "TOOL:variables {}"
EXECUTE = 'TOOL:execute {"code": "x = 41 + 1"}'
CELLS = "TOOL:cells {}"
FIRST_ACP_CELL = "echo alpha-one"


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


def notebook_tools(entries: list[dict[str, Any]]) -> list[str]:
    """The tool names of our server as the agent offered them to the model (first request that had any)."""
    ours = ("execute", "variables", "cells")
    for entry in entries:
        names = [n for n in entry.get("tools", []) if any(n.endswith(t) for t in ours) and "notebook" in n.lower()]
        names = names or [n for n in entry.get("tools", []) if n in ours]
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
        t0 = time.monotonic()
        conn = nb.run(f"%acp connect --command {shlex.join(agent.argv())} --permissions allow-all", timeout)
        row.seconds["connect"] = round(time.monotonic() - t0, 2)
        row.connected = conn.done and "Connected" in conn.text() and "UsageError" not in conn.text()
        if not row.connected:
            row.notes.append("connect: " + _short(conn.text(), 300))
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
    args = ap.parse_args(argv)
    names = args.names or [n for n, a in ACP_AGENTS.items() if a.installed()]
    base = Path(tempfile.mkdtemp(prefix="realcli-mcp-"))
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
