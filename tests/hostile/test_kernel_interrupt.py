"""The kernel's interrupt stops whatever a cell waits on, not only a turn:
an agent that never answers ``initialize``, a ``%command`` the agent never
answers. The cell returns, the agent's process is gone, the kernel goes on."""

from __future__ import annotations

import asyncio

import pytest

from acp_kernel.protocol import proctree
from tests.kernel.conftest import acp_kernel, kernel_env, kernelspec_path, scripted_command  # noqa: F401


def scripted_agents(kernel_pid: int) -> set[int]:
    """The kernel's descendants running the scripted agent (not its watchdog)."""
    found = set()
    for pid in proctree.tree(kernel_pid) - {kernel_pid}:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"scripted_agent.py" in f.read():
                    found.add(pid)
        except OSError:
            pass
    return found


async def interrupt_when(k, code: str, seen: str):
    """Run ``code``; once an output containing ``seen`` arrived, interrupt the kernel."""
    arrived = asyncio.Event()

    async def watch(msg):
        data = msg["content"].get("data", {})
        if seen in (data.get("text/markdown") or data.get("text/plain") or msg["content"].get("text") or ""):
            arrived.set()

    task = asyncio.ensure_future(k.execute(code, on_output=watch, timeout=60))
    await asyncio.wait_for(arrived.wait(), 30)
    deadline = asyncio.get_running_loop().time() + 30
    while not (agents := scripted_agents(k.km.provisioner.pid)) and seen == "Starting":
        assert asyncio.get_running_loop().time() < deadline, "the agent never started"
        await asyncio.sleep(0.02)  # polling /proc: the spawn sends no message
    await k.km.interrupt_kernel()
    res = await asyncio.wait_for(task, 30)
    return res, agents


@pytest.mark.slow
async def test_interrupt_while_the_agent_starts(acp_kernel):  # noqa: F811
    k = acp_kernel
    await k.execute(f"%agent --command {scripted_command({'never_answer': ['initialize']})}")
    res, agents = await interrupt_when(k, "hello", "Starting")
    assert res.status == "error" and res.reply["content"]["ename"] == "Interrupted"
    assert "Interrupted" in res.text()
    assert agents, "the agent process was running"
    deadline = asyncio.get_running_loop().time() + 10
    while any(proctree.alive(p) for p in agents):
        assert asyncio.get_running_loop().time() < deadline, "the agent outlived the interrupt"
        await asyncio.sleep(0.05)
    # The kernel goes on: the demo agent answers the next prompt.
    await k.execute("%agent demo")
    res = await k.execute("hello")
    assert res.status == "ok"


@pytest.mark.slow
async def test_interrupt_a_command_the_agent_never_answers(acp_kernel, tmp_path):  # noqa: F811
    k = acp_kernel
    wire = tmp_path / "wire.jsonl"
    await k.execute(f"%agent --command {scripted_command({'never_answer': ['session/set_mode'], 'record': str(wire)})}")
    assert (await k.execute("%status\nhello")).status == "ok"  # connected; status says what runs
    res = await k.execute("%new")
    assert res.status == "ok"

    # %mode waits on session/set_mode and shows nothing first: interrupt once the
    # agent has the request (its wire recording says so), not on a guess.
    task = asyncio.ensure_future(k.execute("%mode plan", timeout=60))
    deadline = asyncio.get_running_loop().time() + 30
    while '"session/set_mode"' not in (wire.read_text() if wire.exists() else ""):
        assert not task.done(), task.result().text()
        assert asyncio.get_running_loop().time() < deadline, "the agent never got session/set_mode"
        await asyncio.sleep(0.02)  # polling a file: the agent sends no message here
    await k.km.interrupt_kernel()
    res = await asyncio.wait_for(task, 30)
    assert res.status == "error" and res.reply["content"]["ename"] == "Interrupted"
    assert (await k.execute("hello")).status == "ok"
