"""Passthrough terminals in a real JupyterLab: xterm.js in the cell, the demo CLI
behind it on a real PTY, typed into from cells and from the keyboard."""

from __future__ import annotations

import re

import pytest

from .conftest import Notebook, TURN, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect


def screen(out):
    """The rendered rows of the terminal view in an output area."""
    return out.locator(".acp-pty .xterm-rows")


@pytest.mark.slow
def test_terminal_live_in_cells_with_keyboard_and_interrupt(nb: Notebook) -> None:
    out0 = nb.run(0, "%passthrough demo")
    expect(out0.locator(".acp-pty .xterm")).to_have_count(1, timeout=TURN)
    expect(out0.locator(".acp-pty-status")).to_have_text("running")
    expect(screen(out0)).to_contain_text("Demo CLI (acp-kernel)")
    expect(out0).to_contain_text("The next cells are typed into")

    # A prompt cell shows the same terminal; the reply appears in both views.
    out1 = nb.run(1, "hello from the browser")
    expect(screen(out1)).to_contain_text("You said: hello from the browser", timeout=TURN)
    expect(screen(out0)).to_contain_text("You said: hello from the browser")

    # Keystrokes typed into the terminal go to the CLI, not to the notebook's shortcuts.
    cells_before = nb.cells.count()
    out1.locator(".acp-pty .xterm").click()
    nb.page.keyboard.type("abc typed")
    nb.page.keyboard.press("Enter")
    expect(screen(out1)).to_contain_text("You said: abc typed", timeout=TURN)
    # Shift+Enter inside the terminal is the program's Enter, not "run cell".
    nb.page.keyboard.type("shifted")
    nb.page.keyboard.press("Shift+Enter")
    expect(screen(out1)).to_contain_text("You said: shifted", timeout=TURN)
    assert nb.cells.count() == cells_before  # "a", "b" and Shift+Enter did not touch the notebook
    assert screen(out0).inner_text().count("You said: hello from the browser") == 1  # the cell did not run again

    # Interrupt from the toolbar is Ctrl-C for the CLI; the cell ends, the CLI lives on.
    out2 = nb.run(2, "/slow 300")
    expect(screen(out2)).to_contain_text("line 3 of 300", timeout=TURN)
    nb.panel.locator("jp-button[data-command='notebook:interrupt-kernel'], "
                     "button[data-command='notebook:interrupt-kernel']").first.click()
    expect(out2).to_contain_text("Interrupted: Ctrl-C sent to", timeout=TURN)
    expect(screen(out2)).to_contain_text("interrupted")
    expect(screen(out2)).not_to_contain_text("slow done")

    # The widget's own Ctrl-C button does the same.
    out3 = nb.run(3, "/slow 301")
    expect(screen(out3)).to_contain_text("line 3 of 301", timeout=TURN)
    out3.locator(".acp-pty-ctrlc").click()
    expect(out3).to_contain_text("Interrupted: Ctrl-C sent to", timeout=TURN)
    expect(screen(out3)).to_contain_text(re.compile(r"line 3 of 301.*interrupted"))
    expect(screen(out3)).not_to_contain_text("slow done")
    nb.screenshot("passthrough.png")

    # A flood (20 MB) is drawn at the browser's pace (views acknowledge what they
    # drew; the kernel stops reading while they are far behind) and the page keeps up.
    out4 = nb.run(4, "/flood 20000000")
    expect(screen(out4)).to_contain_text("flood done", timeout=2 * TURN)

    # The CLI exits: every view says so.
    out5 = nb.run(5, "/exitcode 2")
    expect(out5).to_contain_text("exited with status 2", timeout=TURN)
    expect(out0.locator(".acp-pty-status")).to_have_text("exited with status 2")
    assert not [e for e in nb.console_errors if re.search(r"acp|anywidget|xterm", e, re.I)], nb.console_errors
