"""The oracle itself: it must see what is live, and its fast mode must see what the slow one sees.

Raw agent text (not passed through ``safe``) rendered by JupyterLab is live
in known ways; if the oracle reported nothing for these, every "no live
output" from it would mean nothing.
"""

from __future__ import annotations

import pytest

from .generator import RUN, cases
from .oracle import Item

#: One worker runs this folder (one JupyterLab and Chromium); a first test also waits for them to start.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("rendermime"), pytest.mark.timeout(600)]


def _kinds(findings: list[str]) -> set[str]:
    return {f.split(" ", 1)[0] for f in findings}


@pytest.mark.parametrize(("mime", "source", "trusted", "kind"), [
    ("text/markdown", f"a <img src=x onerror={RUN}> b", True, "element"),
    ("text/markdown", f"a <img src=x onerror={RUN}> b", True, "handler"),
    ("text/markdown", "a $x^2$ b", True, "math"),
    ("text/markdown", "a $x^2$ b", False, "math"),
    ("text/markdown", "\\\\[ x \\\\]", True, "math"),
    ("text/markdown", f"[x](javascript:{RUN})", True, "link"),
    ("text/markdown", f"<svg onload={RUN}></svg>", True, "element"),
    ("text/markdown", "<span style=\"position:fixed\">s</span>", True, "attribute"),
    ("text/markdown", "<marquee>m</marquee>", True, "element"),
    ("text/markdown", "<blink>m</blink>", True, "tag"),
    # JupyterLab's math pass ends a code span early (the known attack).
    ("text/markdown", f"Try `<img src=x onerror={RUN}>\\\\(` then \\\\)", True, "handler"),
    ("text/html", f"<img src=x onerror={RUN}>", True, "handler"),
    ("text/html", "<b>$x$</b>", True, "math"),
    ("text/html", "<div class=\"tex2jax_ignore mathjax_ignore\">$x$</div>", True, None),
    # Our wrapper's one style (safe._WRAP_OPEN) is ours; any other style, or that one elsewhere, is not.
    ("text/html", "<div class=\"tex2jax_ignore mathjax_ignore\" style=\"contain: style\">$x$</div>", True, None),
    ("text/html", "<div class=\"tex2jax_ignore mathjax_ignore\" style=\"contain: style; position: fixed\">x</div>",
     True, "attribute"),
    ("text/html", "<span style=\"contain: style\">x</span>", True, "attribute"),
    # The sanitizer drops the handler but keeps an image that loads (still live).
    ("text/html", f"<img src=x onerror={RUN}>", False, "element"),
    ("text/plain", "plain <b>x</b> $x$", True, None),
    # JupyterLab links any scheme://... in plain text.
    ("text/plain", f"see javascript://%0A{RUN}", True, "link"),
    # marked's code block (JupyterLab's renderer) writes the info string into class="language-...".
    ("text/markdown", f"```\"><img src=x onerror={RUN}>\ncode\n```", True, "handler"),
    ("text/markdown", "- [x] done\n- [ ] todo", True, None),  # a task list's disabled boxes
    ("text/markdown", "$x$", True, "math"),
])
def test_oracle_sees_live_output(oracle, mime: str, source: str, trusted: bool, kind: str | None) -> None:
    [verdict] = oracle.judge([Item(mime, source, trusted)])
    if kind is None:
        assert not verdict.findings, verdict
    else:
        assert kind in _kinds(verdict.findings), verdict
    if kind == "math":  # MathJax's own elements are "math", nothing else
        assert _kinds(verdict.findings) == {"math"}, verdict


def test_payloads_that_ran_are_recorded(oracle) -> None:
    """A handler that fires is seen by the page too (window.__acp_pwned)."""
    before = len(oracle.pwned)
    oracle.judge([Item("text/html", f"<img src=x onerror={RUN}>", True)])
    # The image's error event comes after its request fails, after the render.
    oracle.page.wait_for_function("window.__acp_pwned.length > 0", timeout=30_000)
    oracle.pwned += oracle.page.evaluate("window.__acp_pwned.splice(0)")
    assert len(oracle.pwned) > before


def test_batch_mode_sees_what_attached_outputs_show(oracle) -> None:
    """The fast mode (render detached, typeset a batch at once) against the
    output-area order (render, attach, typeset per output) on raw hostile text."""
    texts = cases("oracle-modes", 0, 150)
    items = [Item(mime, text, True) for text in texts for mime in ("text/markdown", "text/html")]
    batch = oracle.judge(items, mode="batch")
    attached = oracle.judge(items, mode="attach")
    differ = [(b.item, sorted(_kinds(b.findings)), sorted(_kinds(a.findings)))
              for b, a in zip(batch, attached) if _kinds(b.findings) != _kinds(a.findings)]
    assert not differ, differ[:5]
    assert sum(bool(b.findings) for b in batch) > len(items) // 4  # raw text: much of it is live
