"""Issue 26's figure: how soon the agent's proposed change shows in the notebook.

``python benchmarks/proposals_browser.py browser [--proposals N]`` opens an ACP Agent
notebook in JupyterLab (chromium) on the demo agent and runs ``notebook insert`` N times,
rejecting each proposal; per proposal, from the cell's Shift+Enter to the proposal's box
drawn on the page (both on the page's clock) and from there to the agent's turn ending
after the Reject click. The first proposal also starts the notebook MCP server (the
agent's first use) and is reported apart. Prints one JSON object on its last line.

As a section: ``python -m benchmarks --only proposals-browser``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

#: Stamps the key press and the first frame with a waiting proposal box.
OBSERVE_JS = """
() => {
  const pr = window.__pr = {t0: 0, shown: 0};
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && e.shiftKey) { pr.t0 = performance.now(); pr.shown = 0; }
  }, {capture: true});
  const check = () => {
    if (pr.t0 && !pr.shown && document.querySelector('.acp-proposal[data-state="waiting"]')) pr.shown = performance.now();
    requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
  return true;
}
"""


def _round(lab: Any, context: Any, name: str, n: int) -> dict[str, Any]:
    from playwright.sync_api import expect

    from long_turn_browser import _opened
    from tests.browser import conftest as bc

    lab.new_notebook(name, ["", "x = 1"], "acp")
    drawn: list[float] = []
    ended: list[float] = []
    with _opened(lab, context, name, "acp") as (page, nb):
        expect(nb.panel).to_have_attribute("data-acp-kernel-document", "open", timeout=bc.START)
        page.evaluate(OBSERVE_JS)
        for i in range(n + 1):
            out = nb.run(0, f"notebook insert\n```\nproposed_{i} = {i}\n```")
            box = nb.panel.locator('.acp-proposal[data-state="waiting"]')
            expect(box).to_have_count(1, timeout=bc.TURN)
            while not page.evaluate("() => window.__pr.shown"):
                time.sleep(0.01)
            pr = page.evaluate("() => window.__pr")
            drawn.append((pr["shown"] - pr["t0"]) / 1000)
            t = time.monotonic()
            box.get_by_role("button", name="Reject").click()
            expect(out.locator("sub").last).to_have_text(re.compile(r"\S"), timeout=bc.TURN)
            ended.append(time.monotonic() - t)
            page.locator(".acp-proposal-dismiss").first.click()
    return {"first_drawn_s": drawn[0], "drawn_s": drawn[1:], "reject_to_end_s": ended[1:]}


def browser(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.browser import lab_rounds

    return lab_rounds("acp-proposals-", 1, lambda lab, context, i, base: _round(lab, context, f"prop{i}.ipynb",
                                                                                 args.proposals))


def proposals_browser(ctx: Any) -> Any:
    """The benchmark section for ``benchmarks/run.py`` (``--only proposals-browser``)."""
    from benchmarks.run import Failed, Section, kernel_env, worker

    n = 5 if ctx.args.quick else 10
    sec = Section("A proposed cell in JupyterLab (chromium): key press -> drawn on the page",
                  ["what", "proposals", "p50 s", "max s"])
    try:
        b = worker(ctx, "browser", "--proposals", str(n), timeout=900, script=os.path.abspath(__file__),
                   env=kernel_env(ctx), cwd=os.path.join(ctx.tmp, "work"))["rounds"][0]
        sec.rows.append(["first proposal (the agent starts the notebook MCP server)", "1",
                         f"{b['first_drawn_s']:.2f}", f"{b['first_drawn_s']:.2f}"])
        sec.rows.append(["key press -> the proposal drawn", str(len(b["drawn_s"])),
                         f"{statistics.median(b['drawn_s']):.2f}", f"{max(b['drawn_s']):.2f}"])
        sec.rows.append(["Reject clicked -> the turn's status line", str(len(b["reject_to_end_s"])),
                         f"{statistics.median(b['reject_to_end_s']):.2f}", f"{max(b['reject_to_end_s']):.2f}"])
    except (Failed, OSError, ValueError, KeyError) as exc:
        sec.notes.append(f"failed: {exc}")
    sec.notes.append("the demo agent's `notebook insert` (an ACP tool call, then insert_cell over MCP, the kernel, "
                     "the document comm, the page); drawn = the first frame with the waiting box")
    return sec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="proposals_browser.py")
    p.add_argument("mode", choices=["browser"])
    p.add_argument("--proposals", type=int, default=10)
    args = p.parse_args(argv)
    from benchmarks.browser import run_and_print

    return run_and_print("proposals in the browser", lambda: browser(args))


if __name__ == "__main__":
    sys.exit(main())
