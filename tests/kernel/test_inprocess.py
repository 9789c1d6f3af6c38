"""Kernel logic through the in-process harness (tests/kernel/inprocess.py): commands,
usage errors, a turn with the demo agent, and do_execute's last resort, each without
starting a kernel process. The same behaviours' end-to-end tests start real kernels."""

from __future__ import annotations

import asyncio
import time

import pytest

from acp_kernel.client.controller import Controller

from .inprocess import InProcessKernel

HOSTILE = "<img src=x onerror=alert(1)> $x$ \\( `a\nb` \x1b]0;title\x07 /tmp/a\nb.txt"


@pytest.fixture
async def kernel(kernel_env, tmp_path):
    k = InProcessKernel(dict(kernel_env, ACP_KERNEL_AGENT="demo"), str(tmp_path / "work"))
    try:
        yield k
    finally:
        await k.close()


async def test_help_and_a_usage_error(kernel):
    helped = await kernel.execute("%help")
    assert helped.status == "ok" and "%agent" in helped.text()
    bad = await kernel.execute("%nonsense")
    assert bad.status == "error" and bad.reply["content"]["ename"] == "UsageError"
    assert [m["msg_type"] for m in bad.outputs] == ["error"]  # said once


async def test_a_turn_with_the_demo_agent(kernel):
    res = await kernel.execute("hello")
    assert res.status == "ok", res.reply
    assert "Hello" in res.text()


async def test_an_internal_error_is_an_error_reply_and_the_kernel_goes_on(kernel, monkeypatch):
    async def broken(self, *args, **kwargs):
        raise RuntimeError(HOSTILE)

    monkeypatch.setattr(Controller, "prompt", broken)
    res = await kernel.execute("anything")
    content = res.reply["content"]
    assert content["status"] == "error" and content["ename"] == "RuntimeError"
    assert "\n" not in content["evalue"] and content["evalue"].startswith("<img src=x")
    assert [m["msg_type"] for m in res.outputs] == ["error"]
    shown = "\n".join(res.outputs[0]["content"]["traceback"])
    assert "the kernel is still alive" in shown and "\x1b" not in shown and "\x07" not in shown
    monkeypatch.undo()
    again = await kernel.execute("%help")
    assert again.status == "ok"


async def test_the_acp_kernel_freezes_its_heap_for_a_turn_only(kernel, monkeypatch):
    """The ACP kernel's process is its own: a turn runs with the heap it started with out of
    the collector's sight (gc.freeze), and the heap is thawed when the turn ends. A heap
    frozen by someone else is left alone, and the magics' controller (the user's Python)
    never freezes."""
    import gc

    from acp_kernel.client import controller as controller_mod

    seen: list[tuple[bool, int]] = []
    real = controller_mod._freeze_heap

    def spy() -> bool:
        frozen = real()
        seen.append((frozen, gc.get_freeze_count()))
        return frozen

    ends: list[int] = []  # the freeze count as the turn's end froze its own objects too

    def at_end() -> None:
        gc.freeze()
        ends.append(gc.get_freeze_count())

    monkeypatch.setattr(controller_mod, "_freeze_heap", spy)
    monkeypatch.setattr(controller_mod, "_freeze_turn", at_end)
    assert gc.get_freeze_count() == 0
    res = await kernel.execute("hello")
    assert res.status == "ok", res.reply
    assert seen and seen[0][0] and seen[0][1] > 0  # frozen while the turn ran
    assert len(ends) == 1 and ends[0] > seen[0][1]  # its end froze what the turn made, once
    assert gc.get_freeze_count() == 0  # and thawed after, all of it
    gc.freeze()  # someone else's freeze: kept as it is
    try:
        assert (await kernel.execute("hello")).status == "ok"
        assert seen[-1][0] is False and gc.get_freeze_count() > 0
        assert len(ends) == 1  # (nor frozen again at the end)
    finally:
        gc.unfreeze()
    assert not Controller.__init__.__kwdefaults__["own_process"]  # the magics and the Python API: never


async def test_a_frontends_kernel_info_starts_the_schema_import(kernel, monkeypatch):
    """The frontend's hello (kernel_info, asked again as jupyter_client's wait_for_ready does)
    comes when the kernel is ready and idle until the first cell: the ACP schema import starts
    once the hello is over, HELLO_QUIET after its last kernel_info, so the first agent's start
    rarely waits for it (issue 25: Client.start waits for that import) and the hello's status
    messages are not held up by it (jupyter_console reads a late one as its cell's)."""
    from acp_kernel.frontends import kernel as kernel_mod

    started = asyncio.get_running_loop().create_future()
    monkeypatch.setattr(kernel_mod, "schema_in_background",
                        lambda: started.set_result(time.monotonic()) if not started.done() else None)
    handler = kernel.kernel.shell_handlers["kernel_info_request"]
    await handler(kernel.iopub, [], kernel.session.msg("kernel_info_request", {}))  # (replies go to the dummy socket)
    again = time.monotonic()
    await handler(kernel.iopub, [], kernel.session.msg("kernel_info_request", {}))
    assert not started.done()
    at = await asyncio.wait_for(started, 10 + kernel_mod.HELLO_QUIET)
    assert at - again >= kernel_mod.HELLO_QUIET - 0.01  # timed from the last hello, not the first


async def test_when_quiet_calls_once_after_the_last_message():
    from acp_kernel.frontends.kernel import _when_quiet

    calls: list[float] = []
    done = asyncio.get_running_loop().create_future()

    def fn() -> None:
        calls.append(time.monotonic())
        done.set_result(None)

    watcher = _when_quiet(fn, 0.05)
    for _ in range(3):
        watcher({})
    last = time.monotonic()
    await asyncio.wait_for(done, 10)
    watcher({})  # after it ran: nothing more
    await asyncio.sleep(0.1)  # (a second call would have come by now)
    assert len(calls) == 1 and calls[0] - last >= 0.04