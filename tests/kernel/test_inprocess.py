"""Kernel logic through the in-process harness (tests/kernel/inprocess.py): commands,
usage errors, a turn with the demo agent, and do_execute's last resort, each without
starting a kernel process. The same behaviours' end-to-end tests start real kernels."""

from __future__ import annotations

import asyncio

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

    monkeypatch.setattr(controller_mod, "_freeze_heap", spy)
    assert gc.get_freeze_count() == 0
    res = await kernel.execute("hello")
    assert res.status == "ok", res.reply
    assert seen and seen[0][0] and seen[0][1] > 0  # frozen while the turn ran
    assert gc.get_freeze_count() == 0  # and thawed after
    gc.freeze()  # someone else's freeze: kept as it is
    try:
        assert (await kernel.execute("hello")).status == "ok"
        assert seen[-1][0] is False and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    assert not Controller.__init__.__kwdefaults__["own_process"]  # the magics and the Python API: never


async def test_a_frontends_kernel_info_starts_the_schema_import(kernel, monkeypatch):
    """The frontend's hello (kernel_info) comes when the kernel is ready and idle until the first
    cell: the ACP schema import starts then, so the first agent's start rarely waits for it
    (issue 25: Client.start waits for that import)."""
    from acp_kernel.frontends import kernel as kernel_mod

    started: list[str] = []
    monkeypatch.setattr(kernel_mod, "schema_in_background", lambda: started.append("import"))
    handler = kernel.kernel.shell_handlers["kernel_info_request"]
    msg = kernel.session.msg("kernel_info_request", {})
    await handler(kernel.iopub, [], msg)  # (the reply goes to the dummy socket)
    assert started == []  # not before the reply: after it, on the loop's next turn
    await asyncio.sleep(0)
    assert started == ["import"]
