"""The magics as a notebook user writes them: loaded and used in one cell,
inside loops and functions, from Python code, and in terminal IPython."""

from __future__ import annotations

import os
import subprocess
import sys

import asyncio

from tests.magics.conftest import agent_pids, button_clicker

DEMO = "acp_kernel.demo.agent"


async def test_load_ext_and_connect_in_the_same_cell(ipython):
    res = await ipython.ok("%load_ext acp_kernel\n%acp connect demo\nx = 1")
    assert "Connected **demo**" in res.text()
    assert await ipython.value("x") == "1"
    turn = await ipython.ok("%%acp\nhello")
    assert "demo agent" in turn.text()
    # The connection lives on the runtime's own loop (the kernel's was busy):
    # a widget click and an interrupt still reach the turn.
    clicked, on_output = button_clicker(ipython, "Allow once")
    granted = await ipython.ok("%%acp\npermission", on_output=on_output, timeout=30)
    assert clicked.done() and "Permission granted" in granted.text()
    started = asyncio.get_running_loop().create_future()

    async def on_slow(msg):
        if not started.done() and msg["msg_type"] in ("display_data", "update_display_data"):
            started.set_result(None)

    slow = asyncio.ensure_future(ipython.execute("%%acp\nslow", on_output=on_slow))
    await asyncio.wait_for(started, 20)
    await ipython.km.interrupt_kernel()
    res = await asyncio.wait_for(slow, 10)
    assert res.status == "ok" and await ipython.value("_acp.stop_reason") == "'cancelled'"
    # Sync %acp works inside a plain def too, since the connections do not need the kernel's loop.
    shown = await ipython.ok("def show():\n    %acp status\nshow()")
    assert "- **demo** (default):" in shown.text()
    # A failed connect in such a cell fails the cell, with one line.
    bad = await ipython.execute("%reload_ext acp_kernel\n%acp connect nosuchagent")
    assert bad.status == "error" and "unknown agent 'nosuchagent'" in bad.error_line()


async def test_a_failed_connect_in_the_loading_cell_fails_it(ipython):
    res = await ipython.execute("%load_ext acp_kernel\n%acp connect --command /no/such/agent-binary")
    assert res.status == "error" and "not found" in res.error_line()
    assert "Cannot start" in res.text()


async def test_acp_in_a_loop_and_in_async_functions(magics):
    await magics.ok("for name in ['a', 'b']:\n    %acp connect demo --as {name}")
    status = (await magics.ok("%acp status")).text()
    assert "**a**:" in status and "**b** (default):" in status
    assert len(agent_pids(magics.descendants(), DEMO)) == 2
    await magics.ok("async def switch(alias, mode):\n    %acp mode $mode --as {alias}\nawait switch('a', 'plan')")
    status = (await magics.ok("%acp status")).text()
    a_part, b_part = status.split("- **b**")
    assert "- mode: `plan`" in a_part and "- mode: `code`" in b_part


async def test_the_python_api_in_a_function(ipython):
    code = (
        "import acp_kernel\n"
        "async def ask(question):\n"
        "    agent = await acp_kernel.connect('demo')\n"
        "    try:\n"
        "        turns = [await agent.prompt(f'echo {question} {i}') for i in range(2)]\n"
        "        return [t.text for t in turns], [c.id for c in agent.modes()], agent.session.id\n"
        "    finally:\n"
        "        await agent.close()\n"
        "result = await ask('hi')"
    )
    res = await ipython.ok(code)
    shown = [m for m in res.outputs if m["msg_type"] in ("display_data", "update_display_data")]
    assert shown and "hi 1" in res.text()  # the turns render in the cell, as %%acp does
    assert await ipython.value("result[0], result[1]") == repr((["hi 0\n", "hi 1\n"], ["code", "ask", "plan"]))
    assert not agent_pids(ipython.descendants(), DEMO)  # closed


def test_terminal_ipython_prints_text_not_object_reprs(tmp_path, kernel_env):
    script = "%load_ext acp_kernel\n%acp connect demo\n%acp mode\nexit\n"
    env = {**kernel_env, "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "IPython", "--simple-prompt", "--no-banner", "--colors=NoColor"],
                          input=script, capture_output=True, text=True, timeout=120, env=env, cwd=str(tmp_path))
    out = done.stdout
    # Text, not the markdown source: no ** or backticks, no \-escapes.
    assert "Connected demo: acp-kernel demo agent" in out and "\n- code Code — " in out, (out, done.stderr)
    assert "**" not in out and "`" not in out and "\\" not in out
    assert "IPython.core.display" not in out and "object at 0x" not in out
    assert os.path.isdir(tmp_path)


async def test_a_prompt_the_agent_cannot_take_is_refused_before_a_turn(ipython):
    """The demo agent takes no images: the API raises ContentRefused (one
    line, nothing sent), and the agent still answers the next prompt."""
    code = (
        "import acp_kernel\n"
        "from acp_kernel.client.content import ContentRefused\n"
        "agent = await acp_kernel.connect('demo')\n"
        "try:\n"
        "    await agent.prompt([{'type': 'image', 'data': 'iVBORw0KGgo=', 'mimeType': 'image/png'}])\n"
        "except ContentRefused as exc:\n"
        "    refused = str(exc)\n"
        "after = (await agent.prompt('echo still here')).text\n"
        "modes = [(c.id, c.current) for c in agent.modes()]\n"
        "chosen = (await agent.set_mode('Plan')).id\n"
        "await agent.close()"
    )
    await ipython.ok(code)
    refused = eval(await ipython.value("refused"))
    assert "image" in refused and "\n" not in refused
    assert await ipython.value("after") == repr("still here\n")
    assert await ipython.value("modes[0], chosen") == repr((("code", True), "plan"))
