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
