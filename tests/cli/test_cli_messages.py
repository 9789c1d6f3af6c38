"""What a person reads from ``acp-kernel``: exit codes and words, each
message checked over real processes (the CLI, real agent processes, a fake
``npx`` on PATH)."""

from __future__ import annotations

import json
import os
import pty
import select
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import AGENTS

HERE = Path(__file__).parent
FAILING = HERE / "failing_agent.py"
CLAUDE_PKG = "@agentclientprotocol/claude-agent-acp"
INTERNAL = {"code": -32603, "message": "Internal error", "data": {"details": "Claude Code process exited with code 1"}}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ACP_KERNEL_AGENT", "ANTHROPIC_API_KEY")}
    env.update({"ACP_KERNEL_CONFIG": os.devnull, "LC_ALL": "C.UTF-8", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def _cli(*args: str | bytes, stdin: bytes | None = None, env: dict[str, str] | None = None,
         cwd: str | None = None) -> subprocess.CompletedProcess:
    res = subprocess.run([sys.executable, "-m", "acp_kernel", *args], input=stdin or b"",
                         capture_output=True, timeout=120, env=env or _env(), cwd=cwd)
    res.out = res.stdout.decode()  # type: ignore[attr-defined]
    res.err = res.stderr.decode()  # type: ignore[attr-defined]
    return res


def _agent(scenario: dict, script: Path = FAILING) -> str:
    return shlex.join([sys.executable, str(script), json.dumps(scenario)])


def _with_tty_stderr(argv: list[str], env: dict[str, str], timeout: float = 120) -> tuple[int, str, str]:
    """Run with stderr on a real terminal (stdout a pipe); (exit code, stdout, terminal text)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            seen += data
        out = proc.stdout.read().decode()  # type: ignore[union-attr]
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
    return code, out, seen.decode().replace("\r\n", "\n")


def _fake_npx(bin_dir: Path, scenario: dict | None = None, version_fails: bool = False) -> Path:
    """A fake ``npx`` that answers --version and otherwise runs the failing agent."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    npx = bin_dir / "npx"
    version = "echo 'npm ERR! node: not found' >&2; exit 1" if version_fails else "echo 10.9.0; exit 0"
    run = f"exec {_agent(scenario or {'at': 'initialize', 'exit': 1})}"
    npx.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then {version}; fi\n{run}\n')
    npx.chmod(0o755)
    return npx


# -- the nits -----------------------------------------------------------------------------


def test_version():
    from importlib.metadata import version

    res = _cli("--version")
    assert res.returncode == 0
    assert res.out.strip() == f"acp-kernel {version('acp-kernel')}"


def test_no_arguments_prints_the_help_and_exits_2():
    res = _cli()
    assert res.returncode == 2
    assert res.out.startswith("usage: acp-kernel")
    for word in ("prompt", "agents", "install", "--version", "exit status is 2"):
        assert word in res.out
    assert "error:" not in res.err and "Traceback" not in res.err


def test_prompt_help_lists_the_exit_codes():
    res = _cli("prompt", "--help")
    assert res.returncode == 0
    assert "exit codes:" in res.out
    for row in ("0    the turn ended", "1    the agent failed", "2    usage or configuration error",
                "3    the agent requires authentication", "4    the agent refused", "5    the turn was cancelled",
                "6    a limit was reached", "130  SIGINT (Ctrl-C), 143 SIGTERM, 129 SIGHUP"):
        assert row in res.out, row


def test_an_unbalanced_quote_is_a_one_line_usage_error():
    res = _cli("prompt", "--agent-command", "my-agent --name 'unbalanced", "hi")
    assert res.returncode == 2
    assert res.err == ("acp-kernel: --agent-command: cannot read the agent command "
                       "\"my-agent --name 'unbalanced\": no closing quotation\n")


def test_a_cwd_that_is_no_directory_is_a_usage_error_naming_it(tmp_path):
    missing = tmp_path / "no\x1b[2Jsuch"
    res = _cli("prompt", "--agent", "demo", "--cwd", str(missing), "hello")
    assert res.returncode == 2 and res.out == ""  # the agent never started
    assert "argument --cwd: no such directory: " in res.err and "\x1b" not in res.err
    afile = tmp_path / "a-file"
    afile.write_text("")
    res = _cli("prompt", "--agent", "demo", "--cwd", str(afile), "hello")
    assert res.returncode == 2 and f"argument --cwd: not a directory: {afile}" in res.err


@pytest.mark.parametrize("command", ["", "   "])
def test_an_empty_agent_command_is_a_usage_error_not_the_demo(command):
    res = _cli("prompt", "--agent-command", command, "hello")
    assert res.returncode == 2
    assert "acp-kernel: --agent-command: empty agent command" in res.err
    assert res.out == ""  # the demo agent did not answer


@pytest.mark.parametrize("command", [["prompt", "--agent", "demo", "hi"], ["agents"]])
def test_a_missing_config_file_is_named(tmp_path, command):
    missing = tmp_path / "acp_kernal.json"
    res = _cli(*command, env=_env(ACP_KERNEL_CONFIG=str(missing)))
    assert res.returncode == 2
    assert f"ACP_KERNEL_CONFIG='{missing}': no such file" in res.err
    assert "unset ACP_KERNEL_CONFIG" in res.err and "Traceback" not in res.err
    assert res.out == ""


def test_a_bad_acp_kernel_agent_names_the_variable_and_the_agents(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = _env(ACP_KERNEL_AGENT="claud", HOME=str(home), JUPYTER_CONFIG_DIR=str(home / "cfg"))
    del env["ACP_KERNEL_CONFIG"]  # the default place, where no file exists
    res = _cli("prompt", "hi", env=env)
    assert res.returncode == 2
    assert res.err.startswith("acp-kernel: ACP_KERNEL_AGENT='claud' is not a known agent")
    assert "claude, codex" in res.err and "demo" in res.err and "unset ACP_KERNEL_AGENT" in res.err
    assert "acp_kernel.json" not in res.err and "default_agent" not in res.err


@pytest.mark.parametrize("via", ["argv", "stdin"])
def test_non_utf8_prompt_bytes_become_replacement_characters(tmp_path, via):
    record = tmp_path / "wire.jsonl"
    agent = _agent({"record": str(record), "prompt": [{"chunk": "ok"}]}, AGENTS / "scripted_agent.py")
    args = ["prompt", "--agent-command", agent]
    res = _cli(*args, b"caf\xe9 au lait") if via == "argv" else _cli(*args, stdin=b"caf\xe9 au lait\n")
    assert res.returncode == 0, res.err
    assert ("acp-kernel: the prompt held 1 byte(s) that are not valid UTF-8; each was replaced "
            "with U+FFFD (\ufffd)") in res.err
    sent = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    prompts = [m["params"]["prompt"] for m in sent if m.get("method") == "session/prompt"]
    text = prompts[0][0]["text"]
    assert text.rstrip("\n") == "caf\ufffd au lait"
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


# -- start-up failures, in the agent's own words ---------------------------------------------


def test_an_agent_that_exits_during_start_shows_its_status_and_stderr():
    agent = _agent({"at": "initialize", "exit": 1, "stderr": "Error: ANTHROPIC_API_KEY is not set"})
    res = _cli("prompt", "--agent-command", agent, "hi")
    assert res.returncode == 1
    lines = res.err.splitlines()
    assert lines[0] == "acp-kernel: python3 exited during start-up" or lines[0].endswith("exited during start-up")
    assert "  exit status 1" in lines
    assert "  | Error: ANTHROPIC_API_KEY is not set" in lines
    assert any(line.startswith("  hint: run `") for line in lines)
    assert "Traceback" not in res.err


@pytest.mark.parametrize("at", ["initialize", "session/new"])
def test_an_rpc_error_at_start_shows_message_and_data(at):
    agent = _agent({"at": at, "error": INTERNAL, "stderr": "claude-agent-acp: spawn claude ENOENT"})
    res = _cli("prompt", "--agent-command", agent, "hi")
    assert res.returncode == 1
    assert "answered with an error" in res.err
    assert "  Internal error (code -32603)\n  details: Claude Code process exited with code 1\n" in res.err
    assert "  | claude-agent-acp: spawn claude ENOENT" in res.err


def test_json_mode_reports_start_and_failure_as_events():
    agent = _agent({"at": "session/new", "error": INTERNAL, "stderr": "boom <img src=x onerror=alert(1)>"})
    res = _cli("prompt", "--format", "json", "--agent-command", agent, "hi")
    assert res.returncode == 1
    events = [json.loads(line) for line in res.out.splitlines()]  # every line is JSON
    assert [e["type"] for e in events] == ["starting", "error", "end"]
    assert events[0]["text"].startswith("Starting ") and events[0]["download"] is None
    error = events[1]
    assert error["stage"] == "start"
    assert "Claude Code process exited with code 1" in error["detail"]
    assert error["stderrTail"] == "boom <img src=x onerror=alert(1)>"
    assert events[2] == {"type": "end", "stopReason": None, "error": error["headline"]}


def test_json_mode_reports_config_and_usage_errors_as_events(tmp_path):
    """A --format json run that stops before its turn says why on stdout, as the start
    failure does (issue 24 §4): a bad config file (its path and keys hostile), argparse's
    own usage errors (either spelling of the flag) and an empty prompt. stderr still says it."""
    hostile = tmp_path / "cfg `a\nb` <img src=x onerror=alert(1)> $x$.json"
    hostile.write_text(json.dumps({"agents": {"x<img src=x>\n$y$": 3}}))
    config = _cli("prompt", "--format", "json", "--agent", "demo", "hi", env=_env(ACP_KERNEL_CONFIG=str(hostile)))
    usage = _cli("prompt", "--format=json", "--bogus", "hi")
    empty = _cli("prompt", "--format", "json", "--agent", "demo")
    for res, stage, says in ((config, "config", f"{hostile}: invalid configuration\n  agents.x<img src=x>\n$y$: "),
                             (usage, "usage", "unrecognized arguments: --bogus"),
                             (empty, "usage", "no prompt given")):
        assert res.returncode == 2, res.err
        events = [json.loads(line) for line in res.out.splitlines()]  # every line is JSON
        assert [e["type"] for e in events] == ["error", "end"], res.out
        assert events[0]["stage"] == stage and events[0]["headline"].startswith(says), events[0]
        assert events[1] == {"type": "end", "stopReason": None, "error": events[0]["headline"]}
        assert res.err.strip()  # the person reading stderr is told too
    # Without --format json, stdout stays empty.
    assert _cli("prompt", "--bogus", "hi").out == ""


def test_a_missing_program_says_so_with_a_hint():
    res = _cli("prompt", "--agent-command", "nosuch-agent-xyz --acp", "hi")
    assert res.returncode == 1
    assert res.err.splitlines()[0] == "acp-kernel: Cannot start nosuch-agent-xyz: 'nosuch-agent-xyz' was not found"
    assert "hint: check the command, or install `nosuch-agent-xyz` and make sure it is on PATH" in res.err


def test_auth_required_names_the_key_from_the_config(tmp_path):
    config = tmp_path / "acp_kernel.json"
    scenario = {"new_session": {"error": {"code": -32000, "message": "Authentication required"}},
                "init": {"authMethods": [{"id": "k", "name": "API key", "type": "env_var", "vars": [{"name": "MINE_KEY"}]}]}}
    command = [sys.executable, str(AGENTS / "scripted_agent.py"), json.dumps(scenario)]
    config.write_text(json.dumps({"agents": {"mine": {"title": "Mine", "command": command,
                                                      "env_keys": ["MINE_KEY"], "login": "mine auth"}}}))
    res = _cli("prompt", "--agent", "mine", "hi", env=_env(ACP_KERNEL_CONFIG=str(config)))
    assert res.returncode == 3
    assert res.err.startswith("acp-kernel: Mine needs you to log in\n")
    assert "API key: set MINE_KEY in the environment" in res.err
    assert "hint: set `MINE_KEY` (not set here), or log in once with `mine auth`" in res.err


# -- the starting line, and the claude-through-npx case of the issue ----------------------------


def test_claude_through_npx_says_it_downloads_then_explains_the_failure(tmp_path):
    scenario = {"at": "initialize", "error": INTERNAL, "stderr": "npm warn exec The following package was not found"}
    bin_dir = tmp_path / "bin"
    _fake_npx(bin_dir, scenario)
    (tmp_path / "home").mkdir()
    env = _env(PATH=str(bin_dir), HOME=str(tmp_path / "home"))
    code, out, tty = _with_tty_stderr([sys.executable, "-m", "acp_kernel", "prompt", "--agent", "claude", "hi"], env)
    assert code == 1
    assert out == ""
    lines = tty.splitlines()
    assert lines[0] == f"acp-kernel: Starting Claude Code… (first start downloads {CLAUDE_PKG} with npx)"
    assert lines[1] == "acp-kernel: Claude Code answered with an error"
    assert "  details: Claude Code process exited with code 1" in lines
    assert "  | npm warn exec The following package was not found" in lines
    assert lines[-1] == "  hint: if it is not signed in: set `ANTHROPIC_API_KEY` (not set here), or log in once with `claude`"


def test_the_starting_line_is_for_a_terminal_only(tmp_path):
    agent = _agent({"at": "initialize", "exit": 1})
    res = _cli("prompt", "--agent-command", agent, "hi")
    assert "Starting" not in res.err
    code, _, tty = _with_tty_stderr([sys.executable, "-m", "acp_kernel", "prompt", "--agent-command", agent, "hi"], _env())
    assert code == 1
    assert tty.splitlines()[0] == f"acp-kernel: Starting {os.path.basename(sys.executable)}…"


# -- acp-kernel agents: installed / downloadable / missing / broken ------------------------------


def _rows(text: str) -> dict[str, list[str]]:
    """agent name -> [status, notes...] from the listing."""
    rows: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines()[1:]:
        if not line.strip() or line.startswith("config file:"):
            continue
        if not line.startswith(" "):
            current = line.split()[0]
            status = [w for w in ("installed", "downloadable", "missing", "broken") if f"  {w}  " in line]
            rows[current] = status[:1]
        elif current:
            rows[current].append(line.strip())
    return rows


def _agents(tmp_path: Path, bin_dir: Path) -> dict[str, list[str]]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    res = _cli("agents", env=_env(PATH=str(bin_dir), HOME=str(home)))
    assert res.returncode == 0, res.err
    return _rows(res.out)


def test_agents_without_npx_says_missing_and_how_to_install(tmp_path):
    rows = _agents(tmp_path, tmp_path / "empty-bin")
    assert rows["claude"][0] == "missing"
    assert f"missing: npx not found (runs {CLAUDE_PKG} with it)" in rows["claude"]
    assert "install: install Node.js (which provides npx)" in rows["claude"]
    assert rows["gemini"][:3] == ["missing", "missing: gemini not found", "install: npm install -g @google/gemini-cli"]
    assert rows["demo"][0] == "installed"
    # A registry template word is said in words, not shown raw.
    assert any(r.startswith("passthrough: (kimi's interpreter) -m kimi_cli.cli") for r in rows["kimi"]), rows["kimi"]
    assert not [r for rs in rows.values() for r in rs if "{interpreter-of" in r]


def test_agents_with_npx_says_downloadable_then_installed_once_cached(tmp_path):
    bin_dir = tmp_path / "bin"
    _fake_npx(bin_dir)
    rows = _agents(tmp_path, bin_dir)
    assert rows["claude"][0] == "downloadable"
    assert f"downloads on first use ({CLAUDE_PKG} via npx)" in rows["claude"]
    assert "sign in: set ANTHROPIC_API_KEY, or run `claude` once" in rows["claude"]
    assert "passthrough: claude (not installed: claude not found (npm install -g @anthropic-ai/claude-code))" in rows["claude"]
    cached = tmp_path / "home" / ".npm" / "_npx" / "5f2a" / "node_modules" / CLAUDE_PKG
    cached.mkdir(parents=True)
    (cached / "package.json").write_text("{}")
    rows = _agents(tmp_path, bin_dir)
    assert rows["claude"][0] == "installed"
    assert rows["codex"][0] == "downloadable"  # not in the cache


def test_agents_does_not_call_a_cli_that_fails_version_available(tmp_path):
    bin_dir = tmp_path / "bin"
    _fake_npx(bin_dir, version_fails=True)
    gemini = bin_dir / "gemini"
    gemini.write_text("#!/bin/sh\necho 'gemini: cannot find module' >&2\nexit 3\n")
    gemini.chmod(0o755)
    rows = _agents(tmp_path, bin_dir)
    assert rows["claude"][0] == "broken"
    assert "broken: npx: '--version' failed (exit status 1): npm ERR! node: not found" in rows["claude"]
    assert rows["gemini"][0] == "broken"
    assert "broken: gemini: '--version' failed (exit status 3): gemini: cannot find module" in rows["gemini"]
    assert any(n.startswith("passthrough: gemini (broken: ") and "exit status 3" in n for n in rows["gemini"]), rows["gemini"]
