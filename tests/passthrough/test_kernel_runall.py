"""The stand-in CLIs through the ACP kernel, as a notebook's Run All sends
cells (all queued before the CLI is ready), over jupyter_client with a
headless client (the cell then keeps the reply as text): replies arrive in
order, a two-line cell is one message, an interrupt stops a reply with the
agent's cancel keys and the next cell works, stop leaves no process."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from acp_kernel.protocol import proctree

from ..kernel.conftest import running_kernel
from .standins import config_entry, events, prompts, wait_event

pytestmark = pytest.mark.slow
PROMPTS = ["alpha one", "bravo two", "charlie three"]
TWO_LINE = "delta first\ndelta second"


class Notebook:
    """Cells sent at once; outputs collected by their msg_id."""

    def __init__(self, km, kc) -> None:
        self.km, self.kc = km, kc
        self.outputs: dict[str, list[dict]] = {}
        self.done: dict[str, dict] = {}

    def send(self, code: str) -> str:
        msg_id = self.kc.execute(code)
        self.outputs[msg_id] = []
        return msg_id

    async def wait(self, msg_id: str, timeout: float = 90) -> dict:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while msg_id not in self.done:
            msg = await self.kc.get_iopub_msg(timeout=max(0.1, end - loop.time()))
            parent = msg["parent_header"].get("msg_id")
            if parent not in self.outputs:
                continue
            if msg["msg_type"] in ("stream", "display_data", "update_display_data", "execute_result", "error"):
                self.outputs[parent].append(msg["content"])
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                self.done[parent] = msg
        reply = await self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = await self.kc.get_shell_msg(timeout=timeout)
        return reply["content"]

    def text(self, msg_id: str) -> str:
        parts = []
        for c in self.outputs[msg_id]:
            parts.append(c.get("text", "") + str(c.get("data", {}).get("text/plain", "")) + c.get("evalue", ""))
        return "\n".join(parts)


@pytest.fixture
async def notebook(kernel_env, tmp_path):
    log = tmp_path / "standin.jsonl"
    agents = {name: config_entry(name, log) for name in ("ink", "silent", "dialog", "think", "quit")}
    agents["slowstart"] = config_entry("silent", log, ready_timeout=0.5)
    agents["slowstart"]["passthrough"]["command"][3] = "5"  # --silent-start 5
    agents["busy"] = config_entry("think", log, cell_timeout=1.0)
    (tmp_path / "acp_kernel.json").write_text(json.dumps({"agents": agents}))
    async with running_kernel(kernel_env, tmp_path / "work") as (km, kc):
        nb = Notebook(km, kc)
        nb.log = log
        yield nb


@pytest.mark.parametrize("name", ["ink", "silent", "dialog", "think", "quit"])
async def test_run_all_then_interrupt_then_stop(notebook, name):
    nb, log = notebook, notebook.log
    start = nb.send(f"%passthrough {name}")
    cells = [nb.send(p) for p in PROMPTS]
    two = nb.send(TWO_LINE)
    assert (await nb.wait(start))["status"] == "ok", nb.text(start)
    assert "interrupt sends Esc" in nb.text(start)
    for p, cell in zip(PROMPTS, cells):
        assert (await nb.wait(cell))["status"] == "ok", nb.text(cell)
        assert f"stand-in reply to: {p} (1 line)" in nb.text(cell)
    assert (await nb.wait(two))["status"] == "ok"
    assert "stand-in reply to: delta first (2 lines)" in nb.text(two)
    assert prompts(log) == [*PROMPTS, TWO_LINE]

    slow = nb.send("SLOW please")
    await wait_event(log, lambda e: e.get("text") == "slow chunk 2")
    await nb.km.interrupt_kernel()
    assert (await nb.wait(slow))["status"] == "ok"
    said = nb.text(slow)
    assert "Interrupted: Esc sent to `" not in said  # text/plain is the rendered text
    assert re.search(rf"Interrupted: Esc sent to {name}\. The screen shows: .*Interrupted by user", said), said
    assert [e["event"] for e in events(log)].count("cancel") == 1
    assert not any(e["event"] in ("dialog", "quit") for e in events(log))

    after = nb.send("after the interrupt")
    assert (await nb.wait(after))["status"] == "ok"
    assert "stand-in reply to: after the interrupt (1 line)" in nb.text(after)
    listing = nb.send("%passthrough list")
    await nb.wait(listing)
    pid = int(re.search(r"pid (\d+)", nb.text(listing)).group(1))
    stop = nb.send("%passthrough stop")
    assert (await nb.wait(stop))["status"] == "ok"
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    while proctree.alive(pid):
        assert loop.time() < end, "the stand-in outlived %passthrough stop"
        await asyncio.sleep(0.05)


async def test_not_ready_and_timeouts_are_errors_that_say_what_the_screen_shows(notebook):
    nb = notebook
    nb.send("%passthrough slowstart")
    cell = nb.send("too early")
    reply = await nb.wait(cell)
    assert reply["status"] == "error" and reply["ename"] == "PassthroughTimeout"
    assert "slowstart: not ready after 0.5 s: it has not switched its terminal to raw input. The prompt was not typed." in nb.text(cell)
    nb.send("%passthrough busy")
    cell = nb.send("alpha one")
    reply = await nb.wait(cell)
    assert reply["status"] == "error" and reply["ename"] == "PassthroughTimeout"
    assert "busy: still working after 1 s (the screen shows 'esc to interrupt'). It may still be working" in nb.text(cell)


@pytest.mark.parametrize("fails", [False, True], ids=["resumed", "resume-fails"])
async def test_after_a_restart_the_cli_is_resumed_and_the_last_prompt_not_typed_again(kernel_env, tmp_path, fails):
    log = tmp_path / "standin.jsonl"
    entry = config_entry("esc", log)
    entry["passthrough"]["resume_args"] = ["--continue"] + (["--fail-resume"] if fails else [])
    (tmp_path / "acp_kernel.json").write_text(json.dumps({"agents": {"cli": entry}}))
    kernel_env = {**kernel_env, "JPY_SESSION_NAME": str(tmp_path / "work" / "nb.ipynb")}
    async with running_kernel(kernel_env, tmp_path / "work") as (km, kc):
        nb = Notebook(km, kc)
        nb.send("%passthrough cli")
        first = nb.send("alpha one")
        assert (await nb.wait(first))["status"] == "ok" and "stand-in reply to: alpha one" in nb.text(first)
        await km.restart_kernel(now=False)
        await kc.wait_for_ready(timeout=60)
        again = nb.send("alpha one")  # the same cell run again: the conversation has it
        assert (await nb.wait(again))["status"] == "ok", nb.text(again)
        starts = [e for e in events(log) if e["event"] == "start"]
        if fails:
            assert "Could not resume cli with --continue --fail-resume (exited with status 1); started it fresh, " \
                   "and the prompt is typed." in nb.text(again)
            assert prompts(log) == ["alpha one", "alpha one"] and [e["resumed"] for e in starts] == [False, False]
        else:
            assert "Resumed cli after the kernel restart (--continue). This prompt was typed before the restart: " \
                   "it is in the conversation, so it is not typed again." in nb.text(again)
            assert prompts(log) == ["alpha one"] and [e["resumed"] for e in starts] == [False, True]
        nxt = nb.send("bravo two")  # still the CLI, not ACP
        assert (await nb.wait(nxt))["status"] == "ok" and "stand-in reply to: bravo two" in nb.text(nxt)
        assert prompts(log)[-1] == "bravo two"
