"""Agent start-up speaks: the "Starting X…" line and the failure explanation
(pure, over hostile agent strings), and the registry's launcher data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from acp_kernel import safe
from acp_kernel.errors import AuthRequired, ConnectionClosed, RequestTimeout, RpcError
from acp_kernel.client.discovery import first_start_download
from acp_kernel.client.registry import BUILTIN, LAUNCHERS, AgentSpec, adhoc_agent, launched_package
from acp_kernel.client.startup import DATA_CHARS, STDERR_LINES, Failure, explain_failure, starting_line
from acp_kernel.protocol.transport import CommandNotFound

from ..hostile.render import live, render_html

CLAUDE = BUILTIN["claude"]
HOSTILE_HTML = "<img src=x onerror=alert(1)>"
SPAN_ACROSS = "`a\n# b`"  # a code span across a line break
PATH_NL = "/tmp/evil\n# heading <script>alert(1)</script>"
CONTROLS = "\x1b]52;c;Y3VybA==\x07\x1b[2J\u202eevil"


# -- launchers are data ----------------------------------------------------------------


@pytest.mark.parametrize("command, launcher, package, name", [
    (("npx", "--yes", "--prefer-offline", "@agentclientprotocol/claude-agent-acp"), "npx",
     "@agentclientprotocol/claude-agent-acp", "@agentclientprotocol/claude-agent-acp"),
    (("npx", "-y", "@scope/pkg@1.2.3", "--flag"), "npx", "@scope/pkg@1.2.3", "@scope/pkg"),
    (("npx", "--registry", "https://r.example", "pi-acp@latest"), "npx", "pi-acp@latest", "pi-acp"),
    (("npx", "-p", "@x/tool", "tool-bin", "acp"), "npx", "@x/tool", "@x/tool"),
    (("/usr/local/bin/npx", "--package=@x/tool", "tool-bin"), "npx", "@x/tool", "@x/tool"),
    (("uvx", "--from", "kimi-cli==1.2", "kimi", "acp"), "uvx", "kimi-cli==1.2", "kimi-cli"),
    (("uvx", "--python", "3.12", "some_tool[extra]>=2", "acp"), "uvx", "some_tool[extra]>=2", "some_tool"),
    (("bunx", "cool-agent"), "bunx", "cool-agent", "cool-agent"),
    (("pnpx", "cool-agent", "--acp"), "pnpx", "cool-agent", "cool-agent"),
])
def test_launched_package(command, launcher, package, name):
    found = launched_package(command)
    assert found is not None
    assert (found.launcher.name, found.spec, found.name) == (launcher, package, name)


@pytest.mark.parametrize("command", [("gemini", "--acp"), ("npx",), ("npx", "--yes"), (), ("node", "x.js")])
def test_not_a_launched_package(command):
    assert launched_package(command) is None


def test_launchers_list_and_builtin_agents_that_use_them():
    assert set(LAUNCHERS) == {"npx", "uvx", "pnpx", "bunx"}
    assert launched_package(BUILTIN["claude"].command).name == "@agentclientprotocol/claude-agent-acp"
    assert launched_package(BUILTIN["codex"].command).name == "@zed-industries/codex-acp"
    assert launched_package(BUILTIN["gemini"].command) is None
    assert BUILTIN["claude"].env_keys == ("ANTHROPIC_API_KEY",) and BUILTIN["claude"].login == "claude"
    assert BUILTIN["codex"].env_keys == ("OPENAI_API_KEY",) and BUILTIN["codex"].login == "codex login"
    assert BUILTIN["gemini"].env_keys == ("GEMINI_API_KEY",)


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    for var in ("npm_config_cache", "NPM_CONFIG_CACHE", "npm_config_prefix", "NPM_CONFIG_PREFIX",
                "UV_TOOL_DIR", "UV_CACHE_DIR", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", str(tmp_path / "nobin"))  # no global npm prefix to find
    return home


def test_first_start_download_looks_in_the_npm_cache(tmp_path, monkeypatch):
    home = _home(tmp_path, monkeypatch)
    pkg = "@agentclientprotocol/claude-agent-acp"
    assert first_start_download(CLAUDE) == pkg
    cached = home / ".npm" / "_npx" / "0123abcd" / "node_modules" / pkg
    cached.mkdir(parents=True)
    (cached / "package.json").write_text("{}")
    assert first_start_download(CLAUDE) is None
    assert first_start_download(BUILTIN["codex"]) == "@zed-industries/codex-acp"  # another package: still downloads
    assert first_start_download(BUILTIN["gemini"]) is None  # not a launcher


def test_first_start_download_looks_in_uv_tools(tmp_path, monkeypatch):
    home = _home(tmp_path, monkeypatch)
    spec = adhoc_agent("uvx --from Kimi_CLI==1 kimi acp")
    assert first_start_download(spec) == "Kimi_CLI==1"
    (home / ".local" / "share" / "uv" / "tools" / "kimi-cli").mkdir(parents=True)
    assert first_start_download(spec) is None
    assert first_start_download(adhoc_agent("bunx some-agent")) == "some-agent"  # cache unknown: say it downloads


# -- the starting line -------------------------------------------------------------------


def test_starting_line_names_the_agent_and_the_download():
    assert starting_line(CLAUDE, "@agentclientprotocol/claude-agent-acp") == (
        "Starting Claude Code… (first start downloads @agentclientprotocol/claude-agent-acp with npx)")
    assert starting_line(CLAUDE, None) == "Starting Claude Code…"
    assert starting_line(BUILTIN["gemini"]) == "Starting Gemini CLI…"


def test_starting_line_names_a_command_line_agent_by_its_program():
    spec = adhoc_agent("/opt/agents/bin/my-agent --acp --token 'secret value'")
    assert starting_line(spec) == "Starting my-agent…"
    launched = adhoc_agent("npx -y @me/agent-acp@2 --verbose")
    assert starting_line(launched, "@me/agent-acp@2") == "Starting @me/agent-acp… (first start downloads @me/agent-acp@2 with npx)"


# -- failures ------------------------------------------------------------------------------


def _rendered_clean(failure: Failure) -> str:
    md = failure.markdown()
    assert isinstance(md, safe.Markdown)
    safe.check_data(safe.bundle(md))
    assert live(md) == [], live(md)
    assert not safe.problems(md)
    return render_html(md)


def test_rpc_error_shows_message_and_data_and_the_registry_hint():
    exc = RpcError(-32603, "Internal error", {"details": "Claude Code process exited with code 1"})
    failure = explain_failure(CLAUDE, exc, stderr="spawn claude ENOENT\n", environ={})
    assert failure.headline == "Claude Code answered with an error"
    assert "Internal error (code -32603)" in failure.detail
    assert "Claude Code process exited with code 1" in failure.detail
    assert failure.stderr_tail == "spawn claude ENOENT"
    assert "ANTHROPIC_API_KEY" in failure.hint and "(not set here)" in failure.hint and "`claude`" in failure.hint
    set_here = explain_failure(CLAUDE, exc, environ={"ANTHROPIC_API_KEY": "k"})
    assert "ANTHROPIC_API_KEY" in set_here.hint and "not set here" not in set_here.hint
    html = _rendered_clean(failure)
    assert "Claude Code process exited with code 1" in html and "<code>ANTHROPIC_API_KEY</code>" in html
    text = failure.plain()
    assert text.splitlines()[0] == "Claude Code answered with an error"
    assert "| spawn claude ENOENT" in text and text.splitlines()[-1].startswith("hint: ")


def test_rpc_error_str_carries_a_short_form_of_data():
    assert str(RpcError(-32603, "Internal error", {"details": "Claude Code process exited with code 1"})) == (
        "Internal error (code -32603): Claude Code process exited with code 1")
    assert str(RpcError(-32602, "Invalid params", {"field": "cwd", "why": 3})) == (
        'Invalid params (code -32602): {"field":"cwd","why":3}')
    assert str(RpcError(-32603, "Internal error")) == "Internal error (code -32603)"
    long = str(RpcError(-32603, "x", "y" * 10_000))
    assert len(long) < 300 and long.endswith("…")
    assert "\n" not in str(RpcError(-32603, "x", "line one\nline two"))


def test_data_is_bounded_and_any_shape():
    nested = {"stack": ["frame %d" % i for i in range(5000)], "inner": {"a": [1, 2, {"b": None}]}}
    failure = explain_failure(CLAUDE, RpcError(-32603, "Internal error", nested))
    assert len(failure.detail) <= DATA_CHARS + 200
    assert "frame 0" in failure.detail
    _rendered_clean(failure)


def test_agent_exit_with_status_signal_and_stderr_tail():
    noisy = "\n".join(f"log line {i}" for i in range(100)) + "\nError: no API key\n"
    failure = explain_failure(BUILTIN["gemini"], ConnectionClosed("agent closed its output", returncode=1, stderr=noisy))
    assert failure.headline == "Gemini CLI exited during start-up"
    assert failure.detail == "exit status 1"
    rows = failure.stderr_tail.split("\n")
    assert len(rows) == STDERR_LINES and rows[-1] == "Error: no API key"
    assert "GEMINI_API_KEY" in failure.hint and "`gemini`" in failure.hint
    killed = explain_failure(BUILTIN["gemini"], ConnectionClosed("gone", returncode=-9))
    assert killed.detail == "killed by SIGKILL"
    # returncode known to the front-end only (a write found the agent gone first)
    late = explain_failure(BUILTIN["gemini"], ConnectionClosed("closed its input"), returncode=3, stderr="bye")
    assert late.detail == "exit status 3" and late.stderr_tail == "bye"


def test_command_not_found_says_what_to_install():
    failure = explain_failure(CLAUDE, CommandNotFound("npx"))
    assert failure.headline == "Cannot start Claude Code: 'npx' was not found"
    assert "install Node.js (which provides npx)" in failure.hint
    assert "npm install -g @google/gemini-cli" in explain_failure(BUILTIN["gemini"], CommandNotFound("gemini")).hint
    adhoc = explain_failure(adhoc_agent("nosuch-agent --acp"), CommandNotFound("nosuch-agent"))
    assert "`nosuch-agent`" in adhoc.hint and "PATH" in adhoc.hint


def test_auth_required_names_the_key_and_the_login():
    exc = AuthRequired([{"id": "k", "name": "key", "type": "env_var", "vars": [{"name": "OPENAI_API_KEY"}]}],
                       "The agent needs you to log in. Ways it offers:\n- key: set OPENAI_API_KEY in the environment")
    failure = explain_failure(BUILTIN["codex"], exc, environ={})
    assert failure.headline == "Codex needs you to log in"
    assert "Ways it offers" in failure.detail
    assert failure.hint.startswith("set `OPENAI_API_KEY`") and "`codex login`" in failure.hint
    _rendered_clean(failure)


def test_timeout_and_os_errors():
    exc = RequestTimeout("agent 'claude'", "initialize", 120, "initialize_seconds", stderr="npm http fetch GET 200")
    failure = explain_failure(CLAUDE, exc)
    assert failure.headline == "Claude Code did not answer in time"
    assert "'initialize' within 120 s" in failure.detail
    assert failure.stderr_tail == "npm http fetch GET 200"
    assert "downloading" in failure.hint and "limits.initialize_seconds" in failure.hint
    denied = explain_failure(adhoc_agent("/tmp/agent.sh"), PermissionError(13, "Permission denied"))
    assert denied.headline == "Cannot start agent.sh: Permission denied"
    assert "/tmp/agent.sh" in denied.hint


def test_method_not_found_at_start_suggests_the_program_may_not_speak_acp():
    failure = explain_failure(adhoc_agent("cat"), RpcError(-32601, "Method not found"))
    assert "may not speak ACP" in failure.hint


@pytest.mark.parametrize("evil", [HOSTILE_HTML, SPAN_ACROSS, PATH_NL, CONTROLS, "[x](javascript:alert(1))"])
def test_hostile_agent_strings_stay_text(evil):
    spec = AgentSpec("evil", f"Evil {evil}", (f"/opt/{evil}/agent", "--acp"), env_keys=(f"KEY{evil}",),
                     login=f"login {evil}", install=f"install {evil}")
    failures = [
        explain_failure(spec, RpcError(-32603, evil, {"details": evil, "more": [evil]}), stderr=evil),
        explain_failure(spec, RpcError(-32603, "Internal error", evil), stderr=evil + "\n" + evil),
        explain_failure(spec, ConnectionClosed(evil, returncode=1, stderr=evil)),
        explain_failure(spec, AuthRequired([], evil)),
        explain_failure(spec, CommandNotFound(evil)),
        explain_failure(adhoc_agent([f"/x/{evil}", "--acp"]), OSError(8, evil)),
    ]
    for failure in failures:
        _rendered_clean(failure)
        text = failure.plain()
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
        for row in text.split("\n"):  # each agent line stays on its own line
            assert "\r" not in row
    # the payload is still shown, as text
    html = render_html(failures[0].markdown())
    if evil == HOSTILE_HTML:
        assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_failure_markdown_with_a_newline_in_the_program_keeps_one_headline():
    failure = explain_failure(adhoc_agent([PATH_NL, "--acp"]), CommandNotFound(PATH_NL))
    md = failure.markdown()
    first_block = md.split("\n\n")[0]
    assert first_block.startswith("**") and "\n" not in first_block
    assert "<h1>" not in render_html(md)


def test_failure_as_json_round_trips():
    failure = explain_failure(CLAUDE, RpcError(-32603, "Internal error", {"details": "x"}), stderr="e")
    data = json.loads(json.dumps(failure.as_json()))
    assert data == {"headline": failure.headline, "detail": failure.detail, "stderrTail": "e", "hint": failure.hint}


def test_config_can_give_keys_and_login(tmp_path, monkeypatch):
    from acp_kernel.client.registry import load_config

    monkeypatch.delenv("ACP_KERNEL_AGENT", raising=False)
    path = tmp_path / "acp_kernel.json"
    path.write_text(json.dumps({"agents": {
        "mine": {"command": ["mine", "--acp"], "env_keys": ["MINE_KEY"], "login": "mine auth"},
        "claude": {"login": "claude setup-token"},
    }}))
    cfg = load_config(path)
    assert cfg.agent("mine").env_keys == ("MINE_KEY",) and cfg.agent("mine").login == "mine auth"
    assert cfg.agent("claude").env_keys == ("ANTHROPIC_API_KEY",) and cfg.agent("claude").login == "claude setup-token"
    hint = explain_failure(cfg.agent("mine"), ConnectionClosed("x", returncode=1), environ={}).hint
    assert "`MINE_KEY`" in hint and "`mine auth`" in hint


def test_an_empty_config_file_means_no_settings(tmp_path, monkeypatch):
    from acp_kernel.client.registry import load_config

    monkeypatch.delenv("ACP_KERNEL_AGENT", raising=False)
    monkeypatch.setenv("ACP_KERNEL_CONFIG", os.devnull)
    assert load_config(missing_ok=False).default_agent == "demo"
    monkeypatch.setenv("ACP_KERNEL_CONFIG", str(tmp_path / "typo.json"))
    assert load_config().default_agent == "demo"  # the kernel's lenient default
    with pytest.raises(Exception, match="ACP_KERNEL_CONFIG=.*typo.json.*no such file"):
        load_config(missing_ok=False)


def test_unreadable_agent_commands_are_acp_errors():
    from acp_kernel.errors import AcpError

    with pytest.raises(AcpError, match="no closing quotation"):
        adhoc_agent("my-agent 'unbalanced")
    with pytest.raises(AcpError, match="empty agent command"):
        adhoc_agent("")
    with pytest.raises(AcpError, match="empty agent command"):
        adhoc_agent("   ")
