"""URL-mode elicitation in a real ACP kernel (jupyter_client) on the scripted agent:
advertised, shown by the turn widget with its host named and opened only by a
click (the page's custom message), completed through ``elicitation/complete``;
declined with a notice by a headless run and by a console; cancelled by an interrupt."""

from __future__ import annotations

import asyncio
import json
from html.parser import HTMLParser

from tests.hostile.render import live, live_html, render_html

from .conftest import KernelHarness, running_kernel, scripted_command

IMG = "<img src=x onerror=alert(1)>"
MESSAGE = f"Sign in {IMG} `a\nb` $x$ $$y$$ \\(z\\) at https://evil.example/"
URL = "http://127.0.0.1:9/signin?next=%2F&e=e1"


def _ask(eid: str = "e1", url: str = URL) -> dict:
    return {"request": {"method": "elicitation/create", "params": {
        "sessionId": "$SID", "mode": "url", "elicitationId": eid, "url": url, "message": MESSAGE}}}


def _complete(eid: str = "e1") -> dict:
    return {"send": {"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": eid}}}


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.hrefs += [v or "" for k, v in attrs if k == "href"]


def hrefs(html: str) -> list[str]:
    p = _Links()
    p.feed(html)
    return p.hrefs


def url_blocks(outputs: list[dict]) -> list[tuple[str, str, dict]]:
    """(comm id, block key, block state) of every url block the kernel sent, in order."""
    found = []
    for msg in outputs:
        if msg["msg_type"] in ("comm_open", "comm_msg"):
            state = (msg["content"].get("data") or {}).get("state") or {}
            for key, block in state.items():
                if key.startswith("b:") and isinstance(block, dict) and block.get("type") == "url":
                    found.append((msg["content"]["comm_id"], key, block))
    return found


def finals(res) -> list[dict]:
    return [m["content"]["data"] for m in res.outputs
            if m["msg_type"] in ("display_data", "update_display_data") and "text/plain" in m["content"]["data"]]


async def _agent(acp_kernel, tmp_path, actions: list) -> str:
    record = tmp_path / "wire.jsonl"
    scenario = {"record": str(record), "prompts": {"signin": actions}}
    res = await acp_kernel.execute(f"%agent --command {scripted_command(scenario)}")
    assert res.status == "ok", res.text()
    return str(record)


def _answers(record: str) -> list[dict]:
    """The client's answers to the agent's elicitation/create requests, from the wire recording."""
    lines = [json.loads(raw) for raw in open(record, encoding="utf-8")]
    asked = {json.dumps(m["agent_request"]["id"]) for m in lines
             if "agent_request" in m and m["agent_request"].get("method") == "elicitation/create"}
    return [m["result"] for m in lines if "result" in m and json.dumps(m.get("id")) in asked]


def _caps(record: str) -> dict:
    for raw in open(record, encoding="utf-8"):
        msg = json.loads(raw)
        if msg.get("method") == "initialize":
            return msg["params"]["clientCapabilities"]
    raise AssertionError("no initialize recorded")


async def test_the_widget_names_the_host_and_only_a_click_opens_then_the_agent_completes(acp_kernel, tmp_path):
    record = await _agent(acp_kernel, tmp_path, [_ask(), _complete(), {"chunk": "after"}])
    clicked = asyncio.get_running_loop().create_future()

    async def on_output(msg):
        for comm_id, key, block in url_blocks([msg]):
            if block.get("state") == "asking" and not clicked.done():
                clicked.set_result(block)
                # The page's click: it opens the window itself, then says so.
                acp_kernel.kc.shell_channel.send(acp_kernel.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {
                    "method": "custom", "content": {"type": "open", "block": key}}}))

    res = await acp_kernel.execute("signin", on_output=on_output, timeout=60)
    assert res.status == "ok" and clicked.done(), res.text()
    assert _caps(record)["elicitation"] == {"form": {}, "url": {}}
    assert _answers(record) == [{"action": "accept"}]
    shown = clicked.result()
    assert shown["host"] == "127.0.0.1" and shown["url"] == URL and shown["hostUnicode"] == ""
    assert shown["message"] == MESSAGE  # text: the page sets it with textContent
    assert 'RESULT {"action": "accept"}' in res.text()
    states = [b["state"] for _, _, b in url_blocks(res.outputs)]
    assert states[0] == "asking" and "completed" in states, states
    final = finals(res)[-1]
    assert "the agent says it is done" in final["text/plain"]
    md, html = final["text/markdown"], final["text/html"]
    assert "127.0.0.1" in md and live(md) == [] and live_html(html) == []
    assert hrefs(html) == [] and hrefs(render_html(md)) == []  # the address is text, never a link
    assert IMG not in html and IMG not in md


async def test_a_headless_run_declines_with_a_notice(acp_kernel, tmp_path):
    await _agent(acp_kernel, tmp_path, [_ask(), _complete()])
    res = await acp_kernel.execute("signin", allow_stdin=False, timeout=60)
    assert res.status == "ok"
    assert 'RESULT {"action": "decline"}' in res.text()
    assert "nobody can open a link here" in res.text() and "127.0.0.1" in res.text()
    assert url_blocks(res.outputs) == []


async def test_a_console_declines_with_a_notice(kernel_env, tmp_path):
    async with running_kernel(kernel_env, tmp_path / "work") as (km, kc):
        console = KernelHarness(km, kc)  # no widget manager: a console answers through stdin
        record = await _agent(console, tmp_path, [_ask()])
        res = await console.execute("signin", timeout=60)
    assert res.status == "ok" and _answers(record) == [{"action": "decline"}]
    assert "nobody can open a link here" in res.text() and url_blocks(res.outputs) == []


async def test_an_interrupt_cancels_a_page_waiting_for_a_click(acp_kernel, tmp_path):
    record = await _agent(acp_kernel, tmp_path, [_ask()])
    asking = asyncio.get_running_loop().create_future()

    async def on_output(msg):
        if not asking.done() and any(b.get("state") == "asking" for _, _, b in url_blocks([msg])):
            asking.set_result(None)

    cell = asyncio.ensure_future(acp_kernel.execute("signin", on_output=on_output, timeout=60))
    await asyncio.wait_for(asking, 60)
    await acp_kernel.km.interrupt_kernel()
    res = await asyncio.wait_for(cell, 120)
    assert _answers(record) == [{"action": "cancel"}]  # answered before the turn's end (the agent's chunk may come later)
    assert url_blocks(res.outputs)[-1][2]["state"] == "cancelled"
    assert "cancelled" in finals(res)[-1]["text/plain"]
