"""``%acp`` / ``%%acp`` in a real IPython kernel, against the demo agent and scripted agents."""

from __future__ import annotations

import asyncio
import json
import re
import shlex

from acp_kernel.protocol import proctree

from .conftest import agent_pids, button_clicker, scripted_command, wait_until

DEMO = "acp_kernel.demo.agent"
SCRIPTED = "scripted_agent.py"


def _session_id(text: str) -> str:
    match = re.search(r"session `([^`]+)`", text)
    assert match, text
    return match.group(1)


async def test_turn_renders_live_in_the_cell_and_its_value_is_a_turn(magics):
    connected = await magics.ok("%acp connect demo")
    assert "Connected **demo**" in connected.text()
    session_id = _session_id(connected.text())

    res = await magics.ok("%%acp\nlong")
    shown = res.displays()
    # Live: a streamed tail shown under a display id, then updated in place, all
    # parented to the %%acp cell (the harness keeps only this cell's messages).
    first_ids = {m["content"]["transient"].get("display_id") for m in shown if m["msg_type"] == "display_data"}
    updates = [m for m in shown if m["msg_type"] == "update_display_data"]
    assert updates and all(m["content"]["transient"]["display_id"] in first_ids for m in updates)
    # ...and it arrived while the turn ran, not all at once at the end.
    i_first = res.outputs.index(shown[0])
    i_last = res.outputs.index(shown[-1])
    assert res.times[i_last] - res.times[i_first] > 0.1, (res.times[i_first], res.times[i_last])
    # It ends with the status line, then the cell's value.
    assert "Done" in shown[-1]["content"]["data"]["text/plain"]
    assert res.outputs[-1]["msg_type"] == "execute_result"
    assert res.outputs[-1]["content"]["data"]["text/plain"].startswith("<Turn end_turn")
    assert "The acp-kernel demo agent" in res.text()

    # The next cell uses the turn: the cell's value (Out / _) is _acp.
    assert await magics.value("from acp_kernel.client.turn import Turn\nisinstance(_, Turn) and _ is _acp") == "True"
    assert await magics.value("_acp.stop_reason") == "'end_turn'"
    assert await magics.value("_acp.text.startswith('# The acp-kernel demo agent'), len(_acp.text) > 1000") == "(True, True)"
    assert await magics.value("_acp.session_id") == repr(session_id)
    assert await magics.value("_acp.tool_calls") == "{}"

    await magics.ok("%%acp\ntools")
    kinds = await magics.value("sorted((t.kind, t.status) for t in _acp.tool_calls.values())")
    assert kinds == repr(sorted([("delete", "failed"), ("edit", "completed"), ("fetch", "completed"),
                                 ("read", "completed"), ("search", "completed")]))
    # Out[n] keeps every turn: the earlier one is still there.
    assert await magics.value("[type(v).__name__ for v in Out.values()].count('Turn')") == "2"


async def test_load_ext_magics_is_the_same_extension(ipython):
    await ipython.ok("%load_ext acp_kernel")
    # The ACP schema import began with the extension (issue 25): `%acp connect` waits for it.
    assert await ipython.value("__import__('acp_kernel.protocol.warm', fromlist=['_']).schema_started()") == "True"
    await ipython.ok("%load_ext acp_kernel")  # same transformer, not registered twice
    assert await ipython.value(
        "from acp_kernel.magics.transform import transform_cell\n"
        "get_ipython().input_transformers_cleanup.count(transform_cell)") == "1"
    await ipython.ok("%acp connect demo")
    res = await ipython.ok("%%acp\nhello")
    assert "demo agent" in res.text()
    final = res.displays()[-1]["content"]["data"]  # a finished %%acp turn is static, as in the kernel
    assert "application/vnd.jupyter.widget-view+json" not in final and "demo agent" in final["text/html"]
    assert await ipython.value("_acp.stop_reason, 'script' in _acp.text") == "('end_turn', True)"
    # The turn's record, as the saved output's metadata keeps it (client/record.py).
    assert await ipython.value("_acp.record['stop_reason'], _acp.record['agent']['name'], _acp.record['policy']") == \
        "('end_turn', 'demo', 'ask')"
    assert res.displays()[-1]["content"]["metadata"]["acp_kernel"]["stop_reason"] == "end_turn"
    # %acp inside an indented block runs where an await may stand (if/for/async def)...
    inside = await ipython.ok("if True:\n    %acp status")
    assert "**demo** (default):" in inside.text()
    # ...and inside a plain def, where nothing can be awaited, a usage error says what works.
    in_def = await ipython.execute("def f():\n    %acp status\nf()")
    assert in_def.status == "error" and "make it `async def`" in in_def.error_line()


async def test_permission_answered_mid_cell_through_a_comm_message(magics, tmp_path):
    await magics.ok("%acp connect demo --permissions ask")
    clicked, on_output = button_clicker(magics, "Allow once")
    res = await magics.ok("%%acp\npermission", on_output=on_output, timeout=15)
    assert clicked.done(), res.text()
    # The question is in the turn's widget view, shown in this cell (its comms may carry
    # another parent); the record says what was chosen.
    assert "application/vnd.jupyter.widget-view+json" in res.displays()[0]["content"]["data"]
    assert "chose **Allow once**" in res.text()
    assert "Permission granted" in res.text()
    assert (tmp_path / "work" / "demo-permission.txt").exists()
    assert await magics.value("_acp.stop_reason") == "'end_turn'"
    # Headless (allow_stdin False, as nbclient runs): rejected with a message, no hang.
    headless = await magics.ok("%%acp\npermission", allow_stdin=False)
    assert "nobody can answer here" in headless.text()
    assert "Permission granted" not in headless.text()


async def test_interrupt_cancels_a_slow_turn(magics):
    """``slow`` streams for ~10 s; interrupted after its first output, the turn ends
    cancelled (the wait's timeout is the only clock; benchmarks/interrupt.py times it)."""
    await magics.ok("%acp connect demo")
    loop = asyncio.get_running_loop()
    started = loop.create_future()

    async def on_output(msg):
        if not started.done() and msg["msg_type"] in ("display_data", "update_display_data"):
            started.set_result(None)

    cell = asyncio.ensure_future(magics.execute("%%acp\nslow", on_output=on_output))
    await asyncio.wait_for(started, 60)
    await magics.km.interrupt_kernel()
    res = await asyncio.wait_for(cell, 120)  # returns once the execute_reply is in
    assert res.status == "ok"
    assert "Finished without being cancelled" not in res.text()
    assert "cancelled" in res.displays()[-1]["content"]["data"]["text/plain"]
    assert await magics.value("_acp.stop_reason") == "'cancelled'"
    nxt = await magics.ok("%%acp\nhello")
    assert "demo agent" in nxt.text()
    assert await magics.value("_acp.stop_reason") == "'end_turn'"


async def test_an_agent_that_ignores_cancel_still_gives_the_cell_back(magics):
    stuck = [{"chunk": "busy"}, {"sleep": 3600}]
    scenario = {"on_cancel": "ignore", "ignore_eof": True, "prompts": {"go\n": stuck, "go": stuck}}
    command = shlex.quote(scripted_command(scenario))
    await magics.ok(f"%acp connect --command {command} --as stuck")
    (pid,) = agent_pids(magics.descendants(), SCRIPTED)

    loop = asyncio.get_running_loop()
    started = loop.create_future()

    async def on_output(msg):
        if not started.done() and "busy" in json.dumps(msg["content"]):
            started.set_result(None)

    cell = asyncio.ensure_future(magics.execute("%%acp stuck\ngo", on_output=on_output))
    await asyncio.wait_for(started, 60)
    await magics.km.interrupt_kernel()
    res = await asyncio.wait_for(cell, 120)  # the agent never ends the turn: the client's grace does
    assert res.status == "ok"
    assert "did not end the turn" in res.text()
    assert await magics.value("_acp.stop_reason, _acp.forced") == "('cancelled', True)"
    # The next cell restarts the stuck agent (it ignores stdin EOF too) and works.
    nxt = await magics.ok("%%acp stuck\nhello again")
    assert "Restarted **stuck**" in nxt.text() and "ok" in nxt.text()
    await wait_until(lambda: not proctree.alive(pid))


async def test_several_connections_by_alias_status_disconnect_and_shutdown(magics):
    a = await magics.ok("%acp connect demo --as a")
    b = await magics.ok("%acp connect demo --as b")
    sid_a, sid_b = _session_id(a.text()), _session_id(b.text())
    assert sid_a != sid_b
    demo_pids = agent_pids(magics.descendants(), DEMO)
    assert len(demo_pids) == 2

    await magics.ok("%%acp a\necho from a")
    assert await magics.value("_acp.session_id, _acp.text") == repr((sid_a, "from a\n"))
    await magics.ok("%%acp b\necho from b")
    assert await magics.value("_acp.session_id") == repr(sid_b)
    await magics.ok("%%acp\necho to the default")  # the last one connected
    assert await magics.value("_acp.session_id") == repr(sid_b)

    status = (await magics.ok("%acp status")).text()
    assert "**a**:" in status and sid_a in status
    assert "**b** (default)" in status and sid_b in status

    bye = await magics.ok("%acp disconnect a")
    assert "Disconnected **a**" in bye.text()
    await wait_until(lambda: len([p for p in demo_pids if proctree.alive(p)]) == 1)
    status = (await magics.ok("%acp status")).text()
    assert "**a**" not in status and "**b** (default)" in status
    gone = await magics.execute("%%acp a\nhello")
    assert gone.status == "error" and "no connection 'a' (open: b)" in gone.error_line()
    unknown = await magics.execute("%acp disconnect zzz")
    assert unknown.status == "error" and "no connection 'zzz'" in unknown.error_line()

    # One more that would outlive a closed stdin; then shut the kernel down.
    scenario = {"ignore_eof": True}
    await magics.ok(f"%acp connect --command {shlex.quote(scripted_command(scenario))} --as c")
    agents = agent_pids(magics.descendants(), DEMO) | agent_pids(magics.descendants(), SCRIPTED)
    assert len(agents) == 2 and all(proctree.alive(p) for p in agents)
    kernel_pid = magics.pid
    await magics.km.shutdown_kernel(now=False)
    await wait_until(lambda: not proctree.alive(kernel_pid))
    await wait_until(lambda: not any(proctree.alive(p) for p in agents), timeout=5)


async def test_interpolation_and_no_interpolate(magics):
    await magics.ok("%acp connect demo")
    await magics.ok("x = 6 * 7\nname = 'Ada'")
    await magics.ok("%%acp\necho {x} for {name}, {missing} stays, {{braces}} escape")
    assert await magics.value("_acp.text") == repr("42 for Ada, {missing} stays, {braces} escape\n")
    await magics.ok("%%acp --no-interpolate\necho {x} for {name}")
    assert await magics.value("_acp.text") == repr("{x} for {name}\n")
    # Text that is not a format string goes as written.
    await magics.ok('%%acp\necho {"a": 1} and {x')
    assert await magics.value("_acp.text") == repr('{"a": 1} and {x\n')


async def test_attach_sends_an_embedded_resource(magics):
    await magics.ok("%acp connect demo")
    await magics.ok("data = list(range(10))\nlabel = 'numbers'")
    res = await magics.ok("%%acp --attach data\necho {label} attached")
    # The demo agent acknowledges each embedded resource by URI and size.
    size = len(repr(list(range(10))))
    assert f"embedded resource `python:data` ({size} characters)" in res.text()
    assert await magics.value("_acp.text.endswith('numbers attached\\n')") == "True"
    # What went on the wire: the prompt the turn carried.
    prompt = await magics.value("_acp.prompt")
    assert "'uri': 'python:data'" in prompt and "'text': '[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]'" in prompt
    missing = await magics.execute("%%acp --attach nosuch\nhello")
    assert missing.status == "error" and "--attach nosuch: no such variable" in missing.error_line()


async def test_bad_input_gives_one_clear_line_and_the_kernel_lives(magics):
    # A failed connect fails the cell (headless runs stop there) with one line.
    res = await magics.execute("%acp connect nosuchagent")
    assert res.status == "error" and "unknown agent 'nosuchagent'" in res.error_line()
    assert "\n" not in res.error_line().strip()

    res = await magics.execute("%acp connect --command /no/such/agent-binary")
    assert res.status == "error" and res.reply["content"]["ename"] == "UsageError"
    assert "not found" in res.error_line() and "\n" not in res.error_line().strip()
    # Said once (issue 24): the error's line, and beside it only what the line leaves out (the hint).
    assert res.text().count("Cannot start") == 1 and "Cannot start" in res.error_line()
    assert "Hint:" in "".join(m["content"]["data"]["text/markdown"] for m in res.displays())

    for cell, says in (("%%acp\nhello", "no agent connected; use %acp connect NAME"),
                       ("%acp frobnicate", "unknown command 'frobnicate'"),
                       ("%acp connect demo --permissions sometimes", "invalid choice"),
                       ('%acp connect "unclosed', "No closing quotation")):
        bad = await magics.execute(cell)
        assert bad.status == "error", cell
        content = bad.reply["content"]
        assert content["ename"] == "UsageError" and content["traceback"] == [], content
        line = bad.error_line().strip()
        assert says in line and "\n" not in line, line
        assert not [m for m in bad.outputs if m["msg_type"] == "error"]

    assert await magics.km.is_alive()
    assert await magics.value("1 + 1") == "2"
    await magics.ok("%acp connect demo")
    assert "demo agent" in (await magics.ok("%%acp\nhello")).text()
