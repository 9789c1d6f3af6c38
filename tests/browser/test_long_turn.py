"""A long turn is one output: its end and a live question show without "Show more outputs".

The scripted agent plays 200 steps (a paragraph and a tool call each, about
400 blocks, far past JupyterLab's 50 outputs per cell); at step 150 it asks
a permission and waits. The question must be visible and clickable where the
reader is, the final text and the status line must show after it, the page
keeps a bounded number of blocks ("Show N earlier" brings back older ones),
and agent HTML in the last steps stays text. JupyterLab and Notebook 7.
"""

from __future__ import annotations

import json
import re
import sys

from .conftest import AGENTS, Notebook, TURN, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect

DONE = re.compile(r"^Done\b")
STEPS = 200
ASK_AT = 150
SLOW_FROM = 60
IMG = "<img src=x onerror=window.__acp_pwned=1>"
ANSI = "\x1b[31mred text\x1b[0m \x1b]8;;http://127.0.0.1:9/osc\x1b\\osc link\x1b]8;;\x1b\\ end"


def long_turn(steps: int = STEPS, ask_at: int = ASK_AT) -> list[dict]:
    actions: list[dict] = []
    for i in range(steps):
        actions.append({"chunk": f"Step {i}: reading file_{i}.py.\n\n"})
        body = f"# heading in file_{i}\nline {i}" if i % 2 else ANSI
        actions.append({"update": {"sessionUpdate": "tool_call", "toolCallId": f"t{i}", "title": f"Read file_{i}.py",
                                   "kind": "read", "status": "completed",
                                   "content": [{"type": "content", "content": {"type": "text", "text": body}}]}})
        if i == SLOW_FROM:  # a call that ends long after it left the page's window (TurnOutput._reveal)
            actions.append({"update": {"sessionUpdate": "tool_call", "toolCallId": "slow", "title": f"Slow read {IMG}",
                                       "kind": "read", "status": "in_progress"}})
        if i == steps - 1:
            actions.append({"update": {"sessionUpdate": "tool_call_update", "toolCallId": "slow", "status": "completed"}})
        if i == ask_at:
            actions.append({"request": {"method": "session/request_permission", "params": {
                "sessionId": "$SID",
                "toolCall": {"toolCallId": f"t{i}", "title": f"Write result {IMG}", "kind": "edit"},
                "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"},
                            {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}})
    actions.append({"chunk": f"FINAL ANSWER after {steps} steps {IMG} ![leak](http://127.0.0.1:9/leak.png?secret=1)\n"})
    # The last question holds the turn live (a widget) while the test reads the page; answered,
    # the turn ends and its output becomes static.
    actions.append({"request": {"method": "session/request_permission", "params": {
        "sessionId": "$SID", "toolCall": {"toolCallId": "last", "title": "Hold", "kind": "other"},
        "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}})
    return actions


def _one_output(out) -> None:
    """The turn is one output (beside it only the agent's start-up line, emptied once it started)."""
    expect(out.locator(".jp-OutputArea-output .acp-turn")).to_have_count(1)
    others = [t for t in out.locator(".jp-OutputArea-output:not(:has(.acp-turn))").all_inner_texts() if t.strip()]
    assert not others, others


def _run_long_turn(nb: Notebook, shot: str) -> None:
    page = nb.page
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    scenario_file = nb.lab.root / "long-turn.json"
    scenario_file.write_text(json.dumps({"prompt": long_turn()}))
    out0 = nb.run(0, f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario_file}")
    expect(out0).to_contain_text("it starts with the next prompt", timeout=TURN)
    out = nb.run(1, "go")
    # The question at step 150: visible and clickable, no "Show more outputs" click first.
    question = out.locator(".acp-permission")
    expect(question).to_be_visible(timeout=TURN)
    expect(question.locator(".acp-q-title")).to_have_text(f"Write result {IMG}")
    expect(out.locator(".jp-TrimmedOutputs")).to_have_count(0)
    _one_output(out)
    # Each question comes with an update of the output's fallback, which JupyterLab draws in
    # a new widget view: the new view takes over these elements rather than drawing anew.
    out.locator(".acp-turn").evaluate("e => { e.dataset.seen = 'at the first question'; }")
    # It came into view by itself (the cell was on screen), and the turn's top and the
    # cell's prompt say a question waits.
    expect(question).to_be_in_viewport(timeout=TURN)
    box, height = question.bounding_box(), page.evaluate("window.innerHeight")
    print(f"{shot}: the question's top at {box['y']:.0f} px in a {height} px viewport")
    note = out.locator(".acp-waiting")
    expect(note).to_have_text("A question is waiting for you below \u2193")
    expect(nb.cell(1)).to_have_class(re.compile(r"\bacp-asking\b"))
    nb.screenshot(f"{shot}-asking.png")
    question.get_by_role("button", name=re.compile(r"^Allow once")).click()
    final = out.get_by_text(f"FINAL ANSWER after {STEPS} steps")
    expect(final).to_be_visible(timeout=TURN)
    expect(final).to_contain_text(IMG)  # agent HTML is text
    expect(out).to_contain_text('RESULT {"outcome": {"outcome": "selected", "optionId": "ok"}}')
    expect(out.locator(".jp-TrimmedOutputs")).to_have_count(0)
    _one_output(out)
    question = out.locator(".acp-permission").first
    expect(question.locator(".acp-q-outcome")).to_have_text("→ chose Allow once — the agent's words: “Allow”")
    hold = out.locator(".acp-permission").filter(has_text="Hold")
    expect(hold).to_be_visible(timeout=TURN)
    expect(out.locator(".acp-turn")).to_have_attribute("data-seen", "at the first question")
    # The image is a placeholder naming its host; nothing loaded it.
    expect(out.locator(".acp-img")).to_contain_text("image from 127.0.0.1: click to load")
    # The DOM is bounded: the last 120 blocks, and a way to the earlier ones.
    before = out.locator(".acp-block").count()
    assert before <= 125, before
    assert out.locator(".acp-turn").evaluate("(el) => getComputedStyle(el).contain") == "style"  # as the record
    more = out.locator(".acp-more")
    expect(more).to_be_visible()
    expect(more).to_contain_text("earlier")
    hold.scroll_into_view_if_needed()
    nb.screenshot(f"{shot}-done.png")
    more.click()
    expect(out.locator(".acp-block")).to_have_count(before + 100)
    # The blocks it brings back are drawn whole, and as they stand now: the slow call ended
    # while out of the page's window, so the kernel held its change back (TurnOutput._sync)
    # and sends it when the page takes the block in (TurnOutput._reveal).
    expect(out.locator(".acp-tc-title").filter(has_text=re.compile(r"^Read file_95\.py$"))).to_have_count(1)
    more.click()
    slow = out.locator(".acp-tc").filter(has=page.locator(".acp-tc-title", has_text="Slow read"))
    expect(slow.locator(".acp-tc-title")).to_have_text(f"Slow read {IMG}")
    expect(slow.locator(".acp-tc-status")).to_have_text("✓ done")
    # A tool row's output: colours as spans, the OSC 8 link gone (its text kept), the heading a line of text.
    row = out.locator(".acp-tc").filter(has=page.locator(".acp-tc-title", has_text="Read file_198.py"))
    row.locator(".acp-tc-head").click()
    expect(row.locator(".acp-tc-text .ansi-red-fg")).to_have_text("red text")
    expect(row.locator(".acp-tc-text")).to_have_text("red text osc link end")
    odd = out.locator(".acp-tc").filter(has=page.locator(".acp-tc-title", has_text="Read file_199.py"))
    odd.locator(".acp-tc-head").click()
    expect(odd.locator(".acp-tc-text")).to_have_text("# heading in file_199\nline 199")
    assert out.locator("a[href*='osc'], img").count() == 0
    assert page.evaluate("typeof window.__acp_pwned") == "undefined"
    # Answered, the turn ends: one static output, its end and the question's outcome in it.
    hold.get_by_role("button", name=re.compile(r"^Allow once")).click()
    expect(note).to_be_hidden()
    expect(nb.cell(1)).not_to_have_class(re.compile(r"\bacp-asking\b"))
    expect(out.locator(".jp-OutputArea-output sub").last).to_have_text(DONE, timeout=TURN)
    expect(out.locator(".acp-turn")).to_have_count(0)
    expect(out.get_by_text(f"FINAL ANSWER after {STEPS} steps")).to_contain_text(IMG)
    expect(out).to_contain_text("(image from 127.0.0.1)")
    expect(out.locator("details > summary").filter(has_text="Read file_199.py")).to_have_count(1)
    assert out.locator("a[href*='osc'], img").count() == 0
    # The record is a style containment scope of its own as the page renders it (the panels
    # around it are contain: strict; under theirs, restyling its rows froze the page).
    record = out.locator(".jp-OutputArea-output > .tex2jax_ignore").filter(has=page.locator("details"))
    expect(record).to_have_count(1)
    assert record.evaluate("(el) => getComputedStyle(el).contain") == "style"
    nb.screenshot(f"{shot}-static.png")
    assert not [u for u in requests if "127.0.0.1:9" in u], requests
    assert not [e for e in nb.console_errors if re.search(r"acp|anywidget", e, re.I)], nb.console_errors


def test_a_200_step_turn_shows_its_end_and_its_question_in_jupyterlab(nb: Notebook) -> None:
    _run_long_turn(nb, "long-turn-lab")


def test_a_200_step_turn_shows_its_end_and_its_question_in_notebook7(nb7: Notebook) -> None:
    _run_long_turn(nb7, "long-turn-nb7")


def test_a_form_inside_the_turn_starts_unset_lines_up_and_submits(nb: Notebook) -> None:
    form_request = {"request": {"method": "elicitation/create", "params": {
        "sessionId": "$SID", "mode": "form", "message": f"Deploy **where**? {IMG}",
        "requestedSchema": {"type": "object", "required": ["target"], "properties": {
            "target": {"type": "string", "title": "Target", "enum": ["staging", "prod"]},
            "replicas": {"type": "integer", "title": "Number of replicas", "minimum": 1, "maximum": 5},
            "force": {"type": "boolean", "title": "Force", "default": False}}}}}}
    scenario_file = nb.lab.root / "form.json"
    scenario_file.write_text(json.dumps({"prompt": [{"chunk": "Asking.\n\n"}, form_request, {"chunk": "\n\nthanks\n"}]}))
    out0 = nb.run(0, f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario_file}")
    expect(out0).to_contain_text("it starts with the next prompt", timeout=TURN)
    out = nb.run(1, "go")
    form = out.locator(".acp-form")
    expect(form).to_be_visible(timeout=TURN)
    expect(form.locator(".acp-form-message")).to_contain_text(f"Deploy where? {IMG}")
    target = form.get_by_label("Target *")
    expect(target).to_have_value("")  # a required choice without a default starts unset
    # Labels of different widths: the inputs start at one x.
    xs = [form.get_by_label(name).bounding_box()["x"] for name in ("Target *", "Number of replicas", "Force")]
    assert max(xs) - min(xs) < 1, xs
    form.get_by_role("button", name="Submit").click()
    expect(form.locator(".acp-form-errors")).to_have_text("Target is required")
    target.select_option("prod")
    form.get_by_label("Number of replicas").fill("3")
    nb.screenshot("form-inside-turn.png")
    form.get_by_role("button", name="Submit").click()
    expect(out.locator(".jp-OutputArea-output sub").last).to_have_text(DONE, timeout=TURN)
    expect(out).to_contain_text('RESULT {"action": "accept", "content": {"target": "prod", "replicas": 3, "force": false}}')
    expect(out.locator(".acp-form")).to_have_count(0)  # finished: static, the answer in words
    expect(out).to_contain_text("→ submitted")
    assert page_pwned(nb) is None


def page_pwned(nb: Notebook):
    return nb.page.evaluate("window.__acp_pwned === undefined ? null : window.__acp_pwned")


def test_long_field_titles_and_option_names_wrap_inside_their_question(nb: Notebook) -> None:
    """Issue 24 §4: a field title of thousands of characters pushed the inputs about 4,000 px
    to the right (the form looked empty), and a long option name overflowed the question box.
    Both now wrap inside the turn, the title's column at most 40 % wide and scrolled past a
    few lines, never cut; agent text stays text (raw HTML, math, a code span and a path
    across line breaks)."""
    hostile = f"{IMG} $x$ \\(y\\) `a\nb` /tmp/a\nb.txt "
    title = "Replicas " + "very-long-title-" * 250 + hostile
    option = "Allow " + "and-also-this-" * 120 + hostile
    form_request = {"request": {"method": "elicitation/create", "params": {
        "sessionId": "$SID", "mode": "form", "message": "Deploy?",
        "requestedSchema": {"type": "object", "properties": {
            "replicas": {"type": "integer", "title": title},
            "force": {"type": "boolean", "title": "Force", "default": False}}}}}}
    ask = {"request": {"method": "session/request_permission", "params": {
        "sessionId": "$SID", "toolCall": {"toolCallId": "t1", "title": "Run a command", "kind": "execute",
                                          "rawInput": {"command": "echo hi"}},
        "options": [{"optionId": "yes", "name": option, "kind": "allow_once"},
                    {"optionId": "no", "name": "No", "kind": "reject_once"}]}}}
    scenario_file = nb.lab.root / "long-names.json"
    scenario_file.write_text(json.dumps({"prompt": [form_request, ask, {"chunk": "thanks\n"}]}))
    out0 = nb.run(0, f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario_file}")
    expect(out0).to_contain_text("it starts with the next prompt", timeout=TURN)
    out = nb.run(1, "go")
    form = out.locator(".acp-form")
    expect(form).to_be_visible(timeout=TURN)
    expect(form.locator("input[type='number']")).to_be_visible()
    # Measured in one step in the page (a re-render between separate reads would detach them).
    got = form.evaluate("""f => {
        const r = e => e.getBoundingClientRect(), label = f.querySelector('.acp-form-label');
        const form = r(f), l = r(label), i = r(f.querySelector("input[type='number']"));
        return {inside: i.right <= form.right + 1, beside: l.right <= i.left, share: l.width / form.width,
                scrolls: label.scrollHeight > label.clientHeight, text: label.textContent};
    }""")
    assert got["inside"] and got["beside"] and got["share"] <= 0.45 and got["scrolls"], got
    # Never cut: the whole title is there, as text (a title is one line: its newlines shown as ␊).
    assert got["text"].endswith(hostile.replace("\n", "\u240a")), got["text"][-200:]
    form.get_by_role("button", name="Decline").click()
    expect(form.locator(".acp-q-outcome")).to_have_text("→ declined", timeout=TURN)
    question = out.locator(".acp-question:not(.acp-form)")
    buttons = question.locator(".acp-button")
    expect(buttons).to_have_count(2, timeout=TURN)
    expect(buttons.nth(0)).to_be_enabled()
    past = question.evaluate("""q => { const right = q.getBoundingClientRect().right;
        return [...q.querySelectorAll('.acp-button')].map(b => b.getBoundingClientRect().right - right); }""")
    assert len(past) == 2 and max(past) <= 1, past  # no button reaches past the question's edge
    nb.screenshot("long-names.png")
    buttons.nth(1).click()
    expect(out.locator(".jp-OutputArea-output sub").last).to_have_text(DONE, timeout=TURN)
    assert out.locator("img").count() == 0
    assert page_pwned(nb) is None
