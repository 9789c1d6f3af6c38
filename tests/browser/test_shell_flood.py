"""``%%shell seq 1 200000`` in JupyterLab: the page holds a bounded window
(first and last 500 lines), the cut notice sits between them, at the top of
the tail, and says how much was left out and where the whole output is; an
output line carrying raw HTML stays text."""

from __future__ import annotations

import re

from .conftest import TURN, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect

COUNT_JS = """
(cell) => [...cell.querySelectorAll('.jp-OutputArea-output')].map(o => ({
  text: o.innerText, top: o.getBoundingClientRect().top, height: o.getBoundingClientRect().height}))
"""


def test_seq_200000_leaves_a_bounded_page_with_the_notice_above_the_tail(nb):
    out = nb.run(0, "%%shell\nseq 1 200000; echo '<img src=x onerror=alert(1)>'")
    expect(nb.cell(0).locator(".jp-InputPrompt")).to_have_text("[1]:", timeout=TURN)
    notice = out.locator(".jp-OutputArea-output", has_text="not shown")
    expect(notice).to_have_count(1)
    expect(notice).to_contain_text(re.compile(r"199,001 lines \(1\.3 MB\) not shown; all of it in /\S+; the last 500 follow"))
    outputs = nb.cell(0).element_handle().evaluate(COUNT_JS)
    assert len(outputs) == 3, [o["text"][:80] for o in outputs]
    head, cut, tail = (o["text"] for o in outputs)
    assert head.split() == [str(i) for i in range(1, 501)]
    assert "not shown" in cut
    assert tail.split() == [str(i) for i in range(199_502, 200_001)] + ["<img", "src=x", "onerror=alert(1)>"]
    assert sum(len(o["text"].splitlines()) for o in outputs) <= 1_010  # bounded: not 200,000 lines
    # The notice is directly above the tail, and in view when the tail's start is.
    assert outputs[1]["top"] + outputs[1]["height"] <= outputs[2]["top"] + 1
    notice.scroll_into_view_if_needed()
    expect(notice).to_be_in_viewport()
    # Raw HTML from the output is text, no element.
    assert nb.cell(0).locator(".jp-OutputArea img").count() == 0
    nb.screenshot("shell-flood.png")
