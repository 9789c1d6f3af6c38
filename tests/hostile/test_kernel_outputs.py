"""A hostile agent against the real ACP kernel (jupyter_client) and the magics:
every route an agent string takes into a cell's outputs.

Text, thoughts, tool titles, paths, plans, stderr, error messages, session
titles, mode and model names, login method names and replayed history all
carry payloads; each output's markdown is rendered by a CommonMark parser
with raw HTML on and by nbconvert's mistune and must have nothing live,
give JupyterLab's math pre-pass nothing (no ``$``, no backslash) and sit,
with its HTML, inside the element MathJax skips; plain text has no escapes.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.hostile.render import inert_data, render_html, visible_text
from tests.kernel.conftest import acp_kernel, kernel_env, kernelspec_path, scripted_command  # noqa: F401

PAY = (
    "`a\nb` <img src=x onerror=alert(1)> <script>alert(2)</script> [x](javascript:alert(3)) "
    "![leak](http://127.0.0.1:9/leak.png?secret=1) <details open ontoggle=alert(4)> "
    "\x1b]52;c;ZXZpbA==\x07\x1b[2J "
    # JupyterLab's math pre-pass: it would eat the code span's closing backtick and let the img through
    "Try `<img src=x onerror=alert(8)>\\\\(` then \\\\) $x$ $\\style{background-color:red}{x}$ \\$5 and \\$6 "
    "@@0@@ \\begin{x}y\\end{x} \\\\[z\\\\]"
)
LINE = "<img src=x onerror=alert(5)> `x $y$ \\\\( @@0@@"  # for one-line fields
PATH = "/tmp/evil\n# heading\n<img src=x onerror=alert(6)>.py"


def chunk(kind: str, text: str) -> dict:
    return {"update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}}}


SCENARIO = {
    "init": {"agentInfo": {"name": LINE, "title": LINE, "version": LINE}},
    "load": True,
    "new_session": {
        "modes": {"currentModeId": LINE, "availableModes": [{"id": LINE, "name": LINE}, {"id": "ok", "name": "ok"}]},
        "configOptions": [{"id": "model", "name": LINE, "category": "model", "type": "select",
                           "currentValue": LINE, "options": [{"value": LINE, "name": LINE}]}],
    },
    "responses": {
        "session/list": {"sessions": [{"sessionId": LINE, "cwd": "/tmp", "title": PAY, "updatedAt": LINE}]},
        "session/set_mode": {},
    },
    "history": [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": PAY}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": PAY}},
    ],
    "prompts": {
        "fail": [{"reply_prompt": {"error": {"code": -32603, "message": PAY, "data": {"detail": PAY}}}}],
    },
    "prompt": [
        chunk("agent_message_chunk", PAY + "\n\n"),
        chunk("agent_thought_chunk", PAY),
        {"update": {"sessionUpdate": "tool_call", "toolCallId": LINE, "title": PAY, "kind": "edit",
                    "status": "completed", "locations": [{"path": PATH, "line": 1}],
                    "rawInput": {"command": PAY},
                    "content": [{"type": "content", "content": {"type": "text", "text": PAY}},
                                {"type": "diff", "path": PATH, "oldText": PAY, "newText": "x"}]}},
        {"update": {"sessionUpdate": "plan", "entries": [{"content": PAY, "status": "in_progress", "priority": "high"}]}},
        {"update": {"sessionUpdate": "available_commands_update",
                    "availableCommands": [{"name": "pwn", "description": PAY, "input": {"hint": LINE}}]}},
        {"update": {"sessionUpdate": "session_info_update", "title": PAY}},
        {"update": {"sessionUpdate": "x_unknown<img src=x onerror=alert(7)>", "value": PAY}},
        {"stderr": PAY},
        {"raw": PAY},
        chunk("agent_message_chunk", "done"),
    ],
}


def assert_inert(result) -> None:
    """Every display in the cell, in every MIME type (:func:`tests.hostile.render.inert_data`), and its error."""
    seen = 0
    for msg in result.outputs:
        content = msg["content"]
        if msg["msg_type"] == "stream":
            assert "\x1b]52" not in content["text"]
            continue
        if msg["msg_type"] == "error":  # shown as text (ANSI colours allowed): no escape sequence of the agent's
            seen += 1
            assert not any("\x1b" in line or "\x07" in line for line in content["traceback"]), content
            continue
        data = content.get("data", {})
        if "text/markdown" in data:
            seen += 1
            assert "text/html" in data, data  # what JupyterLab, nbconvert and VS Code render
        assert inert_data(data) == [], (data, inert_data(data))
    assert seen, "the cell showed nothing (no markdown, no error)"


@pytest.mark.slow
async def test_every_kernel_output_route_is_inert(acp_kernel):  # noqa: F811
    k = acp_kernel
    assert (await k.execute(f"%agent --command {scripted_command(SCENARIO)}")).status == "ok"
    assert (await k.execute("%permissions allow-all")).status == "ok"
    res = await k.execute("hello")
    assert res.status == "ok"
    assert_inert(res)
    page = render_html("\n\n".join(
        m["content"]["data"]["text/markdown"] for m in res.outputs if "text/markdown" in m["content"].get("data", {})))
    assert "onerror=alert(1)" in page and "done" in page  # shown as text, not dropped
    shown = " ".join(visible_text(m["content"]["data"]["text/html"]) for m in res.outputs
                     if "text/html" in m["content"].get("data", {}))
    # The agent's markdown as CommonMark reads it (a code span, then an escaped backslash), never math:
    assert "Try <img src=x onerror=alert(8)>\\\\( then \\) $x$" in shown

    reply = await k.kc.inspect("/pwn", 4, reply=True)  # a completion tooltip: the agent's description and hint
    assert reply["content"]["found"]
    assert inert_data(reply["content"]["data"]) == []
    assert "$x$" in visible_text(reply["content"]["data"]["text/html"])

    for cell in ("%status", "%mode", "%model", "%config", "%sessions", f"%mode {LINE}", "fail"):
        res = await k.execute(cell)
        assert_inert(res)
    res = await k.execute("%load " + json.dumps("sess-1"))
    assert_inert(res)
    assert "earlier prompts" in res.text() or "Resumed" in res.text()


@pytest.mark.slow
async def test_login_methods_and_start_errors_are_inert(acp_kernel, tmp_path):  # noqa: F811
    k = acp_kernel
    scenario = {
        "init": {"authMethods": [{"id": LINE, "name": PAY, "description": PAY},
                                 {"id": "t", "name": LINE, "type": "terminal", "args": [PAY]},
                                 {"id": "e", "name": LINE, "type": "env_var", "vars": [{"name": LINE}], "link": PAY}]},
        "new_session": {"error": {"code": -32000, "message": PAY}},
    }
    await k.execute(f"%agent --command {scripted_command(scenario)}")
    res = await k.execute("hello")
    assert res.status == "error"
    assert_inert(res)
    crash = {"init_actions": [{"stderr": PAY}, {"exit": 3}]}
    await k.execute(f"%agent --command {scripted_command(crash)}")
    res = await k.execute("hello")
    assert res.status == "error"
    assert_inert(res)


@pytest.mark.slow
async def test_two_messages_of_one_turn_are_two_paragraphs_and_stay_inert(acp_kernel):  # noqa: F811
    """ACP v1's messageId: a changed id is a new message. Hostile text in both, through the kernel's
    every output, then JupyterLab's reading of the text/html the turn leaves."""
    def said(text: str, mid: str) -> dict:
        return {"update": {"sessionUpdate": "agent_message_chunk", "messageId": mid,
                           "content": {"type": "text", "text": text}}}

    scenario = {"prompt": [said(PAY + " " + PATH + " END-OF-FIRST", "m1"), said("START-OF-SECOND ", "m2"),
                           said(PAY, "m2")]}
    k = acp_kernel
    assert (await k.execute(f"%agent --command {scripted_command(scenario)}")).status == "ok"
    res = await k.execute("hello")
    assert res.status == "ok"
    assert_inert(res)
    html = [m["content"]["data"]["text/html"] for m in res.outputs if "text/html" in m["content"].get("data", {})][-1]
    shown = visible_text(html)
    assert "END-OF-FIRST" in shown and "START-OF-SECOND" in shown
    assert re.search(r"END-OF-FIRST\s*</p>\s*<p>\s*START-OF-SECOND", html), html  # two paragraphs, not one run
