"""The agent registry, the config file, the cell parser and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from acp_kernel.frontends.cells import is_complete, mentions, parse_cell
from acp_kernel.client.registry import BUILTIN, ConfigError, Passthrough, adhoc_agent, load_config

from .conftest import scripted_spec

REQUIRED = {"claude", "codex", "gemini", "kimi", "goose", "opencode", "qwen", "copilot", "cursor", "pi", "demo"}


def test_builtin_agents_are_data():
    assert REQUIRED <= set(BUILTIN)
    assert BUILTIN["gemini"].command == ("gemini", "--acp")
    assert BUILTIN["kimi"].command == ("kimi", "acp")
    assert "claude-agent-acp" in " ".join(BUILTIN["claude"].command)
    assert BUILTIN["pi"].passthrough is not None and BUILTIN["pi"].passthrough.command == ("pi",)


def test_config_overrides_and_adds_agents(tmp_path, monkeypatch):
    monkeypatch.delenv("ACP_KERNEL_AGENT", raising=False)
    path = tmp_path / "acp_kernel.json"
    path.write_text(json.dumps({
        "default_agent": "mine",
        "permissions": "allow-reads",
        "agents": {
            "claude": {"env": {"ANTHROPIC_API_KEY": "k"}},
            "mine": {"title": "Mine", "command": ["my-agent", "--acp"],
                     "passthrough": {"command": ["my-agent"], "idle_seconds": 2, "submit_delay": 0.3}},
        },
        "refresh_hz": 30,
    }))
    monkeypatch.delenv("ACP_KERNEL_REFRESH_HZ", raising=False)
    cfg = load_config(path)
    assert cfg.refresh_hz == 30
    assert cfg.agent("mine").passthrough == Passthrough(("my-agent",), idle_seconds=2, submit_delay=0.3)
    assert cfg.agent("claude").passthrough == BUILTIN["claude"].passthrough  # kept when not overridden
    monkeypatch.setenv("ACP_KERNEL_REFRESH_HZ", "50")
    assert load_config(path).refresh_hz == 50
    monkeypatch.setenv("ACP_KERNEL_REFRESH_HZ", "fast")
    with pytest.raises(ConfigError, match="ACP_KERNEL_REFRESH_HZ='fast'.*fix"):
        load_config(path)
    monkeypatch.delenv("ACP_KERNEL_REFRESH_HZ")
    assert cfg.default_agent == "mine" and cfg.permissions == "allow-reads"
    assert cfg.agent("claude").env == {"ANTHROPIC_API_KEY": "k"}
    assert cfg.agent("claude").command == BUILTIN["claude"].command
    assert cfg.agent("mine").command == ("my-agent", "--acp")
    with pytest.raises(Exception, match="unknown agent 'nope'"):
        cfg.agent("nope")


@pytest.mark.parametrize(
    "data, needle",
    [
        ({"agents": {"x": {"comand": ["a"]}}}, "agents.x.comand"),
        ({"agents": {"x": {"command": "a b"}}}, "agents.x.command"),
        ({"agents": {"x": {"title": "no command"}}}, "agents.x: a new agent needs a command"),
        ({"permissions": "sometimes"}, "permissions"),
        ({"default_agent": "ghost"}, "default_agent 'ghost'"),
        ({"refresh_hz": 0}, "refresh_hz"),
        ({"agents": {"x": {"command": ["a"], "passthrough": {"command": []}}}}, "agents.x.passthrough.command"),
        ({"agents": {"x": {"command": ["a"], "passthrough": {"command": ["a"], "idle_seconds": -1}}}},
         "agents.x.passthrough.idle_seconds"),
    ],
)
def test_bad_config_names_the_key_and_the_fix(tmp_path, monkeypatch, data, needle):
    monkeypatch.delenv("ACP_KERNEL_AGENT", raising=False)
    path = tmp_path / "acp_kernel.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert needle in str(info.value)
    assert "fix" in str(info.value)


def test_broken_json_says_where(tmp_path):
    path = tmp_path / "acp_kernel.json"
    path.write_text('{"agents": {')
    with pytest.raises(ConfigError, match="line 1"):
        load_config(path)


def test_adhoc_agent_splits_like_a_shell():
    spec = adhoc_agent("my-agent --flag 'two words'")
    assert spec.command == ("my-agent", "--flag", "two words")


def test_cell_parsing():
    cell = parse_cell("%mode code\n%permissions allow-all\nfix the bug in @setup.py\nplease")
    assert [c.name for c in cell.commands] == ["mode", "permissions"]
    assert cell.commands[0].args == ["code"]
    assert cell.prompt == "fix the bug in @setup.py\nplease"
    assert parse_cell("/review src").prompt == "/review src"
    shell = parse_cell("%%shell --timeout 3\necho hi")
    assert shell.shell == "echo hi" and shell.shell_args == ["--timeout", "3"]
    assert parse_cell("%nope").errors and parse_cell("%%nope\nx").errors
    assert is_complete("hello") == "complete" and is_complete("%nope") == "invalid"
    assert is_complete("more \\") == "incomplete"


def test_mentions_become_paths(tmp_path):
    (tmp_path / "a.py").write_text("x")
    (tmp_path / "dir with space").mkdir()
    found = mentions("look at @a.py and @missing.py, and @dir\\ with\\ space", str(tmp_path))
    assert found == [str(tmp_path / "a.py"), str(tmp_path / "dir with space")]


def _cli(*args: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "acp_kernel", *args],
        input=stdin, capture_output=True, text=True, timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_cli_prompt_prints_the_demo_answer(tmp_path):
    res = _cli("prompt", "--agent", "demo", "--cwd", str(tmp_path), "hello",
               env={"ACP_DEMO_STATE_DIR": str(tmp_path / "s")})
    assert res.returncode == 0, res.stderr
    assert "demo agent" in res.stdout and "script" in res.stdout


def test_cli_json_format_and_stdin_prompt(tmp_path):
    res = _cli("prompt", "--agent", "demo", "--cwd", str(tmp_path), "--format", "json",
               stdin="tools", env={"ACP_DEMO_STATE_DIR": str(tmp_path / "s")})
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    end = events[-1]
    record = end.pop("record")  # the turn's record, as a notebook keeps it (client/record.py)
    assert end == {"type": "end", "stopReason": "end_turn", "error": None}
    assert record["agent"]["name"] == "demo" and record["stop_reason"] == "end_turn"
    assert ("edit", "completed") in [(c["kind"], c["status"]) for c in record["tool_calls"]]
    assert any(e["type"] == "tool_call" and e["kind"] == "edit" for e in events)


@pytest.mark.parametrize(
    "scenario, code",
    [
        ({"prompt": [{"stop": "refusal"}]}, 4),
        ({"prompt": [{"stop": "max_tokens"}]}, 6),
        ({"prompt": [{"chunk": "x"}, {"exit": 9}]}, 1),
        ({"new_session": {"error": {"code": -32000, "message": "auth"}},
          "init": {"authMethods": [{"id": "k", "name": "key", "type": "env_var", "vars": [{"name": "K"}]}]}}, 3),
    ],
)
def test_cli_exit_codes(tmp_path, scenario, code):
    spec = scripted_spec(scenario)
    import shlex

    res = _cli("prompt", "--agent-command", shlex.join(spec.command), "go")
    assert res.returncode == code, (res.stdout, res.stderr)


def test_cli_missing_agent_and_no_prompt():
    res = _cli("prompt", "--agent-command", "/no/such/agent", "hi")
    assert res.returncode == 1 and "not found" in res.stderr
    res = _cli("prompt", "--agent", "demo", stdin="")
    assert res.returncode == 2 and "no prompt" in res.stderr


def test_cli_agents_lists_every_builtin():
    res = _cli("agents")
    assert res.returncode == 0
    for name in REQUIRED:
        assert name in res.stdout
    # each agent's own CLI for passthrough terminals, and whether it is installed here
    assert "passthrough: claude (not installed: " in res.stdout or "passthrough: claude\n" in res.stdout
    assert "-m acp_kernel.demo.cli\n" in res.stdout  # the demo's is always there
