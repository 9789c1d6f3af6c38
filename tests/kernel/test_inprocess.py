"""Kernel logic through the in-process harness (tests/kernel/inprocess.py): commands,
usage errors, a turn with the demo agent, and do_execute's last resort, each without
starting a kernel process. The same behaviours' end-to-end tests start real kernels."""

from __future__ import annotations

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
