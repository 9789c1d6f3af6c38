"""``%acp passthrough`` in a real IPython kernel: the demo CLI under a PTY, ``%%acp``
cells typed into it, the reply as a Python object, interrupt as Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from acp_kernel.protocol import proctree
from tests.kernel.terminal_frontend import TerminalFrontend

from .conftest import agent_pids, wait_until

pytestmark = pytest.mark.slow
PY = os.path.basename(sys.executable)


async def test_cells_are_typed_into_the_cli_and_the_reply_is_a_value(magics):
    front = TerminalFrontend(magics.kc)
    res = await magics.ok("%acp passthrough demo", on_output=front.feed)
    assert front.comm_id and front.state["title"].endswith(f"{PY} -m acp_kernel.demo.cli")
    await magics.ok("x = 2")
    res = await magics.ok("%%acp\nhello {x}", on_output=front.feed)
    assert res.outputs[-1]["content"]["data"]["text/plain"].startswith("<Reply idle")
    assert "You said: hello 2" in front.text()  # interpolated like any %%acp cell
    assert await magics.value("_acp.outcome, 'You said: hello 2' in _acp.text") == "('idle', True)"
    res = await magics.execute("%%acp --attach x\nhello")
    assert res.status == "error" and "a passthrough terminal takes text only" in res.error_line()
    status = await magics.ok("%acp status")
    assert "**demo-cli** (default): terminal" in status.text()

    pids = agent_pids(magics.descendants(), "acp_kernel.demo.cli")
    assert len(pids) == 1
    await magics.ok("%acp disconnect demo-cli")
    await wait_until(lambda: not any(proctree.alive(p) for p in pids))


async def test_interrupt_is_ctrl_c_and_exit_kills_nothing_twice(magics):
    front = TerminalFrontend(magics.kc)
    await magics.ok("%acp passthrough demo --as cli", on_output=front.feed)
    task = await front.run_until_shown(magics, "%%acp cli\n/slow 400", "line 2 of 400")
    await magics.km.interrupt_kernel()
    res = await asyncio.wait_for(task, 15)
    assert res.status == "ok", res.text()
    assert "Interrupted: Ctrl-C sent to `cli`" in res.text()
    assert await magics.value("_acp.outcome") == "'interrupted'"
    pids = agent_pids(magics.descendants(), "acp_kernel.demo.cli")
    res = await magics.execute("%%acp\n/exitcode 0", on_output=front.feed)
    assert "`cli` exited with status 0" in res.text()
    await wait_until(lambda: not any(proctree.alive(p) for p in pids))


# -- the stand-in CLIs (tests/passthrough), Run-All style ------------------------------------

STANDINS = ["ink", "silent", "dialog", "think", "quit"]


@pytest.mark.parametrize("name", STANDINS)
async def test_standin_run_all_interrupt_and_disconnect(ipython, tmp_path, name):
    import json

    from tests.passthrough.standins import config_entry, events, prompts, wait_event
    from tests.passthrough.test_kernel_runall import Notebook

    log = tmp_path / "standin.jsonl"
    (tmp_path / "acp_kernel.json").write_text(json.dumps({"agents": {name: config_entry(name, log)}}))
    await ipython.ok("%load_ext acp_kernel")
    nb = Notebook(ipython.km, ipython.kc)
    texts = ["alpha one", "bravo two", "charlie three", "delta first\ndelta second"]
    cells = [nb.send(f"%acp passthrough {name}")] + [nb.send(f"%%acp\n{t}\n") for t in texts]
    cells.append(nb.send("print(repr((_acp.outcome, _acp.text)))"))
    for cell in cells:
        assert (await nb.wait(cell))["status"] == "ok", nb.text(cell)
    assert prompts(log) == texts  # queued before the CLI was ready: in order, one message each
    assert nb.text(cells[-1]).strip() == repr(("idle", "stand-in reply to: delta first (2 lines)"))

    slow = nb.send("%%acp\nSLOW please")
    await wait_event(log, lambda e: e.get("text") == "slow chunk 2")
    await ipython.km.interrupt_kernel()
    assert (await nb.wait(slow))["status"] == "ok"
    assert f"Interrupted: Esc sent to {name}-cli." in nb.text(slow)
    assert [e["event"] for e in events(log)].count("cancel") == 1
    after = nb.send("%%acp\nafter\n")
    check = nb.send("print(repr(_acp.text))")
    await nb.wait(after)
    await nb.wait(check)
    assert nb.text(check).strip() == repr("stand-in reply to: after (1 line)")
    pids = agent_pids(ipython.descendants(), "standin.py")
    assert len(pids) == 1
    await ipython.ok(f"%acp disconnect {name}-cli")
    await wait_until(lambda: not any(proctree.alive(p) for p in pids))
