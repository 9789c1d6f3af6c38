"""An interrupt stops a running ``%%shell`` cell in the ACP kernel: the
controller holds the command as something an interrupt kills."""

from __future__ import annotations

import asyncio


async def test_interrupt_kills_a_running_shell_cell_and_the_next_cell_works(acp_kernel):
    started = asyncio.get_running_loop().create_future()

    async def on_output(msg):
        if not started.done() and "started" in str(msg["content"]):
            started.set_result(None)

    cell = asyncio.ensure_future(acp_kernel.execute("%%shell\necho started; sleep 600; echo finished",
                                                    on_output=on_output))
    await asyncio.wait_for(started, 60)
    await acp_kernel.km.interrupt_kernel()
    res = await asyncio.wait_for(cell, 60)  # sleep 600 ran to its end only if nothing killed it
    assert "finished" not in res.text()
    assert "started" in res.text()
    nxt = await acp_kernel.execute("%%shell\necho again")
    assert nxt.status == "ok" and "again" in nxt.text()
