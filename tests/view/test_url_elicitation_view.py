"""A page to open (URL elicitation) in each view: the turn widget, the markdown views, the transcript."""

from __future__ import annotations

import asyncio
from html.parser import HTMLParser

from acp_kernel.client.turn import Turn
from acp_kernel.services import events as se
from acp_kernel.view import TERMINAL, RecordingSink, TurnOutput, TurnView, render_markdown
from tests.hostile.render import inert_data, live, math_openings, mistune_html, render_html

from .helpers import URL_MESSAGE, Frontend, url_prompt

URL = "http://127.0.0.1:9/signin?next=%2F&a=<b>"


def hrefs(html: str) -> list[str]:
    found: list[str] = []

    class Scan(HTMLParser):
        def handle_starttag(self, tag, attributes):
            found.extend(v or "" for k, v in attributes if k in ("href", "src"))

    Scan().feed(html)
    return found


def _model(frontend: Frontend) -> dict:
    (comm_id,) = frontend.opens("acp_kernel.view.turnwidget.TurnWidget")
    return frontend.models[comm_id]


async def _settle(view: TurnOutput) -> None:
    for _ in range(3):
        await asyncio.sleep(0)
    view.flush()


async def test_the_widget_names_the_host_opens_on_a_click_and_shows_the_completion(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    prompt = url_prompt(URL)
    turn.add(prompt)
    model = _model(frontend)
    block = model["b:0"]
    assert block == {"type": "url", "state": "asking", "host": "127.0.0.1", "hostUnicode": "",
                     "message": URL_MESSAGE.replace("\n", "\n"), "url": URL}  # text: the page sets textContent
    # Only a known kind of click on this block answers; a second click does nothing.
    view._on_widget_msg(view.widget, {"type": "submit", "block": "b:0", "values": {}}, [])
    view._on_widget_msg(view.widget, {"type": "open", "block": "b:9"}, [])
    assert not prompt.done
    await asyncio.to_thread(view._on_widget_msg, view.widget, {"type": "open", "block": "b:0"}, [])
    view._on_widget_msg(view.widget, {"type": "decline", "block": "b:0"}, [])
    assert await asyncio.wait_for(prompt.future, 1) == {"action": "accept"}
    await _settle(view)
    assert model["b:0"]["state"] == "opened"
    prompt.completed = True
    turn.add(se.ElicitationCompleted("s1", "e1", prompt))
    await _settle(view)
    assert model["b:0"]["state"] == "completed" and model["count"] == 1  # the same block, not a new line
    turn.finish("end_turn")
    static = sink.outputs()[0]
    assert inert_data(static) == [], inert_data(static)
    md, html = static["text/markdown"], static["text/html"]
    assert "the agent says it is done" in md and "127.0.0.1" in md
    # The address is text everywhere: no link or source in the HTML or in the markdown's renderings.
    assert hrefs(html) == [] and hrefs(render_html(md)) == [] and hrefs(mistune_html(md)) == []
    assert "https://evil.example" not in md and "www.evil.example" not in md  # no bare address for GFM to link
    assert "https:&#47;&#47;evil.example" in md


async def test_an_idn_host_is_named_in_punycode_with_a_warning(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    TurnOutput(turn, sink)
    prompt = url_prompt("https://аррӏе.example/login", "xn--80ak6aa92e.example", "Sign in", "аррӏе.example")
    turn.add(prompt)
    block = _model(frontend)["b:0"]
    assert block["host"] == "xn--80ak6aa92e.example" and block["hostUnicode"] == "аррӏе.example"
    prompt.cancel()
    turn.finish("end_turn")
    md = sink.outputs()[0]["text/markdown"]
    assert "xn--80ak6aa92e.example" in md and "letters outside ASCII" in md and "→ *cancelled*" in md


async def test_a_view_without_the_widget_declines_at_once_naming_the_host():
    for make in (lambda t, s: TurnView(t, s), lambda t, s: TurnView(t, s, frontend=TERMINAL)):
        turn, sink = Turn("s1"), RecordingSink()
        view = make(turn, sink)
        prompt = url_prompt(URL)
        turn.add(prompt)
        assert await asyncio.wait_for(prompt.future, 1) == {"action": "decline"}
        turn.finish("end_turn")
        view.close()
        shown = "\n".join(d["text/plain"] for d in sink.outputs())
        assert "open a page on 127.0.0.1" in shown and "-> declined" in shown and "127.0.0.1:9/signin?next=%2F" in shown
        assert all(inert_data(d) == [] for d in sink.outputs())


async def test_the_transcript_is_inert_and_says_each_state():
    turn = Turn("s1")
    prompt = url_prompt(URL)
    turn.add(prompt)
    md = render_markdown(turn)
    assert "waiting: open it from the live output" in md
    prompt.open()
    await asyncio.sleep(0)
    assert "opened in a new tab" in render_markdown(turn)
    prompt.completed = True
    turn.add(se.ElicitationCompleted("s1", "e1", prompt))
    turn.finish("end_turn")
    md = render_markdown(turn)
    assert "the agent says it is done" in md and "says the page on" not in md  # said once, on its own line
    assert live(md) == [] and math_openings(md) == [] and hrefs(render_html(md)) == []
