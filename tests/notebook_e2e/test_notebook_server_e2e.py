"""The ``notebook`` MCP server end to end: the demo agent (a real MCP client,
started by the kernel as a real process) gets the server in ``mcpServers``,
starts it, and calls its tools, through the magics in a stock python3 kernel
and through the ACP kernel."""

from __future__ import annotations

import asyncio
import json

from acp_kernel.protocol import proctree
from tests.kernel.conftest import wait_until
from tests.magics.conftest import button_clicker, cmdline

SERVER = "acp_kernel.notebook_mcp"
#: The server's own question about an execute, as the turn's fallback text shows it.
OUR_QUESTION = "Permission requested:** 💻 Run Python in this notebook"


def servers(harness) -> set[int]:
    """The notebook MCP server processes under the kernel (the agent starts them)."""
    return {p for p in harness.descendants() if SERVER in cmdline(p)}


def tool_text(res) -> str:
    """Everything the cell showed, widget state included (the turn is one widget)."""
    parts = [res.text()]
    for msg in res.outputs + res.stray_comms:
        if msg["msg_type"] in ("comm_open", "comm_msg"):
            parts.append(json.dumps(msg["content"].get("data", {})))
    return "\n".join(parts)


async def test_execute_sets_a_variable_the_next_cell_sees_and_the_run_shows_in_the_turn(magics):
    await magics.ok("%acp connect demo --permissions allow-all")
    status = (await magics.ok("%acp status")).text()
    # The demo agent starts the server when a prompt first needs it: offered, not started.
    offered = ("execute, variables, cells, insert&#95;cell, edit&#95;cell, delete&#95;cell, "
               "run&#95;cell")  # (markdown: _ as references)
    assert f"notebook MCP server: {offered} offered; the agent has not started it" in status, status
    res = await magics.ok("%%acp\nnotebook run x = 41 + 1\nprint('<img src=x onerror=alert(1)>')", timeout=60)
    status = (await magics.ok("%acp status")).text()
    assert f"notebook MCP server: {offered} (the agent started it)" in status, status
    shown = tool_text(res)
    assert "Run Python in this notebook" in shown, shown[-3000:]
    assert await magics.value("x") == "42"
    assert await magics.value("_acp.stop_reason") == "'end_turn'"
    # The print went to the tool call (and the agent), not into the cell as a stream.
    assert not [m for m in res.outputs if m["msg_type"] == "stream" and "onerror" in m["content"]["text"]]
    assert "<img src=x onerror=alert(1)>" in await magics.value("_acp.text + str([c.output for c in _acp.tool_calls.values()])")
    # The agent sees the variable through `variables`, and a second execute sees it too.
    res = await magics.ok("%%acp\nnotebook vars x", timeout=60)
    assert "42" in await magics.value("str([c.text for c in _acp.tool_calls.values()])")
    await magics.ok("%%acp\nnotebook run y = x * 2", timeout=60)
    assert await magics.value("y") == "84"


async def test_execute_asks_and_a_refusal_is_respected(magics):
    await magics.ok("%acp connect demo --permissions ask")
    clicked, on_output = button_clicker(magics, "Reject")
    res = await magics.ok("%%acp\nnotebook run refused = 1", on_output=on_output, timeout=60)
    assert clicked.done(), tool_text(res)[-3000:]
    assert OUR_QUESTION in tool_text(res)
    assert await magics.value("'refused' in globals()") == "False"
    assert "refused" in (await magics.value("_acp.text")).lower()
    # Allowed once: it runs.
    clicked, on_output = button_clicker(magics, "Allow once")
    await magics.ok("%%acp\nnotebook run allowed = 1", on_output=on_output, timeout=60)
    assert clicked.done()
    assert await magics.value("allowed") == "1"
    # Headless (nbclient: no stdin): refused with a note, nothing hangs.
    res = await magics.ok("%%acp\nnotebook run headless = 1", allow_stdin=False, timeout=60)
    assert await magics.value("'headless' in globals()") == "False"
    assert "nobody can answer" in tool_text(res)


async def test_interrupt_stops_a_running_execute_and_the_turn(magics):
    await magics.ok("%acp connect demo --permissions allow-all")
    started = asyncio.get_running_loop().create_future()

    async def on_output(msg):
        # Interrupt once the run's output is on the page while the code still runs
        # (the kernel's loop is busy with it: the view flushes from the writes).
        if "tick 3" in json.dumps(msg["content"]) and not started.done():
            started.set_result(None)
            await magics.km.interrupt_kernel()

    res = await magics.execute(
        "%%acp\nnotebook run import time\nfor i in range(600): print('tick', i, flush=True); time.sleep(0.1)",
        on_output=on_output, timeout=60)
    assert started.done()
    assert await magics.value("_acp.stop_reason") == "'cancelled'", tool_text(res)[-2000:]
    assert await magics.value("'i' in globals() and i < 500") == "True"
    # The kernel and the agent go on.
    await magics.ok("%%acp\nnotebook run after = 'yes'", timeout=60)
    assert await magics.value("after") == "'yes'"


async def test_the_server_is_gone_after_the_session_ends(magics):
    await magics.ok("%acp connect demo --permissions allow-all")
    await magics.ok("%%acp\nnotebook vars", timeout=60)
    assert servers(magics), "the agent did not start the notebook server"
    await magics.ok("%acp new")  # a new session: the agent's server for the old one goes
    await magics.ok("%%acp\nnotebook cells", timeout=60)
    await magics.ok("%acp disconnect")
    await wait_until(lambda: not servers(magics), timeout=20)


async def test_no_mcp_means_no_server_offered(magics):
    await magics.ok("%acp connect demo --no-mcp")
    assert "notebook MCP server: off" in (await magics.ok("%acp status")).text()
    await magics.ok("%%acp\nnotebook run nope = 1", timeout=60)
    assert await magics.value("'nope' in globals()") == "False"
    assert "notebook" in (await magics.value("_acp.text")).lower()
    assert not servers(magics)


async def test_acp_kernel_offers_the_document_tools_only(acp_kernel):
    acp_kernel_h = acp_kernel
    await acp_kernel_h.execute("hello <b>bold</b> `code\nspan` /tmp/a\nb.txt", timeout=60)
    res = await acp_kernel_h.execute("notebook cells", timeout=60)
    shown = tool_text(res)
    assert "hello <b>bold</b>" in shown or "hello \\u003cb\\u003ebold" in shown or "hello &lt;b&gt;" in shown, shown[-3000:]
    assert "sources of the cells run in this kernel" in shown
    res = await acp_kernel_h.execute("notebook run x = 1", timeout=60)
    assert ("does not offer `execute` here; it offers `cells`, `insert_cell`, `edit_cell`, `delete_cell`"
            in res.text()), res.text()[-2000:]
    assert "only cells, insert_cell, edit_cell, delete_cell are offered" in res.text()
    # The session ends with the agent (a restart): its server goes with it.
    started = {p for p in proctree.tree(acp_kernel_h.km.provisioner.pid) if SERVER in cmdline(p)}
    assert started, "the agent did not start the notebook server"
    assert (await acp_kernel_h.execute("%restart", timeout=60)).status == "ok"
    await wait_until(lambda: not any(proctree.alive(p) for p in started), timeout=20)


HOSTILE_CODE = (
    "# `a\n# b` <img src=x onerror=alert(1)> [x](javascript:alert(3))\n"
    "print('<script>alert(2)</script> ```')\n"
    "print('/tmp/evil\\n# heading\\n<img src=x onerror=alert(6)>.py')\n"
    "'<details open ontoggle=alert(4)>'\n"
)


async def test_hostile_code_and_output_stay_text_in_the_question_and_the_run(magics):
    """The code (the agent's) is shown in the permission question and the run's
    tool call; its output (anything the code printed) streams there too: every
    markdown the cell shows is inert under a CommonMark parser with raw HTML on."""
    from tests.hostile.test_kernel_outputs import assert_inert

    await magics.ok("%acp connect demo --permissions ask")
    clicked, on_output = button_clicker(magics, "Allow once")
    res = await magics.ok("%%acp --no-interpolate\nnotebook run\n````python\n" + HOSTILE_CODE + "````", on_output=on_output,
                          timeout=60)
    assert clicked.done(), tool_text(res)[-3000:]
    assert_inert(res)
    shown = tool_text(res)
    assert "onerror=alert(6)" in shown and "ontoggle=alert(4)" in shown  # shown as text, not dropped
    outputs = await magics.value("[c.output for c in _acp.tool_calls.values() if c.kind == 'execute']")
    assert "/tmp/evil\\n# heading" in outputs


async def test_one_question_when_the_agent_asks_for_its_own_execute(magics):
    """Real agents (Gemini CLI, Claude Code, Codex, Kimi) ask for every MCP tool
    call themselves; the person's allow of that question (rawInput holds the
    code) answers the server's own question about the same code: one click."""
    await magics.ok("%acp connect demo --permissions ask")
    clicked, on_output = button_clicker(magics, "Allow once")  # answers the first question only
    res = await magics.ok("%%acp\nnotebook ask run z = 7", on_output=on_output, timeout=60)
    assert clicked.done()
    assert await magics.value("z") == "7", tool_text(res)[-3000:]
    assert OUR_QUESTION not in tool_text(res)
    # The allow was for that code, once: other code asks again (and a refusal holds).
    clicked, on_output = button_clicker(magics, "Reject")
    await magics.ok("%%acp\nnotebook run w = 8", on_output=on_output, timeout=60)
    assert clicked.done()
    assert await magics.value("'w' in globals()") == "False"


async def test_proposals_without_a_page_say_so_and_deny_refuses(acp_kernel):
    """No front-end extension page here (jupyter_client): an edit is shown in the turn as text
    and not applied; a new cell needs someone to allow it (nobody can in a headless run), and
    under allow-all goes below the turn's cell with the cell's reply (set_next_input), one per
    turn. Under deny the tools refuse before asking any page."""
    hostile = "print('<img src=x onerror=alert(1)> `a\\nb` $x$ /tmp/a\\nb.py')"
    res = await acp_kernel.execute(f"notebook edit c1\n```\n{hostile}\n```", timeout=60, allow_stdin=False)
    shown = tool_text(res)
    assert "not proposed: no notebook page with acp-kernel's JupyterLab / Notebook 7 extension" in shown, shown[-2000:]
    assert "the notebook was not changed (the change is shown in the turn as text" in shown
    # In the finished turn's static output (the widget is replaced without a last sync).
    assert 'Proposed new source of cell "c1" (not applied' in shown and "onerror=alert(1)" in shown, shown[-3000:]
    res = await acp_kernel.execute(f"notebook insert\n```\n{hostile}\n```", timeout=60, allow_stdin=False)
    shown = tool_text(res)
    assert "not inserted: refused: nobody can answer a permission question here (a headless run); " \
           "the notebook was not changed" in shown, shown[-2000:]
    assert not res.reply["content"]["payload"]
    assert (await acp_kernel.execute("%permissions allow-all")).status == "ok"
    two = f"notebook all\ninsert\n```\n{hostile}\n```\ninsert\n```\nsecond = 2\n```"
    res = await acp_kernel.execute(two, timeout=60, allow_stdin=False)  # headless: nobody would see the cell
    shown = tool_text(res)
    assert not res.reply["content"]["payload"] and "Accepted, not yet" not in shown
    assert "not inserted: this front-end takes no new cell from the kernel (a headless run" in shown, shown[-2000:]
    res = await acp_kernel.execute(two, timeout=60)  # a console: it takes set_next_input
    shown = tool_text(res)
    payload = res.reply["content"]["payload"]  # the two calls race: one of them is the cell put below
    assert payload in ([{"source": "set_next_input", "text": t, "replace": False}] for t in (hostile, "second = 2")), \
        shown[-3000:]
    assert "Accepted, not yet in the notebook" in shown
    assert "not inserted: one new cell per turn goes below the turn's cell, and this turn has one" in shown
    assert (await acp_kernel.execute("%permissions deny")).status == "ok"
    res = await acp_kernel.execute("notebook delete c1", timeout=60)
    assert "refused by the permission policy (deny): the notebook was not changed" in tool_text(res)


async def test_run_cell_without_a_page_runs_the_saved_source_and_says_so(magics, tmp_path):
    """VS Code names its notebook to the kernel (``__vsc_ipynb_file__``) and has no page of ours:
    run_cell runs the cell as last saved, and says so; a markdown cell is not run."""
    import nbformat

    from tests.hostile.test_kernel_outputs import assert_inert

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 6 * 7\nprint('<img src=x onerror=alert(1)> `a\\nb` $x$')", id="c-run"),
                nbformat.v4.new_markdown_cell("# $y$ <b>not code</b>", id="c-doc")]
    path = tmp_path / "saved\nname.ipynb"
    nbformat.write(nb, path)
    await magics.ok(f"__vsc_ipynb_file__ = {str(path)!r}")
    await magics.ok("%acp connect demo --permissions allow-all")
    res = await magics.ok("%%acp\nnotebook run-cell c-run", timeout=60)
    assert await magics.value("x") == "42", tool_text(res)[-3000:]
    said = await magics.value("str([c.text for c in _acp.tool_calls.values()])")
    assert 'Cell "c-run" as last saved' in said and "unsaved edits are not included" in said, said
    assert "onerror=alert(1)" in said
    assert_inert(res)
    await magics.ok("%%acp\nnotebook run-cell c-doc", timeout=60)
    said = await magics.value("str([c.text for c in _acp.tool_calls.values()])")
    assert 'not run: cell "c-doc" is a markdown cell, not code' in said, said
    await magics.ok("%%acp\nnotebook run-cell nope", timeout=60)
    said = await magics.value("str([c.text for c in _acp.tool_calls.values()])")
    assert 'no cell with id "nope"' in said, said
