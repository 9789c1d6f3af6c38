"""A finished turn is a static output: a saved notebook reads everywhere (issue 24 §1).

When a turn ends, its live widget is replaced in place by HTML we generate
(view/finished.py), the markdown transcript and text, and the widget closes. A
turn with hostile agent strings, a diff, a terminal, a plan and an answered
question is run in JupyterLab with default settings (no widget state saved),
saved, and read back:

- the saved file: no widget view in any output, no widget state;
- reopened with a fresh kernel: the whole turn shows, tool calls folded under
  their headers, nothing live, no "Error displaying widget";
- reopened untrusted (the file changed on disk, so its signature no longer
  matches): the sanitizer's path shows the same turn, inert;
- ``jupyter nbconvert --to html``, opened from disk with no server: the turn is
  in the page, inert, with nothing to fetch.

- with no kernel (its kernelspec gone: JupyterLab asks for one): the turn is
  there beneath the question.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid

from .conftest import AGENTS, ARTIFACTS, START, TURN, WAIT, Notebook, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect

DONE = re.compile(r"^Done\b")
IMG = "<img src=x onerror=window.__acp_pwned=1>"
SPAN = "`a\nb` <img src=x onerror=window.__acp_pwned=2>"
MATH = "$x^2$ and $$y$$"
NL_PATH = "/tmp/a\n# not a heading.py"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _scenario() -> list[dict]:
    return [
        {"chunk": f"First {IMG} and {SPAN} with {MATH}\n\n"},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": f"Read {NL_PATH}",
                    "kind": "read", "status": "completed",
                    "content": [{"type": "content", "content": {"type": "text",
                                                                "text": f"# My project\n\x1b[31mred\x1b[0m {IMG}"}}]}},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t2", "title": f"Edit {IMG}", "kind": "edit",
                    "status": "completed", "content": [{"type": "diff", "path": NL_PATH, "oldText": "old line\n",
                                                        "newText": f"new line {IMG}\n"}]}},
        {"request": {"method": "terminal/create", "params": {"sessionId": "$SID", "command": "/bin/sh",
                                                             "args": ["-c", "echo TERMINAL-SAID-THIS"]}}},
        {"request": {"method": "terminal/wait_for_exit", "params": {"sessionId": "$SID", "terminalId": "$TERM"}}},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t4", "title": "Run the echo", "kind": "execute",
                    "status": "completed", "content": [{"type": "terminal", "terminalId": "$TERM"}]}},
        {"update": {"sessionUpdate": "plan", "entries": [
            {"content": f"check {IMG}", "priority": "high", "status": "completed"}]}},
        {"request": {"method": "session/request_permission", "params": {
            "sessionId": "$SID", "toolCall": {"toolCallId": "t3", "title": "Write the notes", "kind": "edit"},
            "options": [{"optionId": "ok", "name": "Allow once", "kind": "allow_once"},
                        {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}},
        {"chunk": "SAVED FINAL ANSWER\n"},
    ]


def _check_static(out) -> None:
    """The finished turn as a static output, whatever renders it."""
    expect(out).to_contain_text("SAVED FINAL ANSWER", timeout=TURN)
    expect(out).to_contain_text(f"First {IMG} and")
    expect(out).to_contain_text(MATH)  # as typed: never typeset
    expect(out).to_contain_text("Read /tmp/a")
    expect(out).to_contain_text("Permission")
    expect(out).to_contain_text("Allow once")
    expect(out).to_contain_text(f"check {IMG}")
    expect(out.locator("details summary").filter(has_text="Read /tmp/a")).to_have_count(1)
    terminal = out.locator("details[open]").filter(has=out.page.locator("summary", has_text="Run the echo"))
    expect(terminal).to_contain_text("TERMINAL-SAID-THIS")  # a terminal's call stays unfolded
    expect(terminal).to_contain_text("exit code 0")
    diff = out.locator("details").filter(has=out.page.locator("summary", has_text="Edit"))
    expect(diff).to_contain_text("new line")  # the diff, folded inside the edit
    expect(out.locator("sub").last).to_have_text(DONE)
    assert out.locator("img, script, iframe, a[href^='javascript'], mjx-container, .MathJax").count() == 0
    expect(out).not_to_contain_text("Error displaying widget")
    expect(out).not_to_contain_text("Loading widget")


def _reopened(nb: Notebook, shot: str, *, kernel: bool = True) -> None:
    """Open the saved notebook in a new page; the turn (cell 1) reads as it did. Without
    ``kernel``, JupyterLab asks for one ("Select Kernel") and none starts."""
    page = nb.page.context.new_page()
    page.goto(nb.lab.url(f"/lab/workspaces/{uuid.uuid4().hex[:12]}/tree/{nb.name}"))
    if kernel:
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        expect(panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=START)
    else:
        expect(page.locator(".jp-Dialog")).to_have_count(1, timeout=START)
    again = Notebook(nb.lab, page, nb.name)
    _check_static(again.output(1))
    again.screenshot(shot)
    assert page.evaluate("typeof window.__acp_pwned") == "undefined"
    if not kernel:  # (this notebook's: the Lab is shared, and another test's page may start a kernel of its own)
        assert not [s for s in nb.lab.api("GET", "/api/sessions") if s["path"] == nb.name], nb.lab.api("GET", "/api/sessions")
    page.close()
    _close_sessions(nb)


def _close_sessions(nb: Notebook) -> None:
    for sess in nb.lab.api("GET", "/api/sessions"):
        nb.lab.api("DELETE", f"/api/sessions/{sess['id']}", timeout=TURN / 1000)


def test_a_finished_turn_is_static_and_reads_after_reopening_untrusted_and_in_nbconvert(
        nb: Notebook, tmp_path) -> None:
    lab = nb.lab
    scenario_file = lab.root / "saved-turn.json"
    scenario_file.write_text(json.dumps({"prompt": _scenario()}))
    agent = f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario_file}"
    expect(nb.run(0, agent)).to_contain_text("it starts with the next prompt", timeout=TURN)
    out = nb.run(1, "go")
    allow = out.get_by_role("button", name=re.compile(r"^Allow once")).last
    allow.click(timeout=TURN)  # the terminal: the default policy asks
    expect(out).to_contain_text("TERMINAL-SAID-THIS", timeout=TURN)
    expect(out.get_by_text("Write the notes").first).to_be_visible(timeout=TURN)
    allow.click(timeout=TURN)  # the agent's own question
    expect(out.locator("sub").last).to_have_text(DONE, timeout=TURN)
    expect(out.locator(".acp-tc")).to_have_count(0)  # the widget is gone: the output is static
    _check_static(out)
    expect(out).to_contain_text("TERMINAL-SAID-THIS")
    nb.screenshot("saved-turn-live-end.png")
    nb.save()
    path = lab.root / nb.name
    saved = json.loads(path.read_text(encoding="utf-8"))
    outputs = [o for c in saved["cells"] for o in c.get("outputs", [])]
    assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})]
    assert "widgets" not in saved["metadata"]
    nb.page.close()
    _close_sessions(nb)

    # Reopened: a fresh kernel starts; the turn is there as it was.
    _reopened(nb, "saved-turn-reopened.png")

    # Untrusted: the file changed on disk (its signature no longer matches).
    saved["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "changed elsewhere", "id": "x1"})
    path.write_text(json.dumps(saved), encoding="utf-8")
    _reopened(nb, "saved-turn-untrusted.png")

    # No kernel at all: its kernelspec is gone, JupyterLab asks for one; the turn is there beneath.
    # (and its language too: JupyterLab would start a kernel of the same language instead)
    saved["metadata"]["kernelspec"] = {"name": "no-such-kernel", "display_name": "Gone", "language": "no-such-language"}
    saved["metadata"]["language_info"] = {"name": "no-such-language"}
    path.write_text(json.dumps(saved), encoding="utf-8")
    _reopened(nb, "saved-turn-no-kernel.png", kernel=False)

    # nbconvert's HTML, opened from disk: no server, no kernel, nothing fetched.
    html_path = tmp_path / "saved.html"
    subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", "--output", str(html_path), str(path)],
                   check=True, capture_output=True, timeout=WAIT / 1000 * 4)
    page = nb.page.context.new_page()
    page.goto(html_path.as_uri())
    _check_static(page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea"))
    page.screenshot(path=str(ARTIFACTS / "saved-turn-nbconvert.png"), full_page=True)
    assert page.evaluate("typeof window.__acp_pwned") == "undefined"
    page.close()
