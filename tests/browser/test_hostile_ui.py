"""Hostile agent strings in a real JupyterLab: nothing an agent sends becomes live.

A scripted agent answers a prompt with every kind of update the turn view
shows (message and thought chunks, a tool call with locations, content and a
diff, a plan, a usage update), a session whose modes have hostile ids, and an
error with a hostile message. Every string carries payloads that would record
themselves in ``window.__acp_pwned`` if they ever ran: raw HTML with event
handlers, script, iframes, SVG, ``javascript:`` links (markdown, HTML and
MathJax's ``\\href``), an image that would load from 127.0.0.1:9, a fence
closed early, a code span across a line break.

Outputs of a live session are *trusted* by JupyterLab (raw HTML in them is
not sanitized), so only acp_kernel's escaping stands between these strings
and the page. The test checks the page itself: nothing ran, no live element
or handler or unsafe link is in any output area, nothing was fetched, and
the payloads are still there as text.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from .conftest import AGENTS, Notebook, TURN, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect

from tests.hostile.render import live

END_TURN = re.compile(r"^Done\b")


def _js(tag: str) -> str:
    """Script that records ``tag`` in window.__acp_pwned (no double quotes, no spaces)."""
    return f"window.__acp_pwned=(window.__acp_pwned||[]).concat('{tag}')"


def payloads(where: str) -> str:
    """Every payload, tagged with ``where`` so a hit names its source."""
    t = where
    return "\n".join([
        f'img <img src=x onerror="{_js(t + ":img")}"> end',
        f"script <script>{_js(t + ':script')}</script> end",
        f'`a\nb` <img src=x onerror="{_js(t + ":codespan")}"> after span',
        f'<details open ontoggle="{_js(t + ":details")}"><summary>s</summary>d</details>',
        "",
        f"[click](javascript:{_js(t + ':mdlink')})",
        "",
        f'<a href="javascript:{_js(t + ":htmllink")}">x</a>',
        "",
        "![leak](http://127.0.0.1:9/leak.png?secret=1)",
        "",
        f"math $\\href{{javascript:{_js(t + ':mathhref')}}}{{mathlink}}$ end",
        "",
        f'math $<img src=x onerror="{_js(t + ":mathimg")}">$ end',
        "",
        "```python",
        "print(1)",
        "```",
        f'<img src=x onerror="{_js(t + ":fence")}">',
        "```",
        "",
        f"<iframe srcdoc=\"<script>parent.__acp_pwned='{t}:iframe'</script>\"></iframe>",
        "",
        f'<svg onload="{_js(t + ":svg")}"><circle r=5 /></svg>',
        "",
    ])


def _oneline(where: str) -> str:
    """A hostile one-line string (a title, an id, a currency)."""
    return (f'{where} <img src=x onerror="{_js(where + ":img")}"> '
            f"$\\href{{javascript:{_js(where + ':mathhref')}}}{{{where}link}}$ "
            f"[click](javascript:{_js(where + ':mdlink')}) <script>{_js(where + ':script')}</script>")


MODE = "mode`x\n<img src=x onerror=\"" + _js("mode:img") + "\">$\\href{javascript:" + _js("mode:mathhref") + "}{modelink}$"
ERROR = "agent failed: " + _oneline("error") + "\n<svg onload=\"" + _js("error:svg") + "\">"


def scenario() -> dict:
    text = lambda s: {"type": "content", "content": {"type": "text", "text": s}}  # noqa: E731
    return {
        "new_session": {"modes": {
            "currentModeId": MODE,
            "availableModes": [
                {"id": MODE, "name": _oneline("modename"), "description": _oneline("modedesc")},
                {"id": "plain", "name": "Plain"},
            ],
        }},
        "prompt": [
            {"chunk": "Start of the answer.\n\n" + payloads("chunk") + "\nEnd of the answer.\n\n"},
            {"update": {"sessionUpdate": "agent_thought_chunk",
                        "content": {"type": "text", "text": "thinking " + payloads("thought")}}},
            {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": _oneline("title"),
                        "kind": "edit", "status": "in_progress",
                        "locations": [{"path": "/tmp/loc\n<img src=x onerror=\"" + _js("location:img") + "\">.py",
                                       "line": 3}],
                        "rawInput": {"path": "<script>" + _js("rawinput:script") + "</script>"}}},
            {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                        "content": [
                            text("tool says " + payloads("toolcontent")),
                            {"type": "diff", "path": "/tmp/diff\n<script>" + _js("diffpath:script") + "</script>.html",
                             "oldText": "old line\n",
                             "newText": "<img src=x onerror=\"" + _js("diff:img") + "\">\n"},
                        ]}},
            {"update": {"sessionUpdate": "plan", "entries": [
                {"content": "plan " + _oneline("plan"), "priority": "high", "status": "pending"},
                {"content": payloads("plan2"), "priority": "low", "status": "completed"},
            ]}},
            {"update": {"sessionUpdate": "usage_update", "used": 1234, "size": 200000,
                        "cost": {"amount": 0.5, "currency": _oneline("currency")}}},
            {"chunk": "\n\nThe last words.\n"},
            # A question keeps the turn live (a widget) while the test reads it; answered, the
            # turn ends and its output becomes static: both are checked.
            {"request": {"method": "session/request_permission", "params": {
                "sessionId": "$SID", "toolCall": {"toolCallId": "q1", "title": "Hold " + _oneline("question"),
                                                  "kind": "other"},
                "options": [{"optionId": "ok", "name": "Allow once", "kind": "allow_once"},
                            {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}},
        ],
        "prompts": {
            "fail": [
                {"chunk": "about to fail " + _oneline("prefail") + "\n"},
                {"reply_prompt": {"error": {"code": -32603, "message": ERROR,
                                            "data": {"details": payloads("errordata")}}}},
            ],
        },
    }


#: What is live in the output areas: unexpected elements, handlers, links
#: that are not http(s)/mailto/relative, anything with a src or srcdoc.
FIND_LIVE = r"""
() => {
  const found = [];
  const safe = (value) => {
    const squashed = value.replace(/[\x00-\x20]/g, '').toLowerCase();
    let url;
    try { url = new URL(value, document.baseURI); } catch (e) { return false; }
    return ['http:', 'https:', 'mailto:'].includes(url.protocol) && !squashed.startsWith('javascript:')
      && !squashed.startsWith('data:') && !squashed.startsWith('vbscript:');
  };
  const bad = new Set(['IMG', 'SCRIPT', 'IFRAME', 'FRAME', 'OBJECT', 'EMBED', 'AUDIO', 'VIDEO',
                       'SOURCE', 'FORM', 'BASE', 'LINK', 'META', 'PICTURE']);
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  for (const area of document.querySelectorAll('.jp-OutputArea')) {
    const where = 'cell ' + cells.indexOf(area.closest('.jp-Cell')) + ': ';
    for (const el of area.querySelectorAll('*')) {
      const name = el.tagName.toUpperCase();
      const show = where + el.outerHTML.slice(0, 300);
      if (bad.has(name)) found.push('element ' + show);
      if (name === 'SVG' && el.hasAttribute('onload')) found.push('svg[onload] ' + show);
      for (const attr of el.attributes) {
        const n = attr.name.toLowerCase();
        if (n.startsWith('on')) found.push('handler ' + n + ' ' + show);
        if (n === 'src' || n === 'srcdoc' || n === 'srcset' || n === 'action' || n === 'formaction')
          found.push('loads ' + n + ' ' + show);
        if ((n === 'href' || n === 'xlink:href') && !safe(attr.value)) found.push('link ' + show);
      }
    }
  }
  return found;
}
"""

LINKS = r"""
() => [...document.querySelectorAll('.jp-OutputArea [href], .jp-OutputArea [xlink\\:href]')]
  .map((el) => ({tag: el.tagName, href: el.getAttribute('href') || el.getAttribute('xlink:href'),
                 text: el.textContent.slice(0, 80), inMath: !!el.closest('mjx-container'),
                 cell: [...document.querySelectorAll('.jp-Notebook .jp-Cell')].indexOf(el.closest('.jp-Cell')),
                 output: el.closest('.jp-OutputArea-output')?.className}))
"""


def _expand_rows(out) -> None:
    """Open every folded tool call row so its body (content, diff, locations) is in the DOM."""
    heads = out.locator(".acp-tc-head")
    for i in range(heads.count()):
        head = heads.nth(i)
        if head.get_attribute("aria-expanded") == "false":
            head.click()
        expect(head).to_have_attribute("aria-expanded", "true")


@pytest.mark.slow
def test_hostile_agent_strings_stay_text(nb: Notebook) -> None:
    page = nb.page
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    scenario_file = nb.lab.root / "hostile-scenario.json"
    scenario_file.write_text(json.dumps(scenario()))

    out0 = nb.run(0, f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario_file}")
    expect(out0).to_contain_text("it starts with the next prompt", timeout=TURN)

    # The turn, live (a widget) while its last question waits: its rows opened, nothing live in it.
    out = nb.run(1, "go")
    expect(out).to_contain_text("The last words.", timeout=TURN)
    reject = out.get_by_role("button", name="Reject", exact=True)
    expect(reject).to_have_count(1, timeout=TURN)
    _expand_rows(out)
    row = out.locator(".acp-tc")
    expect(row).to_have_count(1)
    expect(row.locator(".acp-tc-title")).to_have_text(_oneline("title").replace("\n", " "))
    live_problems = page.evaluate(FIND_LIVE)
    assert not live_problems, live_problems
    nb.screenshot("hostile-live.png")
    # Answered, the turn ends: its output is static from here on (every fold opened).
    reject.click()
    status = out.locator(".jp-OutputArea-output sub").last
    expect(status).to_have_text(END_TURN, timeout=TURN)
    expect(out.locator(".acp-tc")).to_have_count(0)
    expect(out.locator("summary").filter(has_text="title")).to_have_count(1)
    out.evaluate("area => area.querySelectorAll('details').forEach(d => { d.open = true; })")

    # Kernel commands showing agent-chosen ids and the agent's error.
    out2 = nb.run(2, "%status")
    expect(out2).to_contain_text("permissions:", timeout=TURN)
    out3 = nb.run(3, "%mode")
    expect(out3).to_contain_text("Modes", timeout=TURN)
    expect(out3).to_contain_text("offers:")
    out4 = nb.run(4, "fail")
    expect(out4).to_contain_text("agent failed", timeout=TURN)
    expect(nb.panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=TURN)

    # Agent text is never typeset as math: every output of ours carries no $ or
    # backslash in its markdown and sits in a MathJax-ignore element, so none of
    # the $\href{javascript:...}$ payloads reaches MathJax (that MathJax does run
    # on this page's outputs is shown by tests/rendermime against the same app).
    expect(nb.panel.locator(".jp-OutputArea mjx-container")).to_have_count(0)
    nb.screenshot("hostile.png")

    # Everything wrong is collected, so one failure names all of it.
    problems: list[str] = []
    pwned = page.evaluate("window.__acp_pwned === undefined ? null : window.__acp_pwned")
    if pwned is not None:
        problems.append(f"payloads ran: {pwned}")
    problems += page.evaluate(FIND_LIVE)
    links = page.evaluate(LINKS)
    problems += [f"MathJax link {link}" for link in links
                 if link["inMath"] and "javascript" in "".join((link["href"] or "").split()).lower()]
    # Nothing was fetched for the agent: not the leak image, not an <img src=x>.
    problems += [f"fetched {u}" for u in requests
                 if "127.0.0.1:9/" in u or "leak.png" in u or re.search(r"/x(\?|$)", u)]
    # The payloads are still there, as text (not dropped, not live).
    all_text = "\n".join(nb.panel.locator(".jp-OutputArea").all_text_contents())
    for needle in ["Start of the answer.", "End of the answer.", "onerror=", "<script>", "ontoggle=", "<iframe",
                   "<svg onload=", "javascript:", "chunk:img", "chunk:codespan", "chunk:fence", "thought:img",
                   "toolcontent:img", "plan2:img", "title:img", "location:img", "diff:img", "diffpath:script",
                   "plan:img", "currency:img", "mode:img", "error:img"]:
        if needle not in all_text:
            problems.append(f"{needle!r} is not shown as text")
    # The saved notebook, read by a frontend without widgets: no live markdown either.
    nb.save()
    saved = nb.lab.api("GET", f"/api/contents/{nb.name}?content=1")["content"]
    for i, cell in enumerate(saved["cells"]):
        for output in cell.get("outputs", []):
            md = output.get("data", {}).get("text/markdown")
            if md and live(md):
                problems.append(f"saved cell {i}: live markdown {live(md)} in {md[-300:]!r}")

    assert not problems, "\n".join(problems) + "\n\nlinks in outputs:\n" + json.dumps(links, indent=1)[:6000]
