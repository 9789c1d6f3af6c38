"""The one argv builder: its shapes, its shell choice, and that every caller uses it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from acp_kernel.services import shell as shell_mod
from acp_kernel.services.shell import default_shell, looks_like_shell_line, shell_argv, shell_name, terminal_request
from acp_kernel.services.terminals import plan_command

LINE = 'echo "a b" | tr a-z A-Z && ls -la; x=$(pwd) 2>&1'


def test_spec_argv_shapes() -> None:
    assert shell_argv(LINE, "/bin/bash") == ("/bin/bash", "-c", LINE)
    assert shell_argv(LINE, "/usr/bin/zsh") == ("/usr/bin/zsh", "-c", LINE)
    # PowerShell, wherever it lives and however it is spelled.
    assert shell_argv("Get-ChildItem | Select -First 1", "pwsh") == ("pwsh", "-Command", "Get-ChildItem | Select -First 1")
    assert shell_argv("dir", r"C:\Program Files\PowerShell\7\PowerShell.EXE") == (
        r"C:\Program Files\PowerShell\7\PowerShell.EXE",
        "-Command",
        "dir",
    )
    assert shell_argv("dir /b", r"C:\Windows\system32\cmd.exe") == (r"C:\Windows\system32\cmd.exe", "/d", "/s", "/c", "dir /b")


def test_line_is_one_argument_never_split() -> None:
    argv = shell_argv(LINE, "/bin/sh")
    assert len(argv) == 3 and argv[2] == LINE


def test_windows_default_is_comspec() -> None:
    env = {"COMSPEC": r"C:\Windows\system32\cmd.exe"}
    assert shell_argv("echo hi", windows=True, env=env) == (env["COMSPEC"], "/d", "/s", "/c", "echo hi")
    assert shell_argv("echo hi", windows=True, env={})[0] == "cmd.exe"


def _fake_shell(dir: Path, name: str) -> str:
    p = dir / name
    p.write_text("#!/bin/sh\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


def test_default_shell_prefers_posix_user_shell(tmp_path: Path) -> None:
    zsh = _fake_shell(tmp_path, "zsh")
    assert default_shell(windows=False, env={"SHELL": zsh}) == zsh
    assert shell_argv("ls", windows=False, env={"SHELL": zsh}) == (zsh, "-c", "ls")


@pytest.mark.parametrize("name", ["fish", "csh", "tcsh", "nu", "xonsh"])
def test_default_shell_skips_non_posix_user_shells(tmp_path: Path, name: str) -> None:
    user = _fake_shell(tmp_path, name)
    chosen = default_shell(windows=False, env={"SHELL": user})
    assert chosen in ("/bin/bash", "/bin/sh")
    assert chosen == ("/bin/bash" if os.access("/bin/bash", os.X_OK) else "/bin/sh")


def test_default_shell_skips_missing_or_relative(tmp_path: Path) -> None:
    assert default_shell(windows=False, env={"SHELL": str(tmp_path / "bash")}) in ("/bin/bash", "/bin/sh")
    assert default_shell(windows=False, env={"SHELL": "bash"}) in ("/bin/bash", "/bin/sh")
    assert default_shell(windows=False, env={}) in ("/bin/bash", "/bin/sh")


def test_shell_name() -> None:
    assert shell_name("/usr/local/bin/pwsh") == "pwsh"
    assert shell_name(r"C:\x\CMD.EXE") == "cmd"


def test_terminal_request_shape() -> None:
    req = terminal_request("echo hello | tr a-z A-Z", "/bin/bash")
    assert req == {"command": "/bin/bash", "args": ["-c", "echo hello | tr a-z A-Z"]}
    full = terminal_request(
        "make", "/bin/sh", session_id="s", cwd="/w", env={"A": "1"}, output_byte_limit=10
    )
    assert full == {
        "sessionId": "s",
        "command": "/bin/sh",
        "args": ["-c", "make"],
        "cwd": "/w",
        "env": [{"name": "A", "value": "1"}],
        "outputByteLimit": 10,
    }
    # It is a valid ACP CreateTerminalRequest.
    from acp.schema import CreateTerminalRequest

    CreateTerminalRequest.model_validate(full)


@pytest.mark.parametrize(
    "cmd,expected",
    [
        ("echo hello | tr a-z A-Z", True),
        ("git rev-parse --short HEAD", True),
        ("ls>out", True),
        ("a&&b", True),
        ("$HOME/bin/x", True),
        ("pwd", False),
        ("/usr/bin/env", False),
        ("", False),
    ],
)
def test_looks_like_shell_line(cmd: str, expected: bool) -> None:
    assert looks_like_shell_line(cmd) is expected


@pytest.mark.parametrize(
    "line",
    ["echo hello", "git rev-parse --short HEAD", 'python3 -c "print(7*8)"', "cat README.md | head -5"],
)
def test_every_caller_builds_identical_argv(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """shell_argv, terminal_request and the terminal service's fallback agree,
    for the default shell and for PowerShell (the builder is patched to prove
    the fallback goes through it rather than through a copy)."""
    direct = shell_argv(line)
    req = terminal_request(line)
    assert (req["command"], *req["args"]) == direct
    plan = plan_command(line, None, shell_fallback=True, exists=lambda p: False)
    assert plan.via_shell and plan.argv == direct

    calls: list[str] = []

    def pwsh_argv(l: str, shell: str | None = None, **kw: object) -> tuple[str, ...]:
        calls.append(l)
        return ("pwsh", "-Command", l)

    import acp_kernel.services.terminals as terminals_mod

    monkeypatch.setattr(shell_mod, "shell_argv", pwsh_argv)
    monkeypatch.setattr(terminals_mod, "shell_argv", pwsh_argv)
    plan = plan_command(line, None, shell_fallback=True, exists=lambda p: False)
    assert plan.argv == ("pwsh", "-Command", line)
    assert (terminal_request(line)["command"], *terminal_request(line)["args"]) == plan.argv
    assert calls == [line, line, line]


def test_single_word_program_runs_directly() -> None:
    plan = plan_command("pwd", None, shell_fallback=True, exists=lambda p: p == "pwd")
    assert plan.argv == ("pwd",) and not plan.via_shell


def test_terminal_request_uses_shell_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shell_mod, "shell_argv", lambda line, shell=None, **kw: ("X", "-y", line))
    assert terminal_request("a b") == {"command": "X", "args": ["-y", "a b"]}
