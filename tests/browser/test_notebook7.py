"""The ACP kernel in Jupyter Notebook 7: picked like any kernel, turns and terminals render."""

from __future__ import annotations

import re

from .conftest import Notebook, TURN, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect


def test_notebook7_runs_a_turn_tool_rows_and_a_terminal(nb7: Notebook) -> None:
    out = nb7.run(0, "hello")
    expect(out).to_contain_text("Hello! I am the acp-kernel demo agent", timeout=TURN)
    expect(out.locator("sub").last).to_have_text(re.compile(r"^Done\b"), timeout=TURN)
    tools = nb7.run(1, "tools")
    expect(tools.locator("sub").last).to_have_text(re.compile(r"^Done\b"), timeout=TURN)
    # Finished: the static output, each call folded under its header (the live widget in
    # Notebook 7: test_long_turn.py).
    expect(tools.locator("details > summary")).to_have_count(5)
    expect(tools.locator(".acp-tc")).to_have_count(0)
    term = nb7.run(2, "%passthrough demo")
    expect(term.locator(".acp-pty .xterm-rows")).to_contain_text("Demo CLI (acp-kernel)", timeout=TURN)
    reply = nb7.run(3, "hi from Notebook 7")
    expect(reply.locator(".acp-pty .xterm-rows")).to_contain_text("You said: hi from Notebook 7", timeout=TURN)
    nb7.screenshot("notebook7.png")
    assert not [e for e in nb7.console_errors if re.search(r"acp|anywidget|xterm", e, re.I)], nb7.console_errors
