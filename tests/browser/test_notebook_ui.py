"""The ACP kernel in a real JupyterLab, in a real (headless) Chromium.

Each test opens a fresh notebook with the "ACP Agent" kernel, types prompts
for the built-in demo agent (or the scripted test agent), runs them with
Shift+Enter and waits on what the page shows (Playwright's auto-waiting
``expect``; no fixed sleeps). Screenshots go to tests/browser/artifacts/.
"""

from __future__ import annotations

import json
import re
import sys

from .conftest import AGENTS, Notebook, TURN, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect

# A turn is over when the status line (the turn's last block, <sub>) says so.
END_TURN = re.compile(r"^Done\b")


def status_line(out):
    """The turn's status line: the `<sub>` of the cell's last markdown output."""
    return out.locator(".jp-OutputArea-output sub").last


def tool_row(out, title: str):
    return out.locator(".acp-tc").filter(has=out.page.locator(".acp-tc-title", has_text=title))


TOOL_TITLES = [
    "Read README.md (simulated)",
    "Search for 'TODO' (simulated)",
    "Edit demo/app.py (simulated: the file is not touched)",
    "Fetch https://agentclientprotocol.com (simulated)",
    "Delete build/ (simulated failure)",
]


def _question(tid: str, title: str) -> dict:
    return {"request": {"method": "session/request_permission", "params": {
        "sessionId": "$SID", "toolCall": {"toolCallId": tid, "title": title, "kind": "edit"},
        "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}}


def _call(tid: str, title: str, kind: str, status: str, content: list | None = None, **extra) -> list[dict]:
    text = "permission denied (a scripted failure)" if status == "failed" else f"{title}: its result"
    return [{"update": {"sessionUpdate": "tool_call", "toolCallId": tid, "title": title, "kind": kind,
                        "status": "in_progress", **extra}},
            {"update": {"sessionUpdate": "tool_call_update", "toolCallId": tid, "status": status,
                        "content": content or [{"type": "content", "content": {"type": "text", "text": text}}]}}]


OLD = 'def greet(name):\n    return "Hello " + name\n'
NEW = 'def greet(name: str) -> str:\n    return f"Hello, {name}!"\n'


def _tools_scenario() -> dict:
    """The demo's ``tools`` turn (the same calls), then two questions: the turn stays live
    (a widget) while the test reads its rows; answered, it ends and becomes static."""
    steps = [{"chunk": "Running simulated tool calls of several kinds:\n\n"}]
    steps += _call("c1", TOOL_TITLES[0], "read", "completed", locations=[{"path": "README.md", "line": 1}])
    steps += _call("c2", TOOL_TITLES[1], "search", "completed")
    steps += _call("c3", TOOL_TITLES[2], "edit", "completed",
                   [{"type": "diff", "path": "demo/app.py", "oldText": OLD, "newText": NEW}])
    steps += [{"chunk": "Proposed an edit with a diff.\n"}]
    steps += _call("c4", TOOL_TITLES[3], "fetch", "completed")
    steps += _call("c5", TOOL_TITLES[4], "delete", "failed")
    steps += [{"chunk": "\nDone: read, search, edit (with a diff), fetch, and one failed call.\n"},
              _question("q1", "Write first"), _question("q2", "Write second"), {"chunk": "Both answered.\n"}]
    return {"prompt": steps}


def _use_scripted(nb: Notebook, name: str, scenario: dict) -> None:
    scenario_file = nb.lab.root / f"{name}.json"
    scenario_file.write_text(json.dumps(scenario))
    out0 = nb.run(0, f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario_file}")
    expect(out0).to_contain_text("it starts with the next prompt", timeout=TURN)


def test_tools_render_as_widget_rows_then_a_static_output(nb: Notebook) -> None:
    _use_scripted(nb, "tools-scenario", _tools_scenario())
    out = nb.run(1, "go")
    forms = out.locator(".acp-permission")
    expect(forms).to_have_count(1, timeout=TURN)  # the turn waits: live, a widget
    read = tool_row(out, "Read README.md (simulated)")
    expect(read).to_have_count(1)
    expect(read.locator(".acp-tc-title")).to_have_text("Read README.md (simulated)")
    expect(read).to_have_attribute("data-status", "completed")
    expect(read.locator(".acp-tc-status")).to_have_text("✓ done")
    # The failed call opens by itself and shows its error.
    failed = tool_row(out, "Delete build/ (simulated failure)")
    expect(failed).to_have_attribute("data-status", "failed")
    expect(failed.locator(".acp-tc-body")).to_contain_text("permission denied")
    # One output for the whole turn (no widget per run of calls), its blocks in event order.
    expect(out.locator(".acp-tc-title")).to_have_text(TOOL_TITLES)
    expect(out.locator(".acp-turn")).to_have_count(1)
    expect(out.locator(".jp-OutputArea-output:has(.acp-turn)")).to_have_count(1)
    text = out.locator(".acp-turn").inner_text()
    where = [text.index(needle) for needle in ("Running simulated tool calls", TOOL_TITLES[0], "Proposed an edit",
                                                TOOL_TITLES[3], "Done: read")]
    assert where == sorted(where), text
    # Completed rows are collapsed; the edit row expands to its diff on a click.
    edit = tool_row(out, "Edit demo/app.py")
    expect(edit).to_have_attribute("data-status", "completed")
    expect(edit.locator(".acp-tc-diff")).to_have_count(0)
    expect(edit.locator(".acp-tc-head")).to_have_attribute("aria-expanded", "false")
    edit.locator(".acp-tc-head").click()
    expect(edit.locator(".acp-tc-head")).to_have_attribute("aria-expanded", "true")
    diff = edit.locator(".acp-tc-diff")
    expect(diff).to_be_visible()
    expect(diff.locator(".acp-add").first).to_contain_text("def greet(name: str) -> str:")
    expect(diff.locator(".acp-del").first).to_contain_text("def greet(name):")
    # The widget renders in place of the markdown fallback, not beside it.
    expect(out.locator(".jp-RenderedMarkdown", has_text="Read README.md (simulated)")).to_have_count(0)
    nb.screenshot("tools.png")
    edit.locator(".acp-tc-head").click()
    expect(edit.locator(".acp-tc-diff")).to_have_count(0)
    # The row heads are in the Tab order and toggle with Enter and Space
    # (without the notebook taking the keys as its own shortcuts).
    page = nb.page
    out.get_by_text("Running simulated tool calls").click()
    head = edit.locator(".acp-tc-head")
    _tab_to(page, head)
    page.keyboard.press("Enter")
    expect(head).to_have_attribute("aria-expanded", "true")
    expect(edit.locator(".acp-tc-diff")).to_be_visible()
    expect(head).to_be_focused()
    page.keyboard.press("Space")
    expect(head).to_have_attribute("aria-expanded", "false")
    expect(nb.panel.locator(".jp-Notebook")).to_have_class(re.compile(r"\bjp-mod-commandMode\b"))
    # The first question answered: its buttons lock while the second one waits.
    buttons = forms.first.locator("button")
    forms.first.get_by_role("button", name=re.compile(r"^Allow once")).click()
    expect(forms).to_have_count(2, timeout=TURN)
    for i in range(buttons.count()):
        expect(buttons.nth(i)).to_be_disabled()
    forms.last.get_by_role("button", name=re.compile(r"^Allow once")).click()
    # The end: one static output in place of the widget, the rows folded under their headers in
    # order, the failed one open, the diff inside the edit's.
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    expect(out.locator(".acp-turn")).to_have_count(0)
    summaries = out.locator("details > summary")
    expect(summaries).to_have_count(len(TOOL_TITLES))
    for i, title in enumerate(TOOL_TITLES):
        expect(summaries.nth(i)).to_contain_text(title)
    expect(out.locator("details[open] > summary")).to_have_text([re.compile("Delete build/")])
    edit_fold = out.locator("details").filter(has=out.page.locator("summary", has_text="Edit demo/app.py"))
    expect(edit_fold).to_contain_text("def greet(name: str) -> str:")
    edit_fold.locator("summary").click()
    expect(edit_fold.get_by_text("def greet(name: str) -> str:")).to_be_visible()
    nb.screenshot("tools-static.png")
    assert not [e for e in nb.console_errors if "acp" in e.lower() or "anywidget" in e.lower()], nb.console_errors


def test_saved_notebook_has_static_turns_for_every_frontend(nb: Notebook) -> None:
    out = nb.run(0, "tools")
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    nb.save()
    saved = nb.lab.api("GET", f"/api/contents/{nb.name}?content=1")["content"]
    outputs = saved["cells"][0]["outputs"]
    assert outputs, "the saved cell has no outputs"
    for output in outputs:  # every output has a type any frontend reads
        if output["output_type"] == "display_data":
            assert {"text/markdown", "text/plain"} & set(output["data"]), output
    assert not [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]  # static
    turns = [o for o in outputs if "Read README.md" in o.get("data", {}).get("text/markdown", "")]
    assert len(turns) == 1, [o.get("data", {}).keys() for o in outputs]  # the turn is one output
    (turn,) = turns
    markdown = turn["data"]["text/markdown"]  # a reader without widgets sees the whole turn
    # The fallback holds the *final* state (update_display_data reached the saved model), in order.
    assert "pending" not in markdown and "running" not in markdown, markdown
    assert "Read README.md" in markdown and "· ✓ done" in markdown
    assert "def greet(name: str) -> str:" in markdown
    assert "Delete build/ (simulated failure) · ✗ failed" in markdown
    plain = turn["data"]["text/plain"]
    assert all(title in plain for title in TOOL_TITLES), plain
    assert markdown.index("Running simulated tool calls") < markdown.index(TOOL_TITLES[0]) < markdown.index("Done: read, search, edit")
    assert re.search(r"<sub>Done\b", markdown), markdown[-500:]


def _permission_buttons(out):
    form = out.locator(".acp-permission")
    expect(form).to_have_count(1)
    return form, form.locator("button")


def test_permission_buttons_allow_once(nb: Notebook) -> None:
    out = nb.run(0, "permission")
    form, buttons = _permission_buttons(out)
    # Words from each option's kind; "always" says its scope; the agent's own name beside where it differs.
    expect(buttons).to_have_text(["Allow once", re.compile(r"^Always allow edit of .*demo-permission\.txt in this session"),
                                  "Reject", re.compile(r"^Always reject edit of .* in this session")])
    nb.screenshot("permission-asking.png")
    # The turn waits for the answer.
    expect(status_line(out)).to_have_count(0)
    form.get_by_role("button", name="Allow once").click()
    expect(out).to_contain_text("Permission granted", timeout=TURN)
    expect(status_line(out)).to_have_text(END_TURN)
    # Finished: static, the question with its answer and nothing to click (a live answered
    # question's locked buttons: test_tools_render_as_widget_rows_then_a_static_output).
    expect(out.locator("button")).to_have_count(0)
    expect(out).to_contain_text("Allow once")
    nb.screenshot("permission-answered.png")
    assert (nb.lab.root / "demo-permission.txt").exists()


def _tab_to(page, target, limit: int = 40) -> None:
    """Press Tab until ``target`` has the focus (bounded; each press is one DOM step)."""
    handle = target.element_handle()
    for _ in range(limit):
        if page.evaluate("(el) => document.activeElement === el", handle):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"{target} not reachable with Tab in {limit} presses")


def test_permission_buttons_keyboard(nb: Notebook) -> None:
    page = nb.page
    out = nb.run(0, "permission")
    form, _ = _permission_buttons(out)
    # Start from the form's own text (the notebook in command mode), then Tab.
    form.get_by_text("Permission requested").click()
    allow = form.get_by_role("button", name="Allow once")
    _tab_to(page, allow)
    expect(allow).to_be_focused()
    page.keyboard.press("Enter")
    expect(out).to_contain_text("Permission granted", timeout=TURN)
    expect(status_line(out)).to_have_text(END_TURN)

    # Again, answered with Space this time: "Reject".
    out2 = nb.run(1, "permission")
    form2, _ = _permission_buttons(out2)
    form2.get_by_text("Permission requested").click()
    reject = form2.get_by_role("button", name="Reject", exact=True)
    _tab_to(page, reject)
    expect(reject).to_be_focused()
    page.keyboard.press("Space")
    expect(out2).to_contain_text("Permission rejected", timeout=TURN)
    expect(status_line(out2)).to_have_text(END_TURN)


def test_interrupt_cancels_and_next_cell_runs(nb: Notebook) -> None:
    page = nb.page
    out = nb.run(0, "slow")
    expect(out).to_contain_text("Streaming 100 chunks")
    expect(out).to_contain_text(re.compile(r"\b3 4 5\b"))  # streaming live
    nb.panel.locator("jp-button[data-command='notebook:interrupt-kernel'], "
                     "button[data-command='notebook:interrupt-kernel']").first.click()
    expect(status_line(out)).to_have_text(re.compile(r"^Cancelled\b"), timeout=TURN)
    expect(out).not_to_contain_text("Finished without being cancelled")
    nb.screenshot("interrupted.png")
    # The kernel is usable at once: the next cell runs a whole turn.
    out2 = nb.run(1, "hello")
    expect(status_line(out2)).to_have_text(END_TURN, timeout=TURN)
    # And with the keyboard: I, I in command mode.
    out3 = nb.run(2, "slow")
    expect(out3).to_contain_text(re.compile(r"\b3 4 5\b"))
    page.keyboard.press("Escape")
    page.keyboard.press("i")
    page.keyboard.press("i")
    expect(status_line(out3)).to_have_text(re.compile(r"^Cancelled\b"), timeout=TURN)


def test_shell_output_live_inside_the_execute_row(nb: Notebook) -> None:
    page = nb.page
    # Record, as it happens, the row's status when the first line shows up.
    page.evaluate(
        """() => {
          window.__seen = null;
          new MutationObserver(() => {
            if (window.__seen) return;
            for (const pre of document.querySelectorAll('.acp-tc-term')) {
              if (pre.textContent.includes('line 1 from')) {
                window.__seen = pre.closest('.acp-tc').dataset.status;
              }
            }
          }).observe(document.body, {childList: true, subtree: true, characterData: true});
        }"""
    )
    # terminal/create asks under the default policy; this test is about the live output.
    out = nb.run(0, "%permissions allow-all\nshell")
    row = tool_row(out, "Run a short bash script")
    term = row.locator(".acp-tc-term")
    expect(term).to_contain_text("line 1 from")
    nb.screenshot("shell.png")
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    assert page.evaluate("window.__seen") == "in_progress", "the output did not show while the command ran"
    # Finished, static: the call stays unfolded as the live row was (it showed a terminal),
    # with the whole output and the exit status.
    expect(out.locator(".acp-tc")).to_have_count(0)
    fold = out.locator("details[open]").filter(has=page.locator("summary", has_text="Run a short bash script"))
    expect(fold).to_have_count(1)
    expect(fold).to_contain_text("$ /bin/bash -c")
    expect(fold).to_contain_text(re.compile(r"line 5 from \S+\s+a line on stderr\s+done"))
    expect(fold).to_contain_text("exit code 0")
    nb.screenshot("shell-static.png")


def test_a_row_opened_or_folded_by_hand_stays_so_in_the_static_output(nb: Notebook) -> None:
    def call(tid: str, title: str, kind: str, status: str, body: str) -> dict:
        return {"update": {"sessionUpdate": "tool_call", "toolCallId": tid, "title": title, "kind": kind,
                           "status": status, "content": [{"type": "content", "content": {"type": "text", "text": body}}]}}

    scenario = {
        "prompt": [
            call("x1", "Read one", "read", "completed", "first body"),
            call("x2", "Run two", "execute", "failed", "boom"),
            # The turn waits here for the reader, who opens and folds rows meanwhile.
            {"request": {"method": "session/request_permission", "params": {
                "sessionId": "$SID", "toolCall": {"toolCallId": "x3", "title": "Write three", "kind": "edit"},
                "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"},
                            {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}},
            # A row changes after the reader's clicks: the static end shows its last state.
            {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "x1", "title": "Read one again"}},
            {"chunk": "after the rows\n"},
        ]
    }
    scenario_file = nb.lab.root / "expand-scenario.json"
    scenario_file.write_text(json.dumps(scenario))
    out0 = nb.run(0, f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario_file}")
    expect(out0).to_contain_text("it starts with the next prompt")
    out = nb.run(1, "go")
    form, _ = _permission_buttons(out)
    one, two = tool_row(out, "Read one"), tool_row(out, "Run two")
    # Automatic: the completed call is folded, the failed one open.
    expect(one.locator(".acp-tc-head")).to_have_attribute("aria-expanded", "false")
    expect(two.locator(".acp-tc-head")).to_have_attribute("aria-expanded", "true")
    one.locator(".acp-tc-head").click()
    two.locator(".acp-tc-head").click()
    expect(one.locator(".acp-tc-head")).to_have_attribute("aria-expanded", "true")
    expect(two.locator(".acp-tc-head")).to_have_attribute("aria-expanded", "false")
    form.get_by_role("button", name=re.compile(r"^Allow once")).click()
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    expect(out).to_contain_text("after the rows")
    # The static output that replaced the view keeps the reader's choices: "Read one" (folded
    # by default) open, "Run two" (open by default: it failed) folded.
    expect(out.locator(".acp-turn")).to_have_count(0)
    expect(out.locator("details[open] > summary")).to_have_text([re.compile("Read one again")])
    expect(out.get_by_text("first body")).to_be_visible()
    expect(out.locator("details:not([open]) > summary")).to_have_text([re.compile("Run two")])
    expect(out.get_by_text("boom")).to_be_hidden()


P_SCRIPT = "<script>window.__pwned=1</script>"
P_IMG = "<img src=x onerror=window.__pwned=1>"


def test_agent_html_is_shown_as_text(nb: Notebook) -> None:
    scenario = {
        "prompt": [
            {"chunk": f"text {P_SCRIPT} and {P_IMG}\n\n"},
            {"update": {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": f"thinking {P_IMG}"}}},
            {"update": {"sessionUpdate": "plan", "entries": [{"content": f"plan {P_IMG}", "priority": "high", "status": "pending"}]}},
            {"update": {"sessionUpdate": "tool_call", "toolCallId": "x1", "title": f"Edit {P_IMG}", "kind": "edit",
                        "status": "pending", "rawInput": {"path": P_SCRIPT}}},
            {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "x1", "status": "completed",
                        "content": [
                            {"type": "diff", "path": "/tmp/x.html", "oldText": "a\n", "newText": f"{P_SCRIPT}\n{P_IMG}\n"},
                            {"type": "content", "content": {"type": "text", "text": f"result {P_IMG}"}},
                        ]}},
            {"request": {"method": "session/request_permission", "params": {
                "sessionId": "$SID",
                "toolCall": {"toolCallId": "x1", "title": f"Run {P_IMG}", "kind": "execute",
                             "rawInput": {"command": f"echo {P_SCRIPT}"}},
                "options": [{"optionId": "ok", "name": f"Allow {P_IMG}", "kind": "allow_once"},
                            {"optionId": "no", "name": "Reject", "kind": "reject_once"}],
            }}},
            {"chunk": f"\n\nafter {P_IMG} end\n"},
        ]
    }
    scenario_file = nb.lab.root / "xss-scenario.json"
    scenario_file.write_text(json.dumps(scenario))
    out0 = nb.run(0, f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario_file}")
    expect(out0).to_contain_text("it starts with the next prompt")
    out = nb.run(1, "go")
    # The permission form: title, command and option names are text too.
    form, buttons = _permission_buttons(out)
    expect(form).to_contain_text(f"Run {P_IMG}")
    expect(form.locator("pre")).to_have_text(f"echo {P_SCRIPT}")
    expect(buttons).to_have_text([f"Allow once \u2014 the agent's words: \u201cAllow {P_IMG}\u201d", "Reject"])
    # Live (the question waits): the row's title, diff and result are text.
    row = tool_row(out, "Edit")
    expect(row.locator(".acp-tc-title")).to_have_text(f"Edit {P_IMG}")
    row.locator(".acp-tc-head").click()
    diff = row.locator(".acp-tc-diff")
    expect(diff.locator(".acp-add")).to_have_text(["+" + P_SCRIPT, "+" + P_IMG])
    expect(row.locator(".acp-tc-body")).to_contain_text(f"result {P_IMG}")
    assert out.locator("img[src='x'], script").count() == 0
    buttons.first.click()
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    # Finished, static: the same strings, still text.
    expect(out).to_contain_text(f"chose Allow once \u2014 the agent's words: \u201cAllow {P_IMG}\u201d")
    expect(out).to_contain_text('RESULT {"outcome": {"outcome": "selected", "optionId": "ok"}}')
    expect(out.locator("summary").filter(has_text=f"Edit {P_IMG}")).to_have_count(1)
    expect(out).to_contain_text("+" + P_SCRIPT)
    expect(out).to_contain_text(f"result {P_IMG}")
    expect(out).to_contain_text(f"text {P_SCRIPT} and {P_IMG}")
    expect(out).to_contain_text(f"after {P_IMG} end")
    expect(out).to_contain_text(f"plan {P_IMG}")
    expect(out).to_contain_text(f"thinking {P_IMG}")
    nb.screenshot("xss.png")
    # Nothing became live HTML: no such elements, and nothing ran.
    assert out.locator("img[src='x'], script").count() == 0
    assert nb.page.evaluate("typeof window.__pwned") == "undefined"
