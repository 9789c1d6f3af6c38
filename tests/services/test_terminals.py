"""Terminals: spec argv, the shell-line fallback, bounded output, kill/release, trees."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from acp_kernel.protocol import proctree
from acp_kernel.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from acp_kernel.services.events import Notice, TerminalExited, TerminalStarted
from acp_kernel.services.shell import shell_argv
from acp_kernel.services.terminals import ExitStatus, Terminal, TerminalService

from .conftest import FakeContext, FakeHost

PY = sys.executable


@pytest.fixture(autouse=True)
def allow_all(ctx: FakeContext) -> None:
    """These tests are about running terminals: the policy allows them
    (tests/hostile/test_policy.py covers the policy)."""
    ctx.settings.permissions = "allow-all"


# -- over the wire ------------------------------------------------------------------


async def test_spec_argv_runs_without_shell(wire, ctx: FakeContext) -> None:
    w = await wire(
        [
            {"send": "terminal/create", "key": "c", "params": {"sessionId": "s1", "command": PY, "args": ["-c", "import sys; print(sys.argv[1:])", "a b", "$HOME"]}},
            {"send": "terminal/wait_for_exit", "key": "w", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
            {"await": "w"},
            {"send": "terminal/output", "key": "o", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
        ]
    )
    assert (await w.result("w")) == {"exitCode": 0, "signal": None}
    out = await w.result("o")
    assert out == {"output": "['a b', '$HOME']\n", "truncated": False, "exitStatus": {"exitCode": 0, "signal": None}}
    started = ctx.of(TerminalStarted)[0]
    assert started.argv == (PY, "-c", "import sys; print(sys.argv[1:])", "a b", "$HOME")
    assert not started.via_shell and started.cwd == ctx.cwd


async def test_bare_shell_line_runs_through_shell_argv_in_session_cwd(wire, ctx: FakeContext) -> None:
    line = "echo hello | tr a-z A-Z && pwd"
    w = await wire(
        [
            # The shape real agents send: whole line, no args, no cwd.
            {"send": "terminal/create", "key": "c", "params": {"sessionId": "s1", "command": line, "outputByteLimit": 32000}},
            {"send": "terminal/wait_for_exit", "key": "w", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
            {"await": "w"},
            {"send": "terminal/output", "key": "o", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
        ]
    )
    out = await w.result("o")
    assert out["output"] == f"HELLO\n{ctx.cwd}\n"
    started = ctx.of(TerminalStarted)[0]
    assert started.via_shell and started.argv == shell_argv(line)
    assert "shell line" in started.note


async def test_shell_fallback_off_explains(wire, ctx: FakeContext) -> None:
    ctx.settings.shell_fallback = False
    w = await wire([{"send": "terminal/create", "key": "c", "params": {"sessionId": "s1", "command": "echo hi | cat"}}])
    err = await w.error("c")
    assert err["code"] == INVALID_PARAMS
    assert "looks like a shell line" in err["message"] and "args=['-c', 'echo hi | cat']" in err["message"]


async def test_missing_program_is_a_clear_error(wire, ctx: FakeContext) -> None:
    w = await wire(
        [
            {"send": "terminal/create", "key": "a", "params": {"sessionId": "s1", "command": "/nonexistent/prog", "args": ["x"]}},
            {"send": "terminal/create", "key": "b", "params": {"sessionId": "s1", "command": "no-such-program-xyz"}},
            {"send": "terminal/create", "key": "c", "params": {"sessionId": "s1", "command": PY, "args": [], "cwd": "relative/dir"}},
            {"send": "terminal/create", "key": "d", "params": {"sessionId": "nope", "command": PY}},
            {"send": "terminal/create", "key": "e", "params": {"sessionId": "s1", "command": PY, "cwd": "/nonexistent/dir"}},
        ]
    )
    a, b, c, d, e = [await w.error(k) for k in "abcde"]
    assert a["code"] == RESOURCE_NOT_FOUND and "'/nonexistent/prog' was not found" in a["message"]
    assert b["code"] == RESOURCE_NOT_FOUND and "'no-such-program-xyz' was not found" in b["message"]
    assert c["code"] == INVALID_PARAMS and "absolute" in c["message"]
    assert d["code"] == INVALID_PARAMS and "'nope'" in d["message"]
    assert e["code"] == RESOURCE_NOT_FOUND and "/nonexistent/dir" in e["message"]
    assert len(ctx.of(Notice)) >= 3
    assert w.services.terminals.terminals() == []


async def test_megabyte_of_e_acute_is_cut_to_whole_chars(wire) -> None:
    code = "import sys; sys.stdout.buffer.write('é'.encode() * 500_000)"
    w = await wire(
        [
            {"send": "terminal/create", "key": "c", "params": {"sessionId": "s1", "command": PY, "args": ["-c", code], "outputByteLimit": 1001}},
            {"send": "terminal/wait_for_exit", "key": "w", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
            {"await": "w"},
            {"send": "terminal/output", "key": "o", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
        ]
    )
    out = await w.result("o")
    raw = out["output"].encode("utf-8")
    assert 0 < len(raw) <= 1001
    assert out["output"] == "é" * (len(raw) // 2) and "\ufffd" not in out["output"]
    assert out["truncated"] is True


async def test_release_answers_pending_wait_and_frees_the_id(wire, ctx: FakeContext) -> None:
    w = await wire(
        [
            {"send": "terminal/create", "key": "c", "params": {"sessionId": "s1", "command": "sleep", "args": ["30"]}},
            {"send": "terminal/wait_for_exit", "key": "w", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
            {"wait_go": "release"},
            {"send": "terminal/release", "key": "r", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
            {"await": "r"},
            {"await": "w"},
            {"send": "terminal/output", "key": "o", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
            {"send": "terminal/wait_for_exit", "key": "w2", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
        ]
    )
    started = (await ctx.until(TerminalStarted))[0]
    term = started.terminal
    assert term.running
    w.go("release")
    waited = await w.result("w")
    assert waited["exitCode"] is None and waited["signal"] in ("SIGTERM", "SIGKILL")
    assert await w.result("r") == {}
    for key in ("o", "w2"):
        err = await w.error(key)
        assert err["code"] == RESOURCE_NOT_FOUND and "unknown terminal" in err["message"]
    assert not proctree.alive(term.pid)
    assert term.released and term.how == "released"
    exited = ctx.of(TerminalExited)
    assert exited and exited[0].how == "released"


async def test_kill_ends_grandchildren_and_keeps_the_id(wire, ctx: FakeContext) -> None:
    # A plain background grandchild and one in its own session (setsid).
    line = "sleep 300 & echo $!; setsid sleep 301 & echo $!; wait"
    w = await wire(
        [
            {"send": "terminal/create", "key": "c", "params": {"sessionId": "s1", "command": "/bin/sh", "args": ["-c", line]}},
            {"wait_go": "kill"},
            {"send": "terminal/kill", "key": "k", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
            {"await": "k"},
            {"send": "terminal/output", "key": "o", "params": {"sessionId": "s1", "terminalId": "${c.terminalId}"}},
        ]
    )
    await w.result("c")
    term = ctx.of(TerminalStarted)[0].terminal
    got_pids: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
    seen: list[str] = []

    def on_out(text: str) -> None:
        seen.append(text)
        lines = "".join(seen).split()
        if len(lines) >= 2 and not got_pids.done():
            got_pids.set_result([int(x) for x in lines[:2]])

    term.subscribe(on_out)
    pids = await asyncio.wait_for(got_pids, 10)
    assert all(proctree.alive(p) for p in pids)
    w.go("kill")
    assert await w.result("k") == {}
    assert not any(proctree.alive(p) for p in pids), "a grandchild survived terminal/kill"
    out = await w.result("o")
    assert out["exitStatus"]["signal"] in ("SIGTERM", "SIGKILL")


async def test_exit_code_and_env_and_stdin(host: FakeHost, ctx: FakeContext) -> None:
    svc = TerminalService(host)
    tid = (await svc.create({"sessionId": "s1", "command": "/bin/sh", "args": ["-c", 'cat; printf "%s:%s" "$FOO" "${PATH:+path}"; echo err >&2; exit 3'], "env": [{"name": "FOO", "value": "bar"}]}))["terminalId"]
    status = await svc.wait_for_exit({"sessionId": "s1", "terminalId": tid})
    assert status == {"exitCode": 3, "signal": None}
    out = await svc.output({"sessionId": "s1", "terminalId": tid})
    assert out["output"] == "bar:patherr\n"  # stdin was empty, stderr shares the pipe
    # A terminal of another session is not visible.
    other = FakeContext("s2", ctx.cwd, ctx.settings)
    host.contexts["s2"] = other
    with pytest.raises(RpcError) as info:
        await svc.output({"sessionId": "s2", "terminalId": tid})
    assert info.value.code == RESOURCE_NOT_FOUND
    await svc.shutdown()


async def test_shutdown_kills_every_terminal(host: FakeHost) -> None:
    svc = TerminalService(host)
    ids = [(await svc.create({"sessionId": "s1", "command": "sleep", "args": ["60"]}))["terminalId"] for _ in range(3)]
    terms = svc.terminals()
    assert len(terms) == 3 and all(t.running for t in terms)
    await svc.shutdown()
    assert not any(proctree.alive(t.pid) for t in terms)
    assert all(t.exit_status is not None and t.exit_status.signal for t in terms)
    assert svc.terminals() == [] and ids


# -- the Terminal on its own (what %%shell uses) ---------------------------------------


async def test_terminal_timeout_kills_the_group(tmp_path: Path) -> None:
    term = Terminal(shell_argv("sleep 30 & sleep 31; echo never"), cwd=str(tmp_path), timeout=0.3)
    await term.start()
    status = await asyncio.wait_for(term.wait(), 10)
    assert term.timed_out and term.how == "timeout"
    assert status.signal in ("SIGTERM", "SIGKILL") and status.exit_code is None
    assert proctree.tree(term.pid) == set()


async def test_live_output_decodes_split_chars_and_survives_release(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "o = sys.stdout.buffer\n"
        "o.write(b'a\\xc3'); o.flush()\n"
        "sys.stdin.read()\n"  # /dev/null: returns at once
        "o.write(b'\\xa9b\\n'); o.flush()\n"
    )
    term = Terminal([PY, "-c", code], cwd=str(tmp_path))
    chunks: list[str] = []
    exits: list[ExitStatus] = []
    term.subscribe(chunks.append, exits.append)
    await term.start()
    status = await term.wait()
    assert status == ExitStatus(0, None) and exits == [status]
    assert "".join(chunks) == "aéb\n" and all("\ufffd" not in c for c in chunks)
    await term.release()
    late: list[str] = []
    late_exit: list[ExitStatus] = []
    term.subscribe(late.append, late_exit.append)
    assert late == ["aéb\n"] and late_exit == [status]
    assert term.output() == ("aéb\n", False)


async def test_terminal_start_errors(tmp_path: Path) -> None:
    from acp_kernel.services.terminals import TerminalError

    with pytest.raises(TerminalError, match="no such program"):
        await Terminal([str(tmp_path / "missing")], cwd=str(tmp_path)).start()
    script = tmp_path / "noexec"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(TerminalError, match="permission denied"):
        await Terminal([str(script)], cwd=str(tmp_path)).start()
    assert os.path.exists(script)


def test_exit_status_from_returncode() -> None:
    assert ExitStatus.from_returncode(0).to_dict() == {"exitCode": 0, "signal": None}
    assert ExitStatus.from_returncode(-9).to_dict() == {"exitCode": None, "signal": "SIGKILL"}
    assert str(ExitStatus.from_returncode(-15)) == "killed by SIGTERM"


def test_resubscribe_after_unsubscribe_stays_in_sync() -> None:
    """Bytes that arrive while nobody listens must not desync the live decoder."""
    term = Terminal(["true"])  # not started: feed output by hand, deterministically
    e = "é".encode()
    first: list[str] = []
    unsub = term.subscribe(first.append)
    term._on_output(b"a" + e[:1])
    unsub()
    g = "😀".encode()
    term._on_output(e[1:] + b"b" + g[:2])  # nobody listening
    second: list[str] = []
    term.subscribe(second.append)
    assert second == ["aéb"]  # replay of the complete text
    term._on_output(g[2:])
    assert first == ["a"] and second == ["aéb", "😀"]
