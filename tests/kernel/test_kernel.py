"""The ACP kernel through jupyter_client, against the demo agent and scripted agents."""

from __future__ import annotations

import asyncio
import re

from acp_kernel.protocol import proctree

from tests.view.turnclick import permission_answerer

from .conftest import scripted_command, wait_until


def _pid(text: str) -> int:
    match = re.search(r"pid (\d+)", text)
    assert match, text
    return int(match.group(1))


async def test_kernel_info(acp_kernel):
    reply = await acp_kernel.kc.kernel_info(reply=True)
    content = reply["content"]
    assert content["implementation"] == "acp_kernel"
    assert content["language_info"]["name"] == "markdown"


async def test_streamed_then_final_transcript(acp_kernel):
    res = await acp_kernel.execute("long")
    assert res.status == "ok"
    kinds = [m["msg_type"] for m in res.outputs]
    # streamed: an open tail that is updated in place, then completed blocks
    assert "update_display_data" in kinds
    text = res.text()
    assert "The acp-kernel demo agent" in text
    assert "Done" in text  # the final status line
    # final: the turn's output becomes static (no widget view), the status line after every block
    displays = [m for m in res.outputs if m["msg_type"] in ("display_data", "update_display_data")]
    last = displays[-1]["content"]["data"]
    assert "application/vnd.jupyter.widget-view+json" not in last
    assert last["text/markdown"].rstrip().removesuffix("</div>").rstrip().splitlines()[-1].startswith("<sub>Done")
    husk = res.outputs[-1]  # the widget empties its state before it closes (nbclient would save it)
    assert husk["msg_type"] == "comm_msg" and husk["content"]["data"]["state"]["count"] == 0


async def test_interrupt_cancels_the_turn_and_the_next_cell_works(acp_kernel):
    """The demo's ``slow`` streams for ~10 s; an interrupt after its first text ends
    the turn as cancelled, long before it would finish by itself (no clock: the
    turn's own last line says whether it ran to the end)."""
    started = asyncio.get_running_loop().create_future()

    async def on_output(msg):
        # the turn's first text (in the widget's state or its text fallback), not the start-up line
        if not started.done() and "Streaming 100 chunks" in str(msg["content"]):
            started.set_result(None)

    cell = asyncio.ensure_future(acp_kernel.execute("slow", on_output=on_output))
    await asyncio.wait_for(started, 60)
    await acp_kernel.km.interrupt_kernel()
    res = await asyncio.wait_for(cell, 120)
    assert "cancelled" in res.text()
    assert "Finished without being cancelled" not in res.text()
    nxt = await acp_kernel.execute("hello")
    assert nxt.status == "ok" and "demo agent" in nxt.text()


async def test_agent_that_ignores_cancel_still_gives_the_cell_back(acp_kernel):
    scenario = {"on_cancel": "ignore", "ignore_eof": True,
                "prompts": {"go": [{"chunk": "busy"}, {"sleep": 3600}]}}
    res = await acp_kernel.execute(f"%agent --command {scripted_command(scenario)}")
    assert res.status == "ok", res.text()
    started = asyncio.get_running_loop().create_future()

    async def on_output(msg):
        if not started.done() and "busy" in str(msg["content"]):
            started.set_result(None)

    cell = asyncio.ensure_future(acp_kernel.execute("go", on_output=on_output))
    await asyncio.wait_for(started, 20)
    status = await _status_while_busy(acp_kernel)
    await acp_kernel.km.interrupt_kernel()
    # The agent never ends the turn: the kernel's grace runs out and it gives the cell back
    # (a wait that never ends fails at the timeout; benchmarks/interrupt.py prints how long it takes).
    res = await asyncio.wait_for(cell, 120)
    assert "did not end the turn" in res.text()
    # the next cell restarts the stuck agent (it ignores stdin EOF too) and works
    nxt = await acp_kernel.execute("hello again")
    assert "ok" in nxt.text()
    await wait_until(lambda: not proctree.alive(status))


async def _status_while_busy(harness) -> int:
    """The agent pid, read from the process table (the kernel is busy)."""
    kernel_pid = harness.km.provisioner.pid
    children = [p for p in proctree.tree(kernel_pid) if p != kernel_pid]
    agents = [p for p in children if b"scripted_agent" in open(f"/proc/{p}/cmdline", "rb").read()]
    assert agents, children
    return agents[0]


async def test_permission_answered_through_a_widget_comm_message(acp_kernel):
    # The question is a block of the turn widget; answer it as the page does.
    clicked, on_output = permission_answerer(acp_kernel, "Allow once")
    res = await acp_kernel.execute("permission", on_output=on_output, timeout=30)
    assert clicked.done(), res.text()
    assert "Permission granted" in res.text()


async def test_headless_run_rejects_with_a_message(acp_kernel):
    res = await acp_kernel.execute("permission", allow_stdin=False)
    assert res.status == "ok"
    text = res.text()
    assert "nobody can answer" in text.lower() or "not interactive" in text.lower() or "reject" in text.lower()
    assert "Permission granted" not in text


async def test_no_agent_survives_a_restart_and_the_session_resumes(acp_kernel):
    first = await acp_kernel.execute("hello")
    assert first.status == "ok"
    status = await acp_kernel.execute("%status")
    pid = _pid(status.text())
    session_id = re.search(r"session: `([^`]+)`", status.text()).group(1)
    assert proctree.alive(pid)
    await acp_kernel.km.restart_kernel(now=False)
    await acp_kernel.kc.wait_for_ready(timeout=60)
    await wait_until(lambda: not proctree.alive(pid))
    resumed = await acp_kernel.execute("hello")
    assert f"session `{session_id}`" in resumed.text() or session_id in resumed.text()
    status = await acp_kernel.execute("%status")
    assert session_id in status.text()
    new = await acp_kernel.execute("%new")
    assert session_id not in new.text()


async def test_shell_cell_and_bad_input(acp_kernel):
    res = await acp_kernel.execute("%%shell\necho 'a b' | tr a-z A-Z && echo done; exit 3")
    assert "A B" in res.text() and "done" in res.text() and "exit code 3" in res.text()
    bad = await acp_kernel.execute("%nonsense")
    assert bad.status == "error" and "unknown command" in bad.text()
    missing = await acp_kernel.execute("%agent --command /no/such/agent-binary")
    assert missing.status == "ok"
    cell = await acp_kernel.execute("hello")
    assert "not found" in cell.text() or "Cannot start" in cell.text()
    back = await acp_kernel.execute("%agent demo\nhello")
    assert "demo agent" in back.text()


async def test_completion_and_inspection(acp_kernel):
    await acp_kernel.execute("hello")
    reply = await acp_kernel.kc.complete("%he", 3, reply=True)
    assert "%help" in reply["content"]["matches"]
    reply = await acp_kernel.kc.complete("%mode ", 6, reply=True)
    assert reply["content"]["matches"], reply
    reply = await acp_kernel.kc.complete("/", 1, reply=True)
    assert any(m.startswith("/") for m in reply["content"]["matches"])
    slash = reply["content"]["matches"][0]
    reply = await acp_kernel.kc.inspect(slash, len(slash), reply=True)
    assert reply["content"]["found"]


async def test_a_shutdown_request_ends_the_kernel_by_itself(kernel_env, tmp_path):
    """After a turn (an agent running), ``shutdown_request`` lets the kernel exit on
    its own: exit status 0, not jupyter_client's SIGTERM 2.5 s later (the control
    thread's last flush used to wait for an IOPub thread already stopped)."""
    from .conftest import running_kernel

    async with running_kernel(kernel_env, tmp_path / "work") as (km, kc):
        msg_id = kc.execute("hello")
        reply = await kc.get_shell_msg(timeout=30)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = await kc.get_shell_msg(timeout=30)
        assert reply["content"]["status"] == "ok"
        process = km.provisioner.process
    assert process.returncode == 0, process.returncode
