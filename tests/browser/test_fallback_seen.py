"""Once JupyterLab shows a turn's widget, the kernel stops sending the output's fallback again.

A live turn's output carries the widget and, for readers without it, the turn so far as
HTML, markdown and text, rebuilt at block boundaries (every 2 s at most). JupyterLab draws
the widget, so those rebuilds were traffic (up to several times the answer on a long turn)
and a new view of the widget each time. The page's view says it shows the widget; from
then on the fallback goes only when it is 30 s old. The end is the static record, as before.

The scripted agent asks a question first (the click proves the page drew the widget), then
streams hostile paragraphs for three seconds, past the fallback's 2 s interval. The page's
own kernel connection records every display message of the turn's cell.
"""

from __future__ import annotations

import json
import re
import sys

from .conftest import AGENTS, TURN, Notebook, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect

DONE = re.compile(r"^Done\b")
IMG = "<img src=x onerror=window.__acp_pwned=1>"
HOSTILE = f"{IMG} `a\nb` $x^2$ \\(y\\) /tmp/a\n# not a heading.py"
WIDGET = "application/vnd.jupyter.widget-view+json"

#: Page-side: every display message of the notebook's kernel, as [type, has the widget view, display id].
RECORD = """() => {
  const kernel = window.jupyterapp.shell.currentWidget.context.sessionContext.session.kernel;
  window.acpDisplays = [];
  kernel.iopubMessage.connect((_, msg) => {
    const t = msg.header.msg_type;
    if (t === "display_data" || t === "update_display_data")
      window.acpDisplays.push([t, Object.keys(msg.content.data || {}).includes(%s),
                               (msg.content.transient || {}).display_id || ""]);
  });
}""" % json.dumps(WIDGET)


def _scenario() -> list[dict]:
    actions: list[dict] = [
        {"chunk": f"Before the question: {HOSTILE}\n\n"},
        {"request": {"method": "session/request_permission", "params": {
            "sessionId": "$SID", "toolCall": {"toolCallId": "t0", "title": f"Go on {IMG}", "kind": "other"},
            "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}},
    ]
    for i in range(12):  # 3 s of paragraphs, each a block boundary
        actions += [{"chunk": f"Paragraph {i}: {HOSTILE}\n\n"}, {"sleep": 0.25}]
    actions.append({"chunk": f"LAST PARAGRAPH {IMG}\n"})
    return actions


def test_a_page_that_shows_the_widget_gets_no_fallback_rebuilds(nb: Notebook) -> None:
    scenario = nb.lab.root / "fallback-seen.json"
    scenario.write_text(json.dumps({"prompt": _scenario()}))
    out0 = nb.run(0, f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario}")
    expect(out0).to_contain_text("it starts with the next prompt", timeout=TURN)
    nb.page.evaluate(RECORD)
    out = nb.run(1, "go")
    question = out.locator(".acp-permission")
    expect(question).to_be_visible(timeout=TURN)
    at_click = nb.page.evaluate("() => window.acpDisplays.length")
    question.get_by_role("button", name=re.compile(r"^Allow once")).click()
    expect(out.locator(".jp-OutputArea-output sub").last).to_have_text(DONE, timeout=TURN)
    expect(out.get_by_text("LAST PARAGRAPH")).to_contain_text(IMG)  # agent HTML is text
    shown = nb.page.evaluate("() => window.acpDisplays")
    # The turn's output: the display that carried the widget view (with its fallback).
    turn_id = next(d for t, w, d in shown if t == "display_data" and w)
    after = [(t, w) for t, w, d in shown[at_click:] if d == turn_id]
    # After the click: no display with the widget view (a fallback rebuild), then the record.
    assert after == [("update_display_data", False)], shown
    assert nb.page.evaluate("typeof window.__acp_pwned") == "undefined"
