"""Nothing outlives its session: daemons that ``setsid`` and double-fork
(from a terminal or from the agent itself) end with the terminal, the
session, the agent, the kernel; an agent that exits while a child holds its
stdout ends the turn at once; files holding commands and tokens are private.

Real processes throughout: ``tests/agents/daemonize.py`` forks, ``setsid``s,
forks again and writes the daemon's pid to a file before its first process
exits (so a test that waited for that exit reads the pid at once).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from acp_kernel.client.host import ClientSettings
from acp_kernel.client.registry import AgentSpec
from acp_kernel.client.session import Client
from acp_kernel.protocol import proctree
from acp_kernel.services.terminals import Terminal
from tests.kernels import IpcKernelManager

from ..conftest import AGENTS, scripted_spec
from .conftest import cmdline, gone, open_session, wait_until
from ..kernel.conftest import KernelHarness, scripted_command

PY = sys.executable
DAEMONIZE = str(AGENTS / "daemonize.py")
ALLOW_ALL = ClientSettings(permissions="allow-all")
#: What an agent may print, for every output path (CLAUDE-like hostile text).
HOSTILE = "<img src=x onerror=alert(1)> `code\nspan` $x$ \\(a\\) \\[b\\] \\begin{x} /tmp/a\nb.txt"


def daemon_pid(pidfile: Path) -> int:
    pid = int(pidfile.read_text())
    assert proctree.alive(pid) and "daemonize" in cmdline(pid)
    return pid


def cleanup(pidfile: Path) -> None:
    """A daemon a failed test left: ours by its command line and pid file."""
    try:
        pid = int(pidfile.read_text())
    except (OSError, ValueError):
        return
    if proctree.alive(pid) and "daemonize" in cmdline(pid) and str(pidfile) in cmdline(pid):
        os.kill(pid, signal.SIGKILL)


def terminal_daemon_scenario(pidfile: Path) -> dict:
    """The agent runs the daemonizer in a terminal and waits for its first process."""
    return {"prompt": [
        {"request": {"method": "terminal/create",
                     "params": {"sessionId": "$SID", "command": PY, "args": [DAEMONIZE, str(pidfile)]}}},
        {"request": {"method": "terminal/wait_for_exit", "params": {"sessionId": "$SID", "terminalId": "$TERM"}}},
        {"chunk": "DONE " + HOSTILE},
    ]}


# -- terminals -----------------------------------------------------------------------------


async def test_a_terminals_double_forked_daemon_ends_with_its_release(tmp_path):
    pidfile = tmp_path / "daemon.pid"
    term = await Terminal([PY, DAEMONIZE, str(pidfile)]).start()
    try:
        status = await asyncio.wait_for(term.wait(), 20)
        assert status.exit_code == 0
        pid = daemon_pid(pidfile)
        assert pid not in proctree.tree(term.pid)  # it left the tree and the group
        await term.release()
        assert not proctree.alive(pid)  # release waited for it
    finally:
        cleanup(pidfile)


async def test_a_daemon_that_drops_the_marker_is_still_ended_by_its_cgroup(tmp_path):
    from acp_kernel.protocol import cgroup

    if cgroup.base() is None:
        pytest.skip("no writable cgroup v2 here: the marker and the tree are all there is")
    pidfile = tmp_path / "daemon.pid"
    # No marker, out of the group and the tree (re-parented to init: a library user is no subreaper).
    term = await Terminal(["env", "-u", proctree.MARKER_VAR, PY, DAEMONIZE, str(pidfile)]).start()
    try:
        assert (await asyncio.wait_for(term.wait(), 20)).exit_code == 0
        pid = daemon_pid(pidfile)
        assert proctree.marker_of(pid) is None and pid not in proctree.tree(term.pid)
        assert pid in cgroup.procs(term.scope.cgroup)
        await term.release()
        assert not proctree.alive(pid)
    finally:
        cleanup(pidfile)


@pytest.mark.parametrize("how", ["session-close", "disconnect"])
async def test_an_agent_terminals_daemon_ends_with_the_session(tmp_path, how):
    pidfile = tmp_path / "daemon.pid"
    client, session = await open_session(terminal_daemon_scenario(pidfile), settings=ALLOW_ALL)
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 20)
        assert "DONE " + HOSTILE in turn.text and '"exitCode": 0' in turn.text, turn.text
        pid = daemon_pid(pidfile)
        if how == "session-close":
            await client.services.close_session(session.id)
            assert not proctree.alive(pid)
            assert client.alive  # only the session's processes ended
        else:
            await client.close()
            assert not proctree.alive(pid)
    finally:
        await client.close()
        cleanup(pidfile)


async def test_a_daemon_the_agent_double_forks_ends_when_the_agent_is_stopped(tmp_path):
    pidfile = tmp_path / "daemon.pid"
    client, session = await open_session({"prompt": [
        {"spawn": shlex.join([PY, DAEMONIZE, str(pidfile)])}, {"chunk": HOSTILE}]})
    agent = client.transport.pid
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 20)
        assert HOSTILE in turn.text
        await wait_until(pidfile.exists, 20)  # the spawn is not waited for by the agent
        pid = daemon_pid(pidfile)
        assert pid not in proctree.tree(agent)
        await client.close()
        assert not proctree.alive(pid)
    finally:
        await client.close()
        cleanup(pidfile)


# -- an agent that exits while a child holds its stdout ------------------------------------------------


def holding_agent(pidfile: Path, scenario: dict) -> list[str]:
    """An agent command: a daemon that keeps the agent's stdout (the wire)
    open starts first, then the scripted agent runs in the same process."""
    agent = shlex.join(scripted_spec(scenario).command)
    return ["sh", "-c", f"{shlex.join([PY, DAEMONIZE, str(pidfile), 'hold'])} && exec {agent}"]


EXITING = {"prompt": [{"chunk": "partial " + HOSTILE}, {"stderr": "panic: " + HOSTILE}, {"exit": 3}]}


async def test_agent_exit_mid_turn_ends_the_turn_though_a_child_holds_its_stdout(tmp_path):
    pidfile = tmp_path / "daemon.pid"
    spec = AgentSpec(name="holder", title="holder", command=tuple(holding_agent(pidfile, EXITING)))
    client = await Client(spec).start()
    try:
        session = await client.new_session()
        pid = daemon_pid(pidfile)
        turn = await asyncio.wait_for(session.prompt("go"), 20)  # today: never ends
        assert turn.text == "partial " + HOSTILE
        assert "exit status 3" in turn.error and "panic: <img src=x" in turn.error, turn.error
        assert "exited" in turn.error
        assert not client.alive
        await gone([pid])  # the holder was ended with the agent
    finally:
        await client.close()
        cleanup(pidfile)


def _cli_env() -> dict[str, str]:
    return {**os.environ, "ACP_KERNEL_CONFIG": os.devnull, "PYTHONUNBUFFERED": "1"}


def test_cli_prompt_ends_when_the_agent_exits_though_a_child_holds_its_stdout(tmp_path):
    pidfile = tmp_path / "daemon.pid"
    argv = [PY, "-m", "acp_kernel.frontends.cli", "prompt", "--agent-command",
            shlex.join(holding_agent(pidfile, EXITING)), "go"]
    try:
        res = subprocess.run(argv, capture_output=True, timeout=60, env=_cli_env(), stdin=subprocess.DEVNULL)
        err = res.stderr.decode()
        assert res.returncode == 1, err
        assert "exit status 3" in err and "panic:" in err, err
        pid = int(pidfile.read_text())
        assert not proctree.alive(pid)  # the CLI ended it before exiting
    finally:
        cleanup(pidfile)


# -- the kernel ---------------------------------------------------------------------------------------


async def _kernel(kernel_env, tmp_path):
    km = IpcKernelManager(kernel_name="acp")
    await km.start_kernel(env=kernel_env, cwd=str(tmp_path / "work"))
    kc = km.client()
    kc.start_channels()
    await kc.wait_for_ready(timeout=60)
    return km, kc, KernelHarness(km, kc)


async def test_kernel_shutdown_ends_a_terminals_daemon(kernel_env, tmp_path):
    pidfile = tmp_path / "daemon.pid"
    km, kc, harness = await _kernel(kernel_env, tmp_path)
    try:
        res = await harness.execute(f"%agent --command {scripted_command(terminal_daemon_scenario(pidfile))}")
        assert res.status == "ok", res.text()
        assert (await harness.execute("%permissions allow-all")).status == "ok"
        res = await harness.execute("go", timeout=60)
        assert "DONE" in res.text(), res.text()
        pid = daemon_pid(pidfile)
        kc.stop_channels()
        await km.shutdown_kernel(now=False)
        await gone([pid], timeout=20)
    finally:
        kc.stop_channels()
        if await km.is_alive():
            await km.shutdown_kernel(now=True)
        cleanup(pidfile)


async def test_kernel_cell_ends_when_the_agent_exits_though_a_child_holds_its_stdout(kernel_env, tmp_path):
    pidfile = tmp_path / "daemon.pid"
    km, kc, harness = await _kernel(kernel_env, tmp_path)
    try:
        res = await harness.execute(f"%agent --command {shlex.join(holding_agent(pidfile, EXITING))}")
        assert res.status == "ok", res.text()
        res = await harness.execute("go", timeout=60)  # today: the cell hangs until interrupted
        text = res.text()
        assert "exit status 3" in text and "panic:" in text, text
        for msg in res.outputs:  # the agent's HTML is never live markup
            html = msg["content"].get("data", {}).get("text/html", "")
            assert "<img src=x" not in html
        await gone([int(pidfile.read_text())])
        # the next cell starts the agent again (a fresh holder too) and works up to the same exit
        res = await harness.execute("go", timeout=60)
        assert "exit status 3" in res.text()
        await gone([int(pidfile.read_text())])
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=False)
        cleanup(pidfile)


# -- the subreaper (in a process of its own: it changes what happens to every orphan) ---------------------------


REAPER_SCRIPT = r"""
import asyncio, json, os, subprocess, sys
from acp_kernel.protocol import proctree
from acp_kernel.protocol.scope import adopt_orphans
from acp_kernel.services.terminals import Terminal

async def main():
    assert adopt_orphans()
    # A terminal whose shell leaves an orphan behind: it is re-parented to us.
    term = await Terminal(["sh", "-c", "sh -c 'read x < /dev/null; exec sleep 300' & echo $!"]).start()
    await asyncio.wait_for(term.wait(), 20)
    orphan = int(term.output()[0].split()[0])
    adopted = proctree.stat(orphan).ppid == os.getpid()
    # Return codes of our own children stay right while the reaper works.
    codes = []
    for i in range(10):
        p = await asyncio.create_subprocess_exec("sh", "-c", f"exit {i}")
        codes.append(await p.wait())
        codes.append(subprocess.run(["sh", "-c", f"exit {i + 20}"]).returncode)
    await term.release()
    zombies = [p for p in proctree.own_children() if (proctree.stat(p) or proctree.Proc(0, 0, 0, b"?")).state == b"Z"]
    print(json.dumps({"adopted": adopted, "alive": proctree.alive(orphan), "codes": codes, "zombies": zombies}))

asyncio.run(main())
"""


def test_the_subreaper_adopts_orphans_reaps_them_and_steals_no_return_code():
    res = subprocess.run([PY, "-c", REAPER_SCRIPT], capture_output=True, timeout=60, text=True)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["adopted"], out  # re-parented to us, not to init
    assert not out["alive"] and out["zombies"] == [], out  # ended with the terminal, and reaped
    assert out["codes"] == [c for i in range(10) for c in (i, i + 20)], out


# -- files that hold commands, prompts or tokens ---------------------------------------------------


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_session_store_is_private(tmp_path, monkeypatch):
    from acp_kernel.client import store

    path = tmp_path / "state" / "acp_kernel" / "sessions.json"
    monkeypatch.setenv("ACP_KERNEL_STATE", str(path))
    entry = store.Remembered("a", ["agent", "--token", "s3cret " + HOSTILE], "sid", "/tmp/a\nb")
    store.remember("nb.ipynb", entry)
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert store.recall("nb.ipynb") == entry
    # one written before (0644 in a 0755 folder) is made private on the next write
    os.chmod(path, 0o644)
    os.chmod(path.parent, 0o755)
    store.remember("other", entry)
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    assert store.recall("nb.ipynb") == entry and store.recall("other") == entry


def test_generated_mcp_config_is_private():
    import shutil

    from acp_kernel.passthrough.notebook import write_config

    path = write_config({"command": PY, "args": ["-m", "acp_kernel.notebook_mcp", "--token", "t0k"], "env": []})
    try:
        assert mode(path) == 0o600 and mode(os.path.dirname(path)) == 0o700
        assert "t0k" in Path(path).read_text()
    finally:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def test_shell_spool_is_private():
    from acp_kernel.frontends.shellview import Spool

    spool = Spool(1000)
    spool.write("secret output " + HOSTILE)
    try:
        assert spool.path is not None
        assert mode(spool.path) == 0o600 and mode(os.path.dirname(spool.path)) == 0o700
    finally:
        spool.close(keep=False)
