"""A turn saved with its widget state reopens readably, with and without a kernel (issue 14).

The turn widget saves a small loader, not its module (view/turnwidget.py,
static/turnloader.js). JupyterLab saves the widget state (its
``saveState`` setting on), the page is closed and the notebook reopened:

- with a kernel (a new one: the saved model has no comm to it, so the
  loader's request goes nowhere, as in an HTML export with no kernel at
  all), the turn shows as plain text, agent HTML as text; a new turn in
  that page fetches the module, and the reopened turn upgrades to the
  full view.

With "No Kernel", JupyterLab 4.6 + jupyterlab_widgets 3.0.17 restore no
saved widget at all (their restore asks the kernel first and stops when
there is none: "Loading widget..."), so no widget code runs there.
"""

from __future__ import annotations

import json
import re
import sys
import uuid

from .conftest import AGENTS, START, TURN, LabPage, Notebook, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect

DONE = re.compile(r"^Done\b")
IMG = "<img src=x onerror=window.__acp_pwned=1>"
SPAN = "`a\nb` <img src=x onerror=window.__acp_pwned=2>"
SETTINGS = "/lab/api/settings/@jupyter-widgets/jupyterlab-manager:plugin"
STATE_MIME = "application/vnd.jupyter.widget-state+json"
TURN_WIDGET = "acp_kernel.view.turnwidget.TurnWidget"


def _scenario() -> list[dict]:
    return [
        {"chunk": f"First {IMG} and {SPAN}\n\n"},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read /tmp/a\n# not a heading.py",
                    "kind": "read", "status": "completed",
                    "content": [{"type": "content", "content": {"type": "text",
                                                                "text": f"# My project\n\x1b[31mred\x1b[0m {IMG}"}}]}},
        {"update": {"sessionUpdate": "plan", "entries": [
            {"content": f"check {IMG}", "priority": "high", "status": "completed"}]}},
        {"chunk": "SAVED FINAL ANSWER\n"},
    ]


def _open(nb: Notebook) -> object:
    page = nb.page.context.new_page()
    page.goto(nb.lab.url(f"/lab/workspaces/{uuid.uuid4().hex[:12]}/tree/{nb.name}"))
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=START)
    return page


def _check_plain(out) -> None:
    plain = out.locator(".acp-turn-plain")
    expect(plain).to_have_count(1, timeout=TURN)
    expect(plain).to_contain_text("SAVED FINAL ANSWER")
    expect(plain).to_contain_text(f"First {IMG} and")
    expect(plain).to_contain_text("Read /tmp/a")
    expect(plain).to_contain_text("# My project")
    expect(plain).to_contain_text(f"red {IMG}")  # colours dropped, HTML as text
    expect(plain).to_contain_text(f"☑ check {IMG}")
    expect(plain.locator(".acp-plain-status")).to_have_text(DONE)
    assert out.locator("img, script, iframe, a[href]").count() == 0
    assert "\x1b" not in plain.inner_text()
    expect(out).not_to_contain_text("Error displaying widget")


def test_a_saved_turn_reopens_as_text_then_upgrades_when_a_live_turn_brings_the_module(
        nb: Notebook, lab_page: LabPage) -> None:
    lab = nb.lab
    lab.api("PUT", SETTINGS, {"raw": json.dumps({"saveState": True})})
    try:
        scenario_file = lab.root / "saved-turn.json"
        scenario_file.write_text(json.dumps({"prompt": _scenario()}))
        agent = f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario_file}"
        # A fresh page, the shared one replaced: the setting is read when JupyterLab
        # starts. (Reloading the shared page restored its workspace, and under load
        # JupyterLab then sometimes asked for a kernel in a dialog over the cell.)
        lab_page.discard()
        nb = Notebook(lab, lab_page.open(nb.name), nb.name)
        expect(nb.panel.locator(".jp-KernelName")).to_have_text("ACP Agent", timeout=START)
        expect(nb.panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=START)
        expect(nb.run(0, agent)).to_contain_text("it starts with the next prompt", timeout=TURN)
        out = nb.run(1, "go")
        expect(out.locator(".jp-OutputArea-output sub").last).to_have_text(DONE, timeout=TURN)
        expect(out.locator(".acp-tc")).to_have_count(1)  # the live view: the real module
        nb.save()
        saved = json.loads((lab.root / nb.name).read_text(encoding="utf-8"))
        models = saved["metadata"]["widgets"][STATE_MIME]["state"]
        turns = [m["state"] for m in models.values() if m["state"].get("_anywidget_id") == TURN_WIDGET]
        assert len(turns) == 1
        assert len((turns[0]["_esm"] + turns[0]["_css"]).encode()) < 3 * 1024
        nb.page.close()
        for sess in lab.api("GET", "/api/sessions"):
            lab.api("DELETE", f"/api/sessions/{sess['id']}", timeout=TURN / 1000)

        # Reopened with a (new) kernel: plain text, then the full view once a live turn brings the module.
        page = _open(nb)
        again = Notebook(lab, page, nb.name)
        _check_plain(again.output(1))
        again.screenshot("saved-turn-plain.png")
        expect(again.run(2, agent)).to_contain_text("it starts with the next prompt", timeout=TURN)
        fresh = again.run(3, "go")
        expect(fresh.locator(".jp-OutputArea-output sub").last).to_have_text(DONE, timeout=TURN)
        reopened = again.output(1)
        expect(reopened.locator(".acp-tc")).to_have_count(1, timeout=TURN)
        expect(reopened.locator(".acp-turn-plain")).to_have_count(0)
        expect(reopened.get_by_text("SAVED FINAL ANSWER")).to_be_visible()
        assert page.evaluate("typeof window.__acp_pwned") == "undefined"
        again.screenshot("saved-turn-reopened.png")
        page.close()
    finally:
        lab.api("PUT", SETTINGS, {"raw": "{}"})
