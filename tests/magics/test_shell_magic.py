"""``%%shell`` in IPython (the magic) and in the ACP kernel, and argv equality with the
terminal service that answers the agent's ``terminal/create``."""

from __future__ import annotations

import re

import pytest

from acp_kernel.protocol import proctree
from acp_kernel.client.host import ClientSettings
from acp_kernel.services.shell import shell_argv, terminal_request
from acp_kernel.frontends.shellcell import DEFAULT_LIMIT, ShellOptions, build, parse_options, run_shell
from acp_kernel.services.terminals import TerminalService, plan_command
from tests.services.conftest import FakeContext, FakeHost

# Pipes, quotes (a ; inside them), redirects both ways, stderr into the same pipe,
# && that runs and && that does not, ; and arithmetic expansion.
SCRIPT = (
    "echo 'a  b' | tr a-z A-Z && echo \"semi;colon\" ; echo err >&2; "
    "printf '%s\\n' \"x y\" > out.txt; cat < out.txt; false && echo never; echo $((6*7))"
)
SCRIPT_OUT = "A  B\nsemi;colon\nerr\nx y\n42\n"

# Two background sleepers: one in the shell's group, one in a session of its own.
GRANDCHILDREN = "sleep 30 & echo A=$!; setsid sleep 31 & echo B=$!; wait"

MULTIBYTE = "python3 -c \"print('€😀é' * 2000)\""


def _stdout(res) -> str:
    return "".join(m["content"]["text"] for m in res.outputs
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


def _grandchildren(text: str) -> list[int]:
    pids = [int(p) for p in re.findall(r"\b[AB]=(\d+)", text)]
    assert len(pids) == 2, text
    return pids


def _surviving(pids: list[int]) -> list[tuple[int, bytes]]:
    """The grandchildren still running: alive, and still the ``sleep`` the cell
    started (under a full suite a pid is soon taken by another process)."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if proctree.alive(pid) and cmd.split(b"\0")[:1] == [b"sleep"] and cmd.split(b"\0")[1:2] in ([b"30"], [b"31"]):
            out.append((pid, cmd))
    return out


def _check_limit(text: str) -> None:
    """``--limit`` bounds what the result keeps, not what the page shows: one
    18 KB line fits the window, whole characters, nothing replaced."""
    assert text == "€😀é" * 2000 + "\n"


async def test_shell_magic_in_ipython(magics, tmp_path):
    res = await magics.ok("%%shell\n" + SCRIPT)
    assert _stdout(res) == SCRIPT_OUT
    assert (tmp_path / "work" / "out.txt").read_text() == "x y\n"  # ran in the kernel's cwd
    assert await magics.value("_.exit_code, _.output, _.truncated, _.timed_out") == repr((0, SCRIPT_OUT, False, False))

    # A non-zero exit: shown, and the cell's value says so.
    res = await magics.ok("%%shell\necho before; exit 3")
    assert _stdout(res) == "before\n[exit code 3]\n"
    assert res.outputs[-1]["content"]["data"]["text/plain"] == "<ShellResult exit code 3, 7 chars>"
    assert await magics.value("_.exit_code") == "3"
    # --raise: the same exit makes the cell an error.
    res = await magics.execute("%%shell --raise\nexit 4")
    assert res.status == "error" and res.reply["content"]["ename"] == "ShellCellError"
    assert "exit code 4" in res.reply["content"]["evalue"]

    # --timeout kills the whole process group and tree, and says so.
    res = await magics.ok("%%shell --timeout 1\n" + GRANDCHILDREN)
    assert res.seconds >= 1.0, res.seconds  # not killed before its time (the harness's timeout bounds the rest)
    out = _stdout(res)
    assert "[timed out after 1 s: process group killed]" in out
    assert not _surviving(_grandchildren(out))
    assert await magics.value("_.timed_out, _.exit_code, _.status.signal is not None") == "(True, None, True)"

    # --limit: the result keeps the end, cut at a character boundary (1-4 byte
    # characters); the whole output is saved to a file.
    res = await magics.ok(f"%%shell --limit 1001\n{MULTIBYTE}")
    _check_limit(_stdout(res))
    kept = await magics.value("_.truncated, len(_.output.encode()) <= 1001, '\\ufffd' in _.output, "
                              "set(_.output) <= set('€😀é\\n'), _.full_output() == '€😀é' * 2000 + '\\n'")
    assert kept == "(True, True, False, True, True)"

    # --show-argv: exactly the CreateTerminalRequest's command and args, user's shell.
    res = await magics.ok("%%shell --show-argv\necho hi | cat")
    line, rest = _stdout(res).split("\n", 1)
    assert line == '{"command": "/bin/bash", "args": ["-c", "echo hi | cat"]}'  # SHELL=/bin/bash
    assert rest == "hi\n"
    same = await magics.value(
        "from acp_kernel.services.shell import terminal_request\n"
        "r = terminal_request('echo hi | cat')\n"
        "_.argv == (r['command'], *r['args'])")
    assert same == "True"

    # Bad options and a bad cwd: one line, the kernel lives.
    bad = await magics.execute("%%shell --bogus\necho")
    assert bad.status == "error" and bad.reply["content"]["traceback"] == []
    assert "unrecognized arguments: --bogus" in bad.error_line() and "usage: usage" not in bad.error_line()
    bad = await magics.execute("%%shell --cwd /no/such/dir\necho")
    assert bad.status == "error" and "does not exist" in bad.error_line()
    assert await magics.value("1 + 1") == "2"


async def test_shell_cell_in_the_acp_kernel(acp_sh_kernel):
    k = acp_sh_kernel
    res = await k.ok("%%shell\n" + SCRIPT)
    assert _stdout(res) == SCRIPT_OUT

    res = await k.ok("%%shell\necho before; exit 3")
    assert "before\n" in _stdout(res) and "exit code 3" in res.text()
    res = await k.execute("%%shell --raise\nexit 4")
    assert res.status == "error" and "exit code 4" in res.reply["content"]["evalue"]

    res = await k.ok("%%shell --show-argv\necho hi | cat")
    line = _stdout(res).split("\n", 1)[0]
    # The user's shell here is /bin/sh (SHELL=/bin/sh in the kernel's environment).
    assert line == '{"command": "/bin/sh", "args": ["-c", "echo hi | cat"]}'

    res = await k.ok("%%shell --timeout 1\n" + GRANDCHILDREN)
    out = _stdout(res)
    assert "[timed out after 1 s: process group killed]" in out
    assert not _surviving(_grandchildren(out))

    res = await k.ok(f"%%shell --limit 1001\n{MULTIBYTE}")
    _check_limit(_stdout(res))

    assert await k.km.is_alive()
    assert "demo agent" in (await k.ok("hello")).text()


# -- argv equality (unit level) --------------------------------------------------

LINES = [
    "echo hello | tr a-z A-Z",
    "cd /tmp && ls -la; echo 'done' > /dev/null 2>&1",
    "FOO=bar python3 -c \"import os; print(os.environ['FOO'])\"",
    "printf '%s\\n' \"$HOME\" `pwd` $((1+2)) ~ *.py",
    "for i in 1 2 3; do\n  echo \"é $i\"\ndone",
]


@pytest.mark.parametrize("line", LINES)
@pytest.mark.parametrize("shell", [None, "/bin/sh", "pwsh"])
def test_shell_cell_argv_is_terminal_request_and_the_fallback_argv(line, shell):
    opts = ShellOptions(pwsh=shell == "pwsh")
    argv, request = build(line, opts)
    expected = shell_argv(line, "pwsh" if opts.pwsh else None)
    assert argv == expected
    assert request == terminal_request(line, "pwsh" if opts.pwsh else None, output_byte_limit=DEFAULT_LIMIT)
    assert (request["command"], *request["args"]) == argv
    assert argv[-1] == line  # the line is passed through untouched
    # The terminal service's fallback for an agent that sends the bare line as `command`.
    plan = plan_command(line, None, shell_fallback=True, exists=lambda p: False, shell=shell if opts.pwsh else None)
    assert plan.via_shell and plan.argv == argv
    if shell == "/bin/sh":  # an explicit shell is honoured the same way on both paths
        req = terminal_request(line, shell)
        fallback = plan_command(line, None, shell_fallback=True, exists=lambda p: False, shell=shell)
        assert fallback.argv == shell_argv(line, shell) == (req["command"], *req["args"]) == ("/bin/sh", "-c", line)


def test_parse_options_round_trip():
    opts = parse_options("--timeout 1.5 --limit 10 --cwd /tmp --env A=1 --env B=x=y --show-argv --raise")
    assert (opts.timeout, opts.limit, opts.cwd, opts.env, opts.show_argv, opts.raise_on_error) == \
        (1.5, 10, "/tmp", {"A": "1", "B": "x=y"}, True, True)


async def test_bare_shell_line_from_an_agent_runs_the_same_argv_and_output_as_a_shell_cell(tmp_path):
    ctx = FakeContext("s1", str(tmp_path), ClientSettings(permissions="allow-all"))  # runs: no question
    svc = TerminalService(FakeHost(ctx))
    line = "echo 'a  b' | tr a-z A-Z && echo \"é;x\" ; pwd"
    tid = (await svc.create({"sessionId": "s1", "command": line, "outputByteLimit": 32000}))["terminalId"]
    (term,) = svc.terminals()
    assert term.via_shell and term.argv == shell_argv(line) and term.cwd == str(tmp_path)
    status = await svc.wait_for_exit({"sessionId": "s1", "terminalId": tid})
    agent_out = (await svc.output({"sessionId": "s1", "terminalId": tid}))["output"]
    await svc.shutdown()

    shown: list[str] = []
    result = await run_shell(line, parse_options([]), shown.append, cwd=str(tmp_path))
    assert result.argv == term.argv
    assert result.output == agent_out == "".join(shown) == f"A  B\né;x\n{tmp_path}\n"
    assert status == {"exitCode": 0, "signal": None} and result.exit_code == 0
