"""Pure parts of passthrough: the rendered screen (pyte), a reply's text, the
registry's per-agent data and its config overrides, the version probe, and
the messages a cell shows (hostile screen text stays text)."""

from __future__ import annotations

import json
import os
import sys

import pytest

from acp_kernel.client import discovery
from acp_kernel.client.registry import BUILTIN, PASSTHROUGH, ConfigError, Passthrough, load_config
from acp_kernel.passthrough.manager import Reply
from acp_kernel.passthrough.pty_input import key_names
from acp_kernel.passthrough.screen import FEED_MAX, ScreenModel, last_lines, reply_text
from tests.hostile.render import live

# -- the screen --------------------------------------------------------------------------


def test_a_repaint_of_the_same_screen_is_no_change():
    s = ScreenModel(5, 30)
    assert s.feed("\x1b[1;1Hhello\x1b[3;1H> ")
    assert not s.feed("\x1b[?25l\x1b[1;1Hhello\x1b[K\x1b[3;1H> \x1b[?25h")  # kimi's idle redraw
    assert not s.feed("\x1b[?25l\x1b[?25h")
    assert s.feed("\x1b[1;1Hhellx")
    assert s.text() == "hellx\n\n>"


def test_cursor_addressed_text_reads_as_a_person_sees_it():
    s = ScreenModel(4, 20)
    s.feed("\x1b[2;5Hworld\x1b[2;1Hsay\x1b[1;1H\x1b[1mtitle\x1b[0m")
    assert s.lines()[:2] == ["title", "say world"]
    assert s.search(r"say\s+world") == "say world" and s.search("nothing") is None and s.search("") is None


def test_since_a_mark_counts_lines_that_scrolled_away():
    s = ScreenModel(4, 20)
    s.feed("old 1\r\nold 2\r\n> ")
    mark = s.mark()
    s.feed("hi\r\n" + "".join(f"line {i}\r\n" for i in range(10)) + "> ")
    new = s.since(mark)
    assert [ln for ln in new if ln.startswith("line")] == [f"line {i}" for i in range(10)]
    assert "old 1" not in new


def test_a_flood_feeds_its_tail_only():
    s = ScreenModel(3, 20)
    assert s.feed("x" * (FEED_MAX * 3) + "\r\nthe end\r\n")
    assert "the end" in s.text()


def test_resize_keeps_the_text():
    s = ScreenModel(3, 10)
    s.feed("abc")
    s.resize(5, 40)
    assert s.size == (5, 40) and s.text() == "abc"
    s = ScreenModel(10, 20)
    s.feed("banner\r\nline 2\r\nline 3\r\n> ")
    s.resize(2, 20)  # as xterm: the cursor's row stays, the top scrolls off
    assert s.size == (2, 20) and s.lines() == ["line 3", ">"]
    s.resize(6, 20)
    assert s.text() == "line 3\n>"
    s = ScreenModel(10, 20)
    s.feed("top\r\n> ")
    s.resize(4, 20)  # the cursor is near the top: the bottom rows go
    assert s.text() == "top\n>"


def test_reply_text_leaves_out_rules_chrome_and_the_prompt_echo():
    lines = ["────────", "> say hi", "", "", "● stand-in reply to: say hi", "  more", "", "? for shortcuts", "╭──╮"]
    assert reply_text(lines, "say hi", r"\? for shortcuts") == "● stand-in reply to: say hi\n  more"
    # a reply line that merely contains the prompt stays
    assert reply_text(["say hi back", "say hi"], "say hi") == "say hi back"
    # kimi-cli 1.52's echo: before its reply, the cell has nothing to show (under load the cell
    # ended on it, and the reply went to the next cell: issue 23, sixth session)
    assert reply_text(["✨ alpha one", "", "── input ──"], "alpha one", r"── input ──") == ""
    assert reply_text(["✨ alpha one", "• stub reply to: alpha one"], "alpha one") == "• stub reply to: alpha one"
    # opencode 1.18.33's input box under the prompt's echo, before its reply: nothing yet
    opencode = PASSTHROUGH["opencode"].chrome_pattern
    assert reply_text(["┃  alpha one", "", "┃  Build · Stub model Stub", "╹" + "▀" * 80], "alpha one", opencode) == ""
    assert reply_text(["stub reply to: alpha one", "", "▣  Build · Stub model · 1.9s"], "alpha one", opencode) \
        == "stub reply to: alpha one\n\n▣  Build · Stub model · 1.9s"
    assert last_lines("a\n\n b \nc\nd", 2) == "c / d"


# -- registry data -----------------------------------------------------------------------------


def test_the_six_real_clis_are_data():
    for name in ("claude", "codex", "gemini", "pi", "kimi", "opencode"):
        pt = BUILTIN[name].passthrough
        assert pt is PASSTHROUGH[name]
        assert pt.ready_pattern and pt.busy_pattern and pt.clear_input == "\x15" and pt.install
        assert pt.cancel_keys[0][0] == "\x1b"  # never Ctrl-C: a dialog (codex), quits (opencode, gemini)
    assert key_names(PASSTHROUGH["opencode"].cancel_keys) == "Esc, Esc"
    assert PASSTHROUGH["opencode"].cancel_keys[0][1] > 0
    kimi = PASSTHROUGH["kimi"]
    assert kimi.command[0] == "{interpreter-of:kimi}" and "kimi" not in kimi.command[1:2]  # never the bare script
    assert PASSTHROUGH["codex"].version_argv() == ("codex", "--version")
    assert kimi.version_argv()[-1] == "--version" and kimi.version_argv()[0] == "{interpreter-of:kimi}"


def test_config_overrides_one_field_and_keeps_the_rest(tmp_path, monkeypatch):
    monkeypatch.delenv("ACP_KERNEL_AGENT", raising=False)
    path = tmp_path / "acp_kernel.json"
    path.write_text(json.dumps({"agents": {
        "claude": {"passthrough": {"submit_delay": 0.4, "cancel_keys": ["\u0003", ["\u0003", 0.1]]}},
        "codex": {"passthrough": {"command": ["/opt/codex"], "busy_pattern": "", "cell_timeout": 0}},
    }}))
    cfg = load_config(path)
    claude = cfg.agent("claude").passthrough
    assert claude.submit_delay == 0.4 and claude.cancel_keys == (("\x03", 0.0), ("\x03", 0.1))
    assert claude.ready_pattern == PASSTHROUGH["claude"].ready_pattern and claude.command == ("claude",)
    codex = cfg.agent("codex").passthrough
    assert codex.command == ("/opt/codex",) and codex.busy_pattern == "" and codex.cell_timeout == 0
    assert codex.clear_input == "\x15"


@pytest.mark.parametrize("over, message", [
    ({"claude": {"passthrough": {"busy_pattern": "(unclosed"}}}, "busy_pattern.*not a regular expression"),
    ({"claude": {"passthrough": {"idle_seconds": 0}}}, "idle_seconds"),
    ({"mine": {"command": ["x"], "passthrough": {"idle_seconds": 2}}}, "has no built-in CLI.*command"),
])
def test_bad_passthrough_config_is_explained(tmp_path, monkeypatch, over, message):
    monkeypatch.delenv("ACP_KERNEL_AGENT", raising=False)
    path = tmp_path / "acp_kernel.json"
    path.write_text(json.dumps({"agents": over}))
    with pytest.raises(ConfigError, match=message):
        load_config(path)


# -- discovery: the version probe ----------------------------------------------------------------


def _script(path, body: str, shebang: str = f"#!{sys.executable}") -> str:
    path.write_text(f"{shebang}\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_a_cli_counts_as_installed_only_when_its_version_probe_passes(tmp_path):
    good = _script(tmp_path / "good-cli", "print('1.0')")
    bad = _script(tmp_path / "gate-cli", "import sys; print('deprecated: run the installer'); sys.exit(3)")
    ok = discovery.passthrough_availability(Passthrough((good,)))
    assert ok.state == "installed" and ok.detail == good
    broken = discovery.passthrough_availability(Passthrough((bad,), install="pip install gate"))
    assert broken.state == "broken"
    assert "'gate-cli --version' failed (exit status 3): deprecated: run the installer (pip install gate)" == broken.detail
    # its own probe, not COMMAND --version: the gate script is never run
    own = discovery.passthrough_availability(Passthrough((bad,), version_command=(good, "--version")))
    assert own.state == "installed"
    missing = discovery.passthrough_availability(Passthrough(("no-such-cli-xyz",), install="npm i -g x"))
    assert (missing.state, missing.detail) == ("missing", "no-such-cli-xyz not found (npm i -g x)")
    assert discovery.program_availability(Passthrough((bad,)), probe_version=True).state == "broken"


def test_interpreter_of_reads_the_scripts_shebang_without_running_it(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _script(bindir / "kimi", "raise SystemExit('must not run')")
    _script(bindir / "envcli", "", shebang="#!/usr/bin/env python3")
    env = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    assert discovery.interpreter_of("kimi", env) == sys.executable
    assert os.path.basename(discovery.interpreter_of("envcli", env) or "").startswith("python3")
    argv = discovery.resolve_command(("{interpreter-of:kimi}", "-m", "kimi_cli.cli"), env)
    assert argv == (sys.executable, "-m", "kimi_cli.cli")
    with pytest.raises(LookupError, match="nokimi"):
        discovery.resolve_command(("{interpreter-of:nokimi}",), env)
    spec = Passthrough(("{interpreter-of:kimi}", "-c", "print(1)"), version_command=("{interpreter-of:kimi}", "-V"))
    assert discovery.passthrough_availability(spec, env).state == "installed"


# -- messages: a hostile screen stays text -------------------------------------------------------


HOSTILE = "<img src=x onerror=alert(1)> `span\nacross` /tmp/a\nb.txt"


def test_outcome_messages_escape_the_screen():
    from acp_kernel.passthrough.ptycell import outcome_markdown

    class Term:
        name, cancel_description = "cli<b>", "Esc"

        def describe_exit(self) -> str:
            return "exited with status 1"

    for reply in (Reply("p", "", "interrupted", text=HOSTILE, screen=HOSTILE, detail="Esc sent"),
                  Reply("p", "", "timeout", screen=HOSTILE, detail="not ready after 5 s: " + HOSTILE, sent=False),
                  Reply("p", "", "timeout", text=HOSTILE, detail="still working after 9 s")):
        md = outcome_markdown(Term(), reply)
        assert md is not None
        assert live(str(md)) == [], str(md)
        assert "onerror" in str(md)  # shown, as text


def test_a_private_sgr_sequence_does_not_stop_the_screen():
    """Gemini CLI sends ``CSI ? 4 m``-style private sequences; pyte 0.8 raised on
    them and its parser died, so the screen stopped following the CLI."""
    from acp_kernel.passthrough.screen import ScreenModel

    screen = ScreenModel(5, 30)
    assert screen.feed("before\x1b[?4m after\r\n")
    assert screen.feed("\x1b[31mnext line\x1b[0m")
    assert screen.lines()[:2] == ["before after", "next line"]


#: kimi-cli 1.52's approval box before an MCP tool call, as a real run's screen showed it
#: (120 columns; tests/realclis/FINDINGS.md, "Issue 23, sixth session").
KIMI_APPROVAL = ["── input " + "─" * 110, "✨ TOOL:execute {\"code\": \"x = 41 + 1\"}",
                 "⠼ Using execute ({\"code\": \"x = 41 + 1\"})", "╭─ approval " + "─" * 107 + "╮",
                 *("│" + row.ljust(118) + "│" for row in (
                     "  execute is requesting approval to mcp:execute:", "", "  Call MCP tool `execute`.", "",
                     " → [1] Approve once", "   [2] Approve for this session", "   [3] Reject",
                     "   [4] Reject, tell the model what to do instead", "",
                     "   ▲/▼ select  1/2/3/4 choose  ↵ confirm")),
                 "╰" + "─" * 118 + "╯"]


def test_kimis_approval_box_is_its_dialog_and_the_cell_shows_it_as_text():
    from acp_kernel.passthrough.input_box import dialog_text
    from acp_kernel.view.exchange import Exchange

    pattern = PASSTHROUGH["kimi"].dialog_pattern
    screen = ScreenModel(20, 120)
    screen.feed("\r\n".join(KIMI_APPROVAL))
    asked = dialog_text(screen.text(), pattern)
    assert asked.splitlines() == [
        "execute is requesting approval to mcp:execute:", "Call MCP tool `execute`.", "→ [1] Approve once",
        "[2] Approve for this session", "[3] Reject", "[4] Reject, tell the model what to do instead",
        "▲/▼ select  1/2/3/4 choose  ↵ confirm"]
    assert dialog_text("\n".join(KIMI_APPROVAL[:3]), pattern) == ""  # no box: nothing asked
    assert dialog_text(screen.text(), "") == ""
    for name in ("claude", "codex", "gemini", "pi", "opencode"):  # not read off a real run: none
        assert PASSTHROUGH[name].dialog_pattern == ""
    exchange = Exchange("kimi", "TOOL:execute", asking=HOSTILE)
    md, text = str(exchange.markdown()), str(exchange.plain())
    assert "asks in its own terminal; answer it there" in md and live(md) == [] and "onerror" in md
    assert text.endswith("answer it there (the cell waits for the answer):\n" + HOSTILE)
    exchange.outcome = "idle"  # answered, the reply came: the question is no longer shown
    assert "asks in its own terminal" not in str(exchange.markdown()) + str(exchange.plain())


def test_dialog_pattern_is_config_data(tmp_path, monkeypatch):
    monkeypatch.delenv("ACP_KERNEL_AGENT", raising=False)
    path = tmp_path / "acp_kernel.json"
    path.write_text(json.dumps({"agents": {"claude": {"passthrough": {"dialog_pattern": "Do you want to proceed"}}}}))
    assert load_config(path).agent("claude").passthrough.dialog_pattern == "Do you want to proceed"
    path.write_text(json.dumps({"agents": {"claude": {"passthrough": {"dialog_pattern": "(unclosed"}}}}))
    with pytest.raises(ConfigError, match="dialog_pattern.*not a regular expression"):
        load_config(path)
