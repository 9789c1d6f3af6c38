"""Issue 23: a prompt typed into a passthrough CLI is never lost, merged or
answered in the wrong cell. Each stand-in reproduces what a real CLI did
(tests/passthrough/standin.py), driven through the ACP kernel over
jupyter_client as a notebook's Run All sends cells (all queued at once):

- ``notice``: the input box shows while the CLI is still starting, and an
  Enter then is ignored (Claude Code 2.1.83 beside its offline notice);
- ``vanish``: the same, and the notice empties the input box (newer Claude Code);
- ``notice-u``: the Enter ignored, and a Ctrl-U meanwhile types "u" (Claude Code
  2.1.83: a retry's clear key left "alpha oneualpha one" to submit);
- ``lag``: input read late, so the paste and the Enter arrive in one read and
  the Enter is a newline (Gemini CLI on a loaded machine);
- ``late``: the echo, then nothing for a while before the reply (kimi and
  opencode on a loaded machine: the cell ended before the model request);
- ``restore``: a cancel puts the cancelled two-line prompt back into the
  input, and Ctrl-U clears one line only (Claude Code).

And the first cells of a Run All while two busy loops hold the CPUs.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..kernel.conftest import running_kernel
from .standins import config_entry, events, prompts, wait_event
from .test_kernel_runall import Notebook

pytestmark = pytest.mark.slow
#: The last one is hostile: markup, math delimiters and a code span the reply quotes back.
PROMPTS = ["alpha one", "bravo two", "charlie <img src=x onerror=alert(1)> $x$ \\( \\[ \\begin{x} `a b`"]



@pytest.fixture
async def notebook(kernel_env, tmp_path):
    log = tmp_path / "standin.jsonl"
    agents = {name: config_entry(name, log)
              for name in ("notice", "vanish", "notice-u", "lag", "late", "restore", "claude-like")}
    (tmp_path / "acp_kernel.json").write_text(json.dumps({"agents": agents}))
    async with running_kernel(kernel_env, tmp_path / "work") as (km, kc):
        nb = Notebook(km, kc)
        nb.log = log
        yield nb


async def run_all(nb: Notebook, name: str) -> list[str]:
    """``%passthrough NAME`` and the prompt cells, sent at once; each cell ends ok with its own reply
    (a later cell shows the terminal's earlier exchanges too: only "in its own cell" is checked)."""
    start = nb.send(f"%passthrough {name}")
    cells = [nb.send(p) for p in PROMPTS]
    assert (await nb.wait(start))["status"] == "ok", nb.text(start)
    statuses = [(await nb.wait(cell, timeout=120))["status"] for cell in cells]
    for i, (p, cell) in enumerate(zip(PROMPTS, cells)):
        said = nb.text(cell)
        assert statuses[i] == "ok", said
        assert f"stand-in reply to: {p} (1 line)" in said, said
        html = "".join(str(c.get("data", {}).get("text/html", "")) for c in nb.outputs[cell])
        assert "<img src=x" not in html
    return cells


@pytest.mark.parametrize("name", ["notice", "vanish", "notice-u", "lag", "late"])
async def test_run_all_loses_no_prompt(notebook, name):
    nb = notebook
    await run_all(nb, name)
    assert prompts(nb.log) == PROMPTS  # each typed once, whole, in order


async def test_after_an_interrupt_the_cancelled_prompt_is_cleared_before_the_next(notebook):
    nb = notebook
    start = nb.send("%passthrough restore")
    assert (await nb.wait(start))["status"] == "ok", nb.text(start)
    slow = nb.send("SLOW first line\nsecond line")
    await wait_event(nb.log, lambda e: e.get("text") == "slow chunk 2", timeout=60)
    await nb.km.interrupt_kernel()
    assert (await nb.wait(slow))["status"] == "ok"
    assert [e["event"] for e in events(nb.log)].count("cancel") == 1
    after = nb.send("after the interrupt")
    assert (await nb.wait(after))["status"] == "ok", nb.text(after)
    assert prompts(nb.log) == ["SLOW first line\nsecond line", "after the interrupt"]
    assert "stand-in reply to: after the interrupt (1 line)" in nb.text(after)


async def test_first_cells_under_cpu_load(notebook):
    """Two busy loops (one per core of the CI machine) for the whole Run All."""
    nb = notebook
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        await run_all(nb, "claude-like")
        assert prompts(nb.log) == PROMPTS
    finally:
        for proc in loops:
            proc.kill()
            proc.wait(timeout=10)
