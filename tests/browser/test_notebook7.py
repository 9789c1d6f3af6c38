"""The ACP kernel in Jupyter Notebook 7: picked like any kernel, turns and terminals render."""

from __future__ import annotations

import json
import re
import time

import pytest

from .conftest import START, Notebook, TURN, _open_notebook, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect

from .test_live_cells import unsaved_edit_then_cells  # noqa: E402


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


def test_a_saved_turn_reopens_in_notebook7_with_a_new_kernel_untrusted_and_with_none(nb7: Notebook) -> None:
    """Issue 24 §1 in Notebook 7: the finished turn is static, so the saved notebook shows it
    reopened with a new kernel, untrusted (changed on disk), and with no kernel at all (its
    kernelspec gone: Notebook 7 asks for one, and the outputs are there beneath the question)."""
    out = nb7.run(0, "tools")
    expect(out.locator("sub").last).to_have_text(re.compile(r"^Done\b"), timeout=TURN)
    nb7.save()
    nb7.page.close()
    path = nb7.lab.root / nb7.name

    def kernel_of_the_page() -> None:
        """The reopened page asks for its kernel after the static outputs show: wait for that
        session, or the next reopen's clean-up may run before it and leave its kernel behind."""
        deadline = time.monotonic() + START / 1000
        while not [s for s in nb7.lab.api("GET", "/api/sessions") if s["path"] == nb7.name and s.get("kernel")]:
            assert time.monotonic() < deadline, "the reopened notebook started no kernel"
            time.sleep(0.1)

    def reopen(shot: str):
        for sess in nb7.lab.api("GET", "/api/sessions"):
            nb7.lab.api("DELETE", f"/api/sessions/{sess['id']}", timeout=TURN / 1000)
        page = nb7.page.context.new_page()
        page.goto(nb7.lab.url(f"/notebooks/{nb7.name}"))
        again = Notebook(nb7.lab, page, nb7.name)
        turn = again.output(0)
        expect(turn.locator("sub").last).to_have_text(re.compile(r"^Done\b"), timeout=START)
        expect(turn.locator("details > summary")).to_have_count(5)
        expect(turn).to_contain_text("Delete build/ (simulated failure) · ✗ failed")
        expect(turn).not_to_contain_text("Error displaying widget")
        expect(turn).not_to_contain_text("Loading widget")
        again.screenshot(shot)
        return page

    page = reopen("nb7-saved-turn-new-kernel.png")
    kernel_of_the_page()
    page.close()
    saved = json.loads(path.read_text(encoding="utf-8"))
    saved["metadata"]["edited_elsewhere"] = True  # the signature no longer matches: untrusted
    path.write_text(json.dumps(saved), encoding="utf-8")
    page = reopen("nb7-saved-turn-untrusted.png")
    kernel_of_the_page()
    page.close()
    # (its language too: a kernel of the same language would be started instead)
    saved["metadata"]["kernelspec"] = {"name": "no-such-kernel", "display_name": "Gone", "language": "no-such-language"}
    saved["metadata"]["language_info"] = {"name": "no-such-language"}
    path.write_text(json.dumps(saved), encoding="utf-8")
    page = reopen("nb7-saved-turn-no-kernel.png")
    expect(page.locator(".jp-Dialog")).to_have_count(1, timeout=START)  # "Select Kernel"
    assert not nb7.lab.api("GET", "/api/kernels")  # no kernel started for it
    page.close()



@pytest.fixture
def nb7_two_cells(notebook7, browser_context, request):
    """A Notebook 7 page on an ACP Agent notebook with two empty cells, its kernel idle."""
    yield from _open_notebook(notebook7, browser_context, request, "/notebooks/{name}", cells=["", ""])


def test_notebook7_the_agent_reads_an_unsaved_edit_and_the_active_cell(nb7_two_cells: Notebook) -> None:
    """The live ``cells`` in Notebook 7's notebook page (the same extension, the same comm)."""
    unsaved_edit_then_cells(nb7_two_cells)
    nb7_two_cells.screenshot("live-cells-nb7.png")
