"""A 1,000-step turn in JupyterLab: from the agent's last update to the end on screen.

``python benchmarks/long_turn_browser.py browser [--steps 1000] [--rate 200] [--rounds 1]``
prints one JSON object on its last stdout line (like ``workers.py``). JupyterLab runs on
127.0.0.1 with Debian's chromium through Playwright, started as
``tests/browser/conftest.py`` does (temp root, private kernelspec prefix, temp state),
as ``shell_flood.py`` drives it.

The agent is this file's ``agent`` mode: a stdlib ACP agent (``synthetic_agent.py``'s
wire and lines), started and warmed up by a first short prompt, whose next prompt streams ``--steps`` steps (a paragraph and a tool call
pair each) at ``--rate`` steps a second (0: as fast as it can write), then a final
paragraph, and writes the wall time (``time.time()``) just after that last update to
a stamp file, then ends the turn. The page stamps, on its own wall clock
(``performance.timeOrigin + performance.now()``, checked once a frame): the final
paragraph in the turn's view, and the status line ("Done ...") after it. It records
every long animation frame (> 50 ms of script, style, layout and paint: the page frozen)
from the key press to the status line.

Figures per round: final text and status line after the last update (s), the longest
frame while it streamed, long frames and their sum, blocks on the page.

With ``--question-at N`` the agent asks a permission question at step N and waits for
the answer (issue 25's "question at step 900"): the page stamps when its Allow button is
clickable, measured from the key press, and the round clicks it. ``--python3`` is that
question's reference: a python3 kernel prints the same N paragraphs and calls
``input()``; the page stamps when the input box shows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

FINAL = "FINAL ANSWER after the long turn"

#: Installed in the page before the prompt runs: long frames, and a per-frame check
#: for the final paragraph and the status line in cell ``cellIndex``'s output.
OBSERVE_JS = """
(args) => {
  const [cellIndex, finalText, question] = args;
  const lt = window.__lt = {t0: performance.now(), long: [], final: 0, status: 0, blocks: 0, asked: 0};
  const obs = window.__ltObs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) lt.long.push([e.startTime, e.duration]);
  });
  obs.observe({type: 'long-animation-frame', buffered: false});
  // "from the key press": the cell's Shift+Enter (typing the cell came before it)
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && e.shiftKey) lt.t0 = performance.now();
  }, {capture: true});
  const cell = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[cellIndex];
  const wall = () => performance.timeOrigin + performance.now();
  const check = () => {
    const area = cell.querySelector('.jp-OutputArea');
    if (area) {
      if (!lt.shown && area.querySelector('.acp-turn, .jp-OutputArea-output')) lt.shown = performance.now();
      if (question && !lt.asked && area.querySelector(question)) lt.asked = performance.now();
      if (!lt.final) {
        const texts = area.querySelectorAll('.acp-text');
        const last = texts[texts.length - 1];
        if (last && last.textContent.includes(finalText)) lt.final = wall();
      }
      if (!lt.status) {
        // the live widget's status block, or the static output's <sub> that replaces it at the end
        const st = area.querySelector('.acp-status') || [...area.querySelectorAll('sub')].pop();
        if (st && /^Done\\b/.test(st.textContent)) {
          lt.status = wall(); lt.statusPerf = performance.now();
          if (!lt.final && area.textContent.includes(finalText)) lt.final = lt.status;
        }
      }
    }
    if (!(lt.final && lt.status) && !(question === '.jp-Stdin input' && lt.asked)) requestAnimationFrame(check);
    else lt.blocks = cell.querySelectorAll('.acp-block').length || cell.querySelectorAll('details, p').length;
  };
  requestAnimationFrame(check);
  return true;
}
"""

#: The page's figures, once the frame that showed the last of them has ended: its long frame
#: is reported when it ends, and an observer hears of it later still (read at once, the
#: end's frozen frame went uncounted).
READ_JS = """
async () => {
  await new Promise((done) => {  // two frames on, or half a second (a hidden page has no frames)
    requestAnimationFrame(() => requestAnimationFrame(done));
    setTimeout(done, 500);
  });
  const lt = window.__lt;
  for (const e of window.__ltObs.takeRecords()) lt.long.push([e.startTime, e.duration]);
  return lt;
}
"""


# -- the agent ------------------------------------------------------------------------------


def agent(args: argparse.Namespace) -> int:
    from synthetic_agent import SESSION_ID, Wire, _line, _update, tool_call_lines

    wire = Wire()
    while True:
        msg = wire.read()
        if msg is None:
            return 0
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None or rid is None:
            continue
        if method == "initialize":
            wire.send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": 1, "agentCapabilities": {"loadSession": False},
                "agentInfo": {"name": "long-turn-agent", "version": "1"}, "authMethods": []}})
        elif method == "session/new":
            wire.send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": SESSION_ID}})
        elif method == "session/prompt" and "warm up" in json.dumps(params.get("prompt")):
            wire.send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
        elif method == "session/prompt":
            sid = params.get("sessionId", SESSION_ID)
            calls = tool_call_lines(sid, args.steps)
            start = time.perf_counter()
            for i in range(args.steps):
                if args.rate:
                    delay = start + i / args.rate - time.perf_counter()
                    if delay > 0:
                        time.sleep(delay)
                if args.question_at and i == args.question_at:
                    wire.call("session/request_permission", {"sessionId": sid, "toolCall": {
                        "toolCallId": "ask", "title": "Delete build/", "kind": "delete",
                        "rawInput": {"command": "rm -rf build"}},
                        "options": [{"optionId": "yes", "name": "Allow once", "kind": "allow_once"},
                                    {"optionId": "no", "name": "Reject", "kind": "reject_once"}]})
                wire.write(_line(_update(sid, {"sessionUpdate": "agent_message_chunk", "content": {
                    "type": "text", "text": f"Step {i}: reading module {i % 97} to see what it does.\n\n"}}))
                    + calls[2 * i] + calls[2 * i + 1])
            wire.write(_line(_update(sid, {"sessionUpdate": "agent_message_chunk", "content": {
                "type": "text", "text": f"{FINAL} ({args.steps} steps).\n"}})))
            last = time.time()
            Path(args.stamp).write_text(repr(last))
            wire.send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
        else:
            wire.send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})


# -- the browser ----------------------------------------------------------------------------


def browser(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.browser import lab_rounds

    return lab_rounds("acp-long-turn-", args.rounds,
                      lambda lab, context, i, base: _round(lab, context, f"long{i}.ipynb", base / f"stamp{i}", args))


def _round(lab: Any, context: Any, name: str, stamp: Path, args: argparse.Namespace) -> dict[str, Any]:
    import shlex

    from playwright.sync_api import expect

    from tests.browser import conftest as bc

    if args.python3:
        return _python3_round(lab, context, name, args)
    lab.new_notebook(name, ["", "", ""])
    with _opened(lab, context, name, "acp") as (page, nb):
        command = shlex.join([sys.executable, os.path.abspath(__file__), "agent", "--steps", str(args.steps),
                              "--rate", str(args.rate), "--stamp", str(stamp),
                              "--question-at", str(args.question_at)])
        out = nb.run(0, f"%agent --command {command}")
        try:
            expect(out).to_contain_text("it starts with the next prompt", timeout=bc.TURN)
        except AssertionError:
            shown = " | ".join(out.all_inner_texts())[:300]
            if args.screenshot:
                page.screenshot(path=args.screenshot, full_page=False)
            raise AssertionError(f"the %agent cell showed: {shown!r}") from None
        # The agent process starts with the first prompt: a short one first, so the figures are the turn's.
        expect(nb.run(1, "warm up").locator("sub").last).to_have_text(re.compile(r"^Done\b"), timeout=bc.TURN)
        page.evaluate(OBSERVE_JS, [2, FINAL, ALLOW if args.question_at else ""])
        nb.run(2, "go")
        deadline = time.monotonic() + args.timeout
        asked = _answer(page, nb.output(2).locator(ALLOW), deadline) if args.question_at else {}
        while not page.evaluate("() => !!(window.__lt.final && window.__lt.status)"):
            if time.monotonic() > deadline:
                raise TimeoutError("the final text and status line never showed")
            time.sleep(0.1)
        last = float(stamp.read_text())
        lt = page.evaluate(READ_JS)
        longs = [(s, d) for s, d in lt["long"] if lt["t0"] <= s <= lt["statusPerf"]]
        if args.screenshot:
            page.screenshot(path=args.screenshot, full_page=False)
        return {
            "final_after_last_s": (lt["final"] / 1000) - last,
            "status_after_last_s": (lt["status"] / 1000) - last,
            "long_frames": len(longs),
            "longest_frame_s": max((d for _, d in longs), default=0.0) / 1000,
            "blocked_s": sum(d for _, d in longs) / 1000,
            "blocks_on_page": lt["blocks"],
            **asked,
        }


@contextlib.contextmanager
def _opened(lab: Any, context: Any, name: str, kernel: str) -> Iterator[tuple[Any, Any]]:
    """The notebook in a new page, its kernel ready; every session ended and the page
    closed after."""
    from playwright.sync_api import expect

    from benchmarks.browser import end_sessions
    from tests.browser import conftest as bc

    page = context.new_page()
    try:
        page.goto(lab.url(f"/lab/workspaces/{name.split('.')[0]}/tree/{name}"))
        nb = bc.Notebook(lab, page, name)
        # As the browser tests wait: the kernel's name in the toolbar, then idle (an idle indicator
        # alone can come before the session has its kernel, and a cell run then asks for one).
        expect(nb.panel.locator(".jp-KernelName")).to_have_text(bc.KERNELS[kernel][0], timeout=bc.START)
        expect(nb.panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=bc.START)
        yield page, nb
    finally:
        try:
            end_sessions(lab)
        finally:
            page.close()


#: The question's Allow button, once it can be clicked.
ALLOW = ".acp-permission button.acp-allow:not([disabled])"


def _answer(page: Any, button: Any, deadline: float) -> dict[str, Any]:
    """Wait for the question (the page stamps it), click it; the figures up to it."""
    while not page.evaluate("() => !!window.__lt.asked"):
        if time.monotonic() > deadline:
            raise TimeoutError("the question never became clickable")
        time.sleep(0.05)
    lt = page.evaluate(READ_JS)
    button.first.click()
    longs = [d for s, d in lt["long"] if lt["t0"] <= s <= lt["asked"]]
    return {"question_clickable_s": (lt["asked"] - lt["t0"]) / 1000, "first_output_s": (lt["shown"] - lt["t0"]) / 1000,
            "long_frames_to_question": len(longs),
            "longest_frame_to_question_s": max(longs, default=0.0) / 1000}


def _python3_round(lab: Any, context: Any, name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The reference: python3 prints the same paragraphs, then asks with ``input()``."""
    n = args.question_at or args.steps
    code = (f"for i in range({n}):\n    print(f'Step {{i}}: reading module {{i % 97}} to see what it does.\\n')\n"
            "answer = input('Delete build/? ')")
    lab.new_notebook(name, [code], kernel="python3")
    with _opened(lab, context, name, "python3") as (page, nb):
        page.evaluate(OBSERVE_JS, [0, FINAL, ".jp-Stdin input"])
        nb.cell(0).locator(".cm-content").click()  # the cell holds the code already
        page.keyboard.press("Shift+Enter")
        box = nb.output(0).locator(".jp-Stdin input")
        asked = _answer(page, box, time.monotonic() + args.timeout)
        box.fill("y")
        box.press("Enter")
        return asked


# -- the section ----------------------------------------------------------------------------


def long_turn_browser(ctx: Any) -> Any:
    """The benchmark section for ``benchmarks/run.py`` (``--only longturn-browser``)."""
    from benchmarks.run import Failed, Section, kernel_env, worker

    a = ctx.args
    steps = a.long_turn_steps
    sec = Section(f"A {steps:,}-step turn in JupyterLab (chromium): the agent's last update -> the end on screen",
                  ["round", "steps/s", "final text s", "status line s", "long frames", "longest s", "blocked s",
                   "blocks on page"])
    env = kernel_env(ctx)
    print(f"  [longturn-browser] {a.repeat} round(s) of each pace", file=sys.stderr)
    for r in range(a.repeat):
        for rate in (200, 0):
            try:
                b = worker(ctx, "browser", "--steps", str(steps), "--rate", str(rate), "--rounds", "1", timeout=900,
                           script=os.path.abspath(__file__), env=env, cwd=os.path.join(ctx.tmp, "work"))["rounds"][0]
                sec.rows.append([str(r + 1), str(rate) if rate else "unpaced", f"{b['final_after_last_s']:.2f}",
                                 f"{b['status_after_last_s']:.2f}", str(b["long_frames"]),
                                 f"{b['longest_frame_s']:.2f}", f"{b['blocked_s']:.2f}", str(b["blocks_on_page"])])
            except (Failed, OSError, ValueError, KeyError) as exc:
                sec.notes.append(f"round {r + 1} at {rate or 'unpaced'} failed: {exc}")
    sec.notes.append("each step is a paragraph and a tool call pair (synthetic_agent's lines); final text / status "
                     "line = when the page first showed the last paragraph / the 'Done' status line (checked once a "
                     "frame, page wall clock) minus the agent's wall time just after writing its last update; long "
                     "frames = long animation frames (> 50 ms) from the key press to the status line")
    return [sec, _question_section(ctx, env)]


def _question_section(ctx: Any, env: dict[str, str]) -> Any:
    """Issue 25's row: how soon a question deep in a long turn can be answered, beside
    python3 printing the same paragraphs and asking with ``input()``."""
    from benchmarks.run import Failed, Section, worker

    a = ctx.args
    at = a.long_turn_steps * 9 // 10
    sec = Section(f"A question at step {at:,} of a {a.long_turn_steps:,}-step turn in JupyterLab: key press -> "
                  "clickable", ["round", "cell", "clickable after s", "long frames before it", "longest s"])
    for r in range(a.repeat):
        for label, extra in ((f"acp kernel, agent unpaced, question at step {at:,}", []),
                             (f"python3: {at:,} print()s, then input()", ["--python3"])):
            try:
                b = worker(ctx, "browser", "--steps", str(a.long_turn_steps), "--rate", "0", "--question-at", str(at),
                           "--rounds", "1", *extra, timeout=900, script=os.path.abspath(__file__), env=env,
                           cwd=os.path.join(ctx.tmp, "work"))["rounds"][0]
                sec.rows.append([str(r + 1), label, f"{b['question_clickable_s']:.2f}",
                                 str(b["long_frames_to_question"]), f"{b['longest_frame_to_question_s']:.2f}"])
            except (Failed, OSError, ValueError, KeyError) as exc:
                sec.notes.append(f"round {r + 1} ({label}) failed: {exc}")
    sec.notes.append("clickable = the page's first frame with the question's enabled Allow button (python3: the "
                     "input box) minus the cell's Shift+Enter, both on the page's clock; long frames = long animation "
                     "frames (> 50 ms) between the two; goal (issue 25): within 2x python3, no frame over 100 ms")
    return sec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="long_turn_browser.py")
    p.add_argument("mode", choices=["agent", "browser"])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--rate", type=float, default=200.0, help="steps per second (0: unpaced)")
    p.add_argument("--stamp", help="agent: the file for the wall time after the last update")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--screenshot", help="save a screenshot of the page at the end here")
    p.add_argument("--question-at", type=int, default=0, help="the agent asks a question at this step (0: never)")
    p.add_argument("--python3", action="store_true", help="the reference: python3 prints, then input()")
    args = p.parse_args(argv)
    if args.mode == "agent":
        return agent(args)
    from benchmarks.browser import run_and_print

    return run_and_print("long turn in the browser", lambda: browser(args))


if __name__ == "__main__":
    sys.exit(main())
