"""``%%shell`` output floods: ``seq 1 200000`` through the acp kernel, then in a browser.

Two measurements, each in a fresh process (``python benchmarks/shell_flood.py MODE``
prints one JSON object on its last stdout line, like ``workers.py``):

- ``kernel``: a real ``acp`` kernel through jupyter_client (``kernel_workers.Kernel``,
  this process its frontend over zmq): execute -> execute_reply and -> idle, iopub
  messages and bytes (all frames), stream messages and the characters they carry.
- ``browser``: JupyterLab on 127.0.0.1 (started as ``tests/browser/conftest.py`` does:
  temp root, private kernelspec prefix, temp state) and Debian's chromium through
  Playwright. The cell is typed and run; the page records, from the key press: every
  long animation frame (``PerformanceObserver('long-animation-frame')``: a frame that
  took > 50 ms of script, style, layout and paint, i.e. the page frozen; headless
  chromium reports no ``longtask`` entries), the last DOM change of the cell's output area, and when the cell's
  prompt shows its execution count. *Settled* = the later of the last output change and
  the end of the last long task, once the output area has been still for
  ``--quiet`` seconds after the kernel went idle. Then the output's rendered lines and
  characters are counted in the DOM.

The section (``shell_flood(ctx)``) runs both, ``--repeat`` rounds each, interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

#: Installed in the page before the cell runs: long tasks and output mutations, stamped
#: on performance.now(); the key press time is set by the runner (``__sf.t0``).
OBSERVE_JS = """
(cellIndex) => {
  const sf = window.__sf = {t0: 0, long: [], lastMutation: 0, mutations: 0};
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) sf.long.push([e.startTime, e.duration]);
  }).observe({type: 'long-animation-frame', buffered: false});
  const cell = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[cellIndex];
  const area = cell.querySelector('.jp-Cell-outputWrapper') || cell;
  new MutationObserver(() => { sf.lastMutation = performance.now(); sf.mutations++; })
    .observe(area, {childList: true, subtree: true, characterData: true});
  return true;
}
"""

#: What the output area holds: rendered lines and characters of its text outputs.
COUNT_JS = """
(cellIndex) => {
  const cell = document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[cellIndex];
  const outs = [...cell.querySelectorAll('.jp-OutputArea-output')];
  let lines = 0, chars = 0;
  for (const o of outs) { const t = o.innerText || ''; chars += t.length; lines += t ? t.split('\\n').length : 0; }
  return {outputs: outs.length, lines, chars, nodes: cell.querySelectorAll('*').length};
}
"""


def _emit(result: dict) -> None:
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


# -- kernel --------------------------------------------------------------------------------


def kernel(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.kernel_workers import Kernel

    tmp = None
    if not os.environ.get("JUPYTER_PATH"):  # run alone: a private kernelspec and temp state
        from acp_kernel.frontends.install import install

        tmp = tempfile.mkdtemp(prefix="acp-shell-flood-")
        install(prefix=tmp)
        os.environ.update({"JUPYTER_PATH": os.path.join(tmp, "share", "jupyter"),
                           "ACP_KERNEL_STATE": os.path.join(tmp, "sessions.json"),
                           "ACP_KERNEL_CONFIG": os.path.join(tmp, "acp_kernel.json")})
    k = Kernel("acp", cwd=tempfile.gettempdir())
    try:
        k.ready()
        k.execute("%%shell\ntrue", timeout=args.timeout)  # warm: the shell module imported
        rounds = []
        for _ in range(args.rounds):
            cell = k.execute(args.cell, timeout=args.timeout)
            if cell.status != "ok":
                raise RuntimeError(f"cell failed: {cell.reply.get('ename')}: {cell.reply.get('evalue')}")
            s = cell.summary()
            streams = [m for m in cell.msgs if m.msg_type == "stream"]
            s["stream_msgs"] = len(streams)
            s["stream_bytes"] = sum(m.nbytes for m in streams)
            rounds.append(s)
        return {"rounds": rounds}
    finally:
        k.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


# -- browser -------------------------------------------------------------------------------


def browser(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.browser import lab_rounds

    return lab_rounds("acp-shell-flood-", args.rounds, lambda lab, context, i, base: _browser_round(lab, context, f"flood{i}.ipynb", args))


def _browser_round(lab: Any, context: Any, name: str, args: argparse.Namespace) -> dict[str, Any]:
    from playwright.sync_api import expect

    from benchmarks.browser import end_sessions
    from tests.browser import conftest as bc

    lab.new_notebook(name)
    page = context.new_page()
    try:
        page.goto(lab.url(f"/lab/workspaces/{name.split('.')[0]}/tree/{name}"))
        nb = bc.Notebook(lab, page, name)
        expect(nb.panel.locator(".jp-KernelName")).to_have_text("ACP Agent", timeout=bc.START)
        idle = nb.panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")
        expect(idle).to_have_count(1, timeout=bc.START)
        editor = nb.cell(0).locator(".cm-content")
        editor.click()
        page.keyboard.insert_text(args.cell)
        expect(editor).to_have_text(args.cell.replace("\n", ""), use_inner_text=False)
        page.evaluate(OBSERVE_JS, 0)
        page.evaluate("() => { window.__sf.t0 = performance.now(); }")
        t_wall = time.perf_counter()
        page.keyboard.press("Shift+Enter")
        # Done: the prompt shows an execution count (JupyterLab shows [*] while it runs).
        prompt = nb.cell(0).locator(".jp-InputPrompt")
        expect(prompt).to_have_text("[1]:", timeout=args.timeout * 1000)
        done_wall = time.perf_counter() - t_wall
        # Settled: the output area still for --quiet seconds (polled; bounded by --timeout).
        deadline = time.monotonic() + args.timeout
        while True:
            state = page.evaluate("() => [performance.now(), window.__sf.lastMutation, window.__sf.long.map(l => l[0] + l[1])]")
            now, last_mut, long_ends = state
            last = max([last_mut, *long_ends])
            if now - last >= args.quiet * 1000:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the output never settled")
            time.sleep(0.1)
        sf = page.evaluate("() => window.__sf")
        counts = page.evaluate(COUNT_JS, 0)
        t0 = sf["t0"]
        longs = [d for s, d in sf["long"] if s >= t0]
        settled = (max([sf["lastMutation"], *[s + d for s, d in sf["long"]]]) - t0) / 1000
        if args.screenshot:
            page.screenshot(path=args.screenshot, full_page=False)
        return {
            "settled_s": settled,
            "done_wall_s": done_wall,
            "long_tasks": len(longs),
            "longest_task_s": max(longs, default=0.0) / 1000,
            "blocked_s": sum(longs) / 1000,
            "mutations": sf["mutations"],
            **counts,
        }
    finally:
        try:
            end_sessions(lab)
        finally:
            page.close()


# -- the section ---------------------------------------------------------------------------


def shell_flood(ctx: Any) -> list[Any]:
    """The benchmark section for ``benchmarks/run.py`` (``--only shell-flood``)."""
    from benchmarks.run import Failed, Section, kernel_env, worker

    a = ctx.args
    lines = getattr(a, "shell_lines", None) or (20_000 if a.quick else 200_000)
    cell = f"%%shell\nseq 1 {lines}"
    rounds = a.repeat
    ksec = Section(f"`%%shell seq 1 {lines:,}` through the acp kernel (jupyter_client)",
                   ["round", "execute -> reply s", "-> idle s", "iopub msgs", "iopub bytes",
                    "stream msgs", "stream bytes", "display + update msgs"])
    bsec = Section(f"`%%shell seq 1 {lines:,}` in JupyterLab (chromium): key press -> settled page",
                   ["round", "settled s", "prompt done s", "long frames", "longest s", "blocked s",
                    "outputs", "lines rendered", "chars rendered", "DOM nodes"])
    env = kernel_env(ctx)
    work = os.path.join(ctx.tmp, "work")
    print(f"  [shell-flood] kernel and browser, {rounds} round(s) each", file=sys.stderr)
    for r in range(rounds):
        try:
            k = worker(ctx, "kernel", "--cell", cell, "--rounds", "1", timeout=600,
                       script=os.path.abspath(__file__), env=env, cwd=work)["rounds"][0]
            ksec.rows.append([str(r + 1), f"{k['seconds']:.2f}", f"{k['idle_seconds']:.2f}", f"{k['iopub_msgs']:,}",
                              f"{k['iopub_bytes']:,}", f"{k['stream_msgs']:,}", f"{k['stream_bytes']:,}",
                              f"{k['display_msgs']:,}"])
        except (Failed, OSError, ValueError, KeyError) as exc:
            ksec.notes.append(f"round {r + 1} failed: {exc}")
        try:
            b = worker(ctx, "browser", "--cell", cell, "--rounds", "1", timeout=900,
                       script=os.path.abspath(__file__), env=env, cwd=work)["rounds"][0]
            bsec.rows.append([str(r + 1), f"{b['settled_s']:.2f}", f"{b['done_wall_s']:.2f}", str(b["long_tasks"]),
                              f"{b['longest_task_s']:.2f}", f"{b['blocked_s']:.2f}", str(b["outputs"]),
                              f"{b['lines']:,}", f"{b['chars']:,}", f"{b['nodes']:,}"])
        except (Failed, OSError, ValueError, KeyError) as exc:
            bsec.notes.append(f"round {r + 1} failed: {exc}")
    bsec.notes.append("settled = the later of the output area's last DOM change and the end of the last long "
                      "animation frame (> 50 ms of script, style, layout and paint), from the key press; longest = the page's longest freeze; "
                      "blocked = all long frames added up; lines/chars = innerText of the cell's outputs")
    return [ksec, bsec]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="shell_flood.py")
    p.add_argument("mode", choices=["kernel", "browser"])
    p.add_argument("--cell", default="%%shell\nseq 1 200000")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--quiet", type=float, default=1.5, help="seconds of a still output area that count as settled")
    p.add_argument("--screenshot", help="save a screenshot of the settled page here")
    args = p.parse_args(argv)
    _emit(kernel(args) if args.mode == "kernel" else browser(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
