"""Hostile agent markdown in the real JupyterLab, along every way an answer is shown (issue 21).

A scripted agent answers with the payloads that broke out before (a code
span that JupyterLab's math pass ends early, a fence in a block quote whose
blank lines are ``>`` lines, a fence info string that marked writes into a
``class`` attribute), raw HTML, and math of every delimiter. The answer is
shown:

1. live, as the turn view renders it;
2. by ``%load`` of the session (the "last answer" of a reopened session);
3. after a kernel restart, by the first prompt (the session is reopened);
4. in the saved notebook, reopened (JupyterLab signs a notebook it saves, so
   its outputs are trusted again);
5. in that notebook changed outside Jupyter, reopened: untrusted, sanitized.

Each in JupyterLab with the widget extensions and in one without them
(``@jupyter-widgets/jupyterlab-manager`` and ``anywidget`` disabled in a
``labconfig/page_config.json``), where the bundles' ``text/html`` or
``text/markdown`` is what renders. In the DOM of every output: no live
element (handlers, script, images that load, bad links...), no MathJax
output, no payload ran, and the payloads are there as text.
Screenshots: ``tests/browser/artifacts/hostile-renderers-*.png``.
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from typing import Any

import pytest

from .conftest import AGENTS, ARTIFACTS, START, TURN, WAIT, Notebook, _open_notebook, _serve, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect

DONE = re.compile(r"^Done\b")
WIDGET_EXTENSIONS = ("@jupyter-widgets/jupyterlab-manager", "anywidget")


def _js(tag: str) -> str:
    """Script that records ``tag`` in window.__acp_pwned (no double quotes, no spaces)."""
    return f"window.__acp_pwned=(window.__acp_pwned||[]).concat('{tag}')"


def answer(t: str) -> str:
    """The hostile answer, tagged ``t`` so a payload that runs names its source."""
    return "\n".join([
        f"KNOWN1 Try `<img src=x onerror={_js(t + ':known1')}>\\\\(` then \\\\) end",
        "",
        "KNOWN2",
        "> ```",
        f"> <img src=x onerror={_js(t + ':known2')}>",
        ">",
        "> $q$ in a quoted fence",
        ">",
        "> ```",
        "",
        "INFO fence with a hostile info string:",
        "",
        f"```\"><img src=x onerror={_js(t + ':info')}>",
        "code",
        "```",
        "",
        "MATH $x$ and $$y$$ and \\\\(z\\\\) and \\\\[w\\\\] and \\begin{align}a\\end{align} "
        "and \\style{background-color:red}{STYLED}",
        "",
        "MONEY \\$5 and \\$6, and $7 and $8",
        "",
        "PATH `/tmp/a",
        "b.py` and `/tmp/$HOME/c`",
        "",
        f"RAW <img src=x onerror={_js(t + ':img')}> <svg onload={_js(t + ':svg')}><circle r=5 /></svg> "
        f"<script>{_js(t + ':script')}</script> [click](javascript:{_js(t + ':link')})",
        "",
        f"AUTOLINK see www.example.com`<img src=x onerror={_js(t + ':autolink')}>` here",
        "",
        "@@0@@ placeholder",
        "",
        f"LAST {t} answer",
    ])


#: Text each rendering must show (markdown escapes done: ``\\$5`` shows ``$5``).
VISIBLE = ["KNOWN1", "onerror=", "KNOWN2", "AUTOLINK", "INFO", "MATH", "$x$", "STYLED", "MONEY", "$5 and", "PATH", "/tmp/a",
           "b.py", "RAW", "<script>", "@@0@@"]


def scenario() -> dict:
    return {
        "load": True,
        "history": [
            {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "first question"}},
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "FIRST ANSWER"}},
            {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "second question"}},
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": answer("hist")}},
        ],
        "prompt": [
            {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1",
                        "title": f"Read `/tmp/a\nb` $t$ <img src=x onerror={_js('title')}>", "kind": "read",
                        "status": "completed",
                        "locations": [{"path": f"/tmp/$x$\n<img src=x onerror={_js('loc')}>.py", "line": 1}]}},
            {"chunk": answer("live")},
        ],
    }


#: Everything live or typeset in the notebook's output areas.
SCAN = r"""
() => {
  const found = [];
  const bad = new Set(['SCRIPT', 'IFRAME', 'FRAME', 'OBJECT', 'EMBED', 'FORM', 'META', 'LINK', 'BASE', 'STYLE',
                       'AUDIO', 'VIDEO', 'SOURCE', 'PICTURE', 'MATH']);
  const safe = (value) => {
    const squashed = value.replace(/[\x00-\x20]/g, '').toLowerCase();
    if (/^(javascript|vbscript|data|blob|file):/.test(squashed)) return false;
    try { return ['http:', 'https:', 'mailto:'].includes(new URL(value, document.baseURI).protocol); }
    catch (e) { return false; }
  };
  const cells = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell')];
  for (const area of document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea')) {
    const where = 'cell ' + cells.indexOf(area.closest('.jp-Cell')) + ': ';
    for (const el of area.querySelectorAll('*')) {
      const name = el.tagName.toUpperCase();
      const show = where + el.outerHTML.slice(0, 240);
      if (name === 'MJX-CONTAINER') found.push('MathJax ' + show);
      if (bad.has(name) && !el.closest('mjx-container')) found.push('element ' + show);
      if (name === 'IMG' && (el.hasAttribute('src') || el.hasAttribute('srcset'))) found.push('image ' + show);
      if (name === 'SVG' && !el.closest('.jp-icon-selectable, [class*="acp-"] button')) {
        if ([...el.attributes].some((a) => a.name.startsWith('on'))) found.push('svg handler ' + show);
      }
      for (const attr of el.attributes) {
        const n = attr.name.toLowerCase();
        if (n.startsWith('on')) found.push('handler ' + n + ' ' + show);
        if (['src', 'srcdoc', 'srcset', 'action', 'formaction'].includes(n)) found.push('loads ' + n + ' ' + show);
        if ((n === 'href' || n === 'xlink:href') && !safe(attr.value)) found.push('link ' + show);
      }
    }
  }
  return found;
}
"""


@pytest.fixture(scope="module")
def lab_without_widgets(tmp_path_factory) -> Any:
    """JupyterLab with the widget extensions disabled (labconfig/page_config.json)."""
    base = tmp_path_factory.mktemp("lab-nowidgets")
    config = base / "config" / "labconfig"
    config.mkdir(parents=True)
    (config / "page_config.json").write_text(json.dumps({"disabledExtensions": {e: True for e in WIDGET_EXTENSIONS}}))
    yield from _serve(base, "jupyterlab", [
        "--LabApp.news_url=",
        "--LabServerApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ])


@pytest.fixture(params=["widgets", "no-widgets"])
def hostile_nb(request, browser_context: Any) -> Any:
    lab = request.getfixturevalue("lab" if request.param == "widgets" else "lab_without_widgets")
    workspace = uuid.uuid4().hex[:12]
    gen = _open_notebook(lab, browser_context, request, f"/lab/workspaces/{workspace}/tree/{{name}}",
                         cells=[""] * 6, reloads=2)
    notebook = next(gen)
    notebook.variant = request.param  # type: ignore[attr-defined]
    try:
        yield notebook
    finally:
        next(gen, None)


def _check(nb: Notebook, phase: str, cells: list[int], tag: str) -> list[str]:
    """Problems in the page now; a screenshot either way."""
    page = nb.page
    shot = f"hostile-renderers-{nb.variant}-{phase}.png"  # type: ignore[attr-defined]
    if cells:  # the notebook scrolls inside the page: show the answer's middle
        nb.output(cells[0]).get_by_text("MONEY").first.scroll_into_view_if_needed()
    nb.screenshot(shot)
    problems = [f"{phase}: {p}" for p in page.evaluate(SCAN)]
    pwned = page.evaluate("window.__acp_pwned === undefined ? null : window.__acp_pwned")
    if pwned:
        problems.append(f"{phase}: payloads ran: {pwned}")
    for i in cells:
        shown = " ".join(nb.output(i).inner_text().split())
        for needle in VISIBLE + [f"LAST {tag} answer"]:
            if needle not in shown:
                problems.append(f"{phase}: cell {i} does not show {needle!r} as text")
    print(f"{phase}: screenshot {ARTIFACTS / shot}")
    return problems


def _wait_idle(nb: Notebook, timeout: int = TURN) -> None:
    expect(nb.panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=timeout)


@pytest.mark.slow
def test_hostile_answers_render_inert_everywhere(hostile_nb: Notebook) -> None:
    nb = hostile_nb
    lab = nb.lab
    variant = nb.variant  # type: ignore[attr-defined]
    scenario_file = lab.root / f"hostile-renderers-{variant}.json"
    scenario_file.write_text(json.dumps(scenario()))
    problems: list[str] = []
    expect(nb.run(0, f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario_file}")
           ).to_contain_text("it starts with the next prompt", timeout=TURN)

    # 1. Live.
    out = nb.run(1, "go")
    expect(out).to_contain_text("LAST live answer", timeout=TURN)
    _wait_idle(nb)
    # Finished, the turn is the bundle's HTML or markdown with or without a widget manager
    # (the widget only lives while the turn runs: view/finished.py).
    expect(out.locator(".jp-OutputArea-output sub").last).to_have_text(DONE, timeout=TURN)
    expect(out.locator(".acp-tc, .jupyter-widgets")).to_have_count(0)
    problems += _check(nb, "live", [1], "live")

    # 2. %load of the session: the last answer of its history.
    loaded = nb.run(2, "%load old-session")
    expect(loaded).to_contain_text("The last answer", timeout=TURN)
    _wait_idle(nb)
    problems += _check(nb, "load", [2], "hist")

    # 3. A kernel restart; the first prompt reopens the session and shows its last answer.
    kernel = lab.api("GET", "/api/sessions")[0]["kernel"]["id"]
    lab.api("POST", f"/api/kernels/{kernel}/restart", timeout=TURN / 1000)
    _wait_idle(nb, START)
    after = nb.run(3, "go")
    expect(after).to_contain_text("LAST live answer", timeout=TURN)
    _wait_idle(nb)
    problems += _check(nb, "restart", [3], "live")
    expect(after).to_contain_text("The last answer")

    # 4. Saved, closed, reopened: outputs are no longer trusted.
    nb.save()
    page = nb.page.context.new_page()
    page.goto(lab.url(f"/lab/workspaces/{uuid.uuid4().hex[:12]}/tree/{nb.name}"))
    again = Notebook(lab, page, nb.name)
    again.variant = variant  # type: ignore[attr-defined]
    expect(again.panel.locator(".jp-Notebook-ExecutionIndicator")).to_have_count(1, timeout=START)
    expect(again.output(3)).to_contain_text("MONEY", timeout=START)
    expect(again.output(2)).to_contain_text("MONEY", timeout=WAIT)
    # Finished turns are static: every variant shows them reopened.
    live_cells = [1, 3]
    try:
        assert page.evaluate("document.querySelectorAll('.jp-OutputArea .jp-mod-trusted').length") > 0, \
            "JupyterLab did not trust the notebook it saved"
        problems += _check(again, "reopened", [2], "hist")
        problems += [p for p in _check(again, "reopened-live", live_cells, "live") if "payloads ran" not in p]
    finally:
        page.close()

    # 5. Changed outside Jupyter (its signature no longer matches): untrusted, the sanitizer renders.
    path = lab.root / nb.name
    saved = json.loads(path.read_text(encoding="utf-8"))
    saved["metadata"]["edited_elsewhere"] = True
    path.write_text(json.dumps(saved), encoding="utf-8")
    page = nb.page.context.new_page()
    page.goto(lab.url(f"/lab/workspaces/{uuid.uuid4().hex[:12]}/tree/{nb.name}"))
    untrusted = Notebook(lab, page, nb.name)
    untrusted.variant = variant  # type: ignore[attr-defined]
    expect(untrusted.output(2)).to_contain_text("MONEY", timeout=START)
    try:
        assert page.evaluate("document.querySelectorAll('.jp-OutputArea .jp-mod-trusted').length") == 0, \
            "the notebook changed outside Jupyter is still trusted"
        problems += _check(untrusted, "untrusted", [2], "hist")
        problems += [p for p in _check(untrusted, "untrusted-live", live_cells, "live") if "payloads ran" not in p]
    finally:
        page.close()

    assert not problems, "\n".join(problems)
