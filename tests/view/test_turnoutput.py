"""One turn, one output: a real Turn through TurnOutput into a RecordingSink and a recording widget frontend."""

from __future__ import annotations

import asyncio
import time

import pytest

from acp_kernel.client.turn import Notice, Turn
from acp_kernel.services import events as se
from acp_kernel.view import TERMINAL, RecordingSink, TurnOutput, TurnView, view_for
from acp_kernel.view import turnoutput
from tests.hostile.render import inert_data, live, live_html

from .helpers import (
    FakeTerminal,
    Frontend,
    elicitation_prompt,
    permission_prompt,
    plan,
    terminal_started,
    text,
    thought,
    tool_call,
    tool_update,
)

WIDGET = "application/vnd.jupyter.widget-view+json"
TURN_WIDGET = "acp_kernel.view.turnwidget.TurnWidget"
IMG = "<img src=x onerror=alert(1)>"
SPAN = "`a\nb` <img src=x onerror=alert(2)>"
NL_PATH = "/tmp/a\n# not a heading.py"


def _scan(html: str) -> tuple[set[str], set[str]]:
    from html.parser import HTMLParser

    seen: tuple[set[str], set[str]] = (set(), set())

    class Scan(HTMLParser):
        def handle_starttag(self, tag, attributes):
            seen[0].add(tag)
            seen[1].update(name for name, _ in attributes)

    Scan().feed(html)
    return seen


def tags(html: str) -> set[str]:
    return _scan(html)[0]


def attrs(html: str) -> set[str]:
    return _scan(html)[1]


def model_of(frontend: Frontend) -> dict:
    (comm_id,) = frontend.opens(TURN_WIDGET)
    return frontend.models[comm_id]


def blocks(model: dict) -> list[dict]:
    return [model[f"b:{i}"] for i in range(model["count"])]


async def test_a_turn_is_one_output_with_ordered_blocks_and_a_complete_fallback(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    view = view_for(turn, sink)
    assert isinstance(view, TurnOutput)
    turn.apply_update(text("Looking around.\n\n"))
    turn.apply_update(thought("hmm"))
    turn.apply_update(tool_call("t1", "Read README.md", "read", "in_progress"))
    turn.apply_update(tool_update("t1", status="completed", content=[
        {"type": "content", "content": {"type": "text", "text": "# My project\nline two\n```\nfence\n"}}]))
    turn.apply_update(plan(("read", "completed"), ("write", "pending")))
    turn.apply_update(text("All done."))
    view.flush()
    assert WIDGET in sink.outputs()[0]  # live: one widget
    kinds = [b["type"] for b in blocks(model_of(frontend))]
    assert kinds == ["text", "thought", "tool", "plan", "text"]
    turn.finish("end_turn")
    outs = sink.outputs()
    assert len(outs) == 1 and WIDGET not in outs[0]  # one output, updated in place: finished, static
    assert {m.display_id for m in sink.messages} == {view.display_id}
    (comm_id,) = frontend.opens(TURN_WIDGET)
    assert [kind for kind, cid, _ in frontend.messages if cid == comm_id][-1] == "comm_close"
    html = outs[0]["text/html"]
    assert html.count("<details") == 2 and "<summary" in html  # the thought and the tool call fold
    assert html.index("Looking around.") < html.index("Read README.md") < html.index("All done.") < html.index("Done")
    assert live_html(html) == [], live_html(html)
    md = outs[0]["text/markdown"]
    # The saved transcript: tool output in a fence longer than any inside, the heading stays code.
    assert "````text\n# My project\nline two\n```\nfence\n````" in md
    assert "- [x] read" in md and "- [ ] write" in md
    assert md.index("Looking around.") < md.index("Read README.md") < md.index("All done.") < md.index("<sub>Done")
    assert "Looking around." in outs[0]["text/plain"] and "Done" in outs[0]["text/plain"]
    assert live(md) == []


async def test_the_end_replaces_the_widget_without_syncing_its_blocks_first(frontend: Frontend):
    """Blocks changed since the last sync are not sent to a widget that the static output
    replaces at once (for a fast turn of many tool calls that sync was a quarter of its time);
    the static output has them all."""
    turn, sink = Turn("s1"), RecordingSink()
    view = view_for(turn, sink)
    turn.apply_update(text("first <b>words</b>\n\n"))
    view.flush()
    (comm_id,) = frontend.opens(TURN_WIDGET)
    synced = len(frontend.sent(comm_id, "update"))
    for i in range(50):
        turn.apply_update(tool_call(f"t{i}", f"Read {IMG}{i}.py", "read", "in_progress"))
        turn.apply_update(tool_update(f"t{i}", status="completed"))
    turn.apply_update(text("last words"))
    turn.finish("end_turn")
    # The rate limit held them back, and the end did not send them: only the husk the widget
    # leaves (its blocks emptied, turnwidget.retire) follows.
    (husk,) = frontend.sent(comm_id, "update")[synced:]
    assert husk["state"].pop("count") == 0 and set(husk["state"].values()) == {None}, husk
    assert [kind for kind, cid, _ in frontend.messages if cid == comm_id][-1] == "comm_close"
    html = sink.outputs()[0]["text/html"]
    assert html.count("<details") == 50 and html.index("first") < html.index("Read") < html.index("last words")
    assert live_html(html) == [], live_html(html)


async def test_only_changed_blocks_travel_and_completed_text_is_sent_once(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    for i in range(300):
        turn.apply_update(text(f"Step {i} paragraph.\n\n"))
        turn.apply_update(tool_call(f"t{i}", f"Search {i}", "search", "completed"))
        view.flush()
    comm_id = view.widget.comm.comm_id
    before = len(frontend.sent(comm_id, "update"))
    turn.apply_update(tool_update("t42", status="failed"))  # block 85: out of the page's window (the last 120 of 600)
    turn.apply_update(tool_update("t280", status="failed"))  # block 561: in it
    view.flush()
    (update,) = frontend.sent(comm_id, "update")[before:]
    assert sorted(update["state"]) == ["b:561", "count"] and update["state"]["b:561"]["status"] == "failed"
    assert update["state"]["count"] == 600 and model_of(frontend)["b:85"]["status"] == "completed"  # (deferred)
    # "Show N earlier": the page raises `shown`; the deferred block it brings in is sent then, alone.
    before = len(frontend.sent(comm_id, "update"))
    view.widget.shown = 240
    blocks_sent = [u["state"] for u in frontend.sent(comm_id, "update")[before:] if "count" in u["state"]]
    assert blocks_sent == [] and model_of(frontend)["b:85"]["status"] == "completed"  # 85 is still out of 240
    view.widget.shown = 600
    (update,) = [u["state"] for u in frontend.sent(comm_id, "update")[before:] if "count" in u["state"]]
    assert sorted(update) == ["b:85", "count"] and model_of(frontend)["b:85"]["status"] == "failed"
    turn.finish("end_turn")
    sent = [k for u in frontend.sent(comm_id, "update") for k in u["state"] if k.startswith("b:")]
    assert len(sent) <= 2 * 601 + 5  # each block about once (a tool call's settle may add one), never the run
    # The fallback is rebuilt at most every FALLBACK_INTERVAL (no loop timer here: only at the end).
    assert len(sink.messages) <= 3


async def test_terminal_output_streams_as_deltas_with_colours_and_no_osc(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    term = FakeTerminal()
    turn.add(terminal_started("term-1", term))
    turn.apply_update(tool_call("t1", "Run tests", "execute", content=[{"type": "terminal", "terminalId": "term-1"}]))
    term.emit("\x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ half\x1b[3")
    view.flush()
    term.emit("2mgreen\x1b[0m\n")
    view.flush()
    comm_id = view.widget.comm.comm_id
    deltas = [m["content"]["data"] for m in frontend.sent(comm_id, "custom") if m["content"]["type"] == "term"]
    assert "".join(deltas) == "\x1b[31mred\x1b[0m link half\x1b[32mgreen\x1b[0m\n"
    assert all("\x1b]" not in d and "evil" not in d for d in deltas)
    term.exit(0)
    turn.add(se.TerminalExited("s1", "term-1", term.exit_status, "exited"))
    turn.apply_update(tool_update("t1", status="completed"))
    view.flush()
    row = model_of(frontend)["b:0"]
    assert row["terminals"][0]["output"].startswith("\x1b[31mred") and "evil" not in row["terminals"][0]["output"]
    turn.finish("end_turn")
    md = sink.outputs()[0]["text/markdown"]
    assert "\x1b" not in md and "red link half" in md


async def test_permission_is_answered_inside_the_output(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    turn.apply_update(tool_call("t1", f"Run {IMG}", "execute", "pending", rawInput={"command": "rm -rf build"}))
    prompt = permission_prompt(title=f"Run {IMG}")
    turn.add(prompt)
    model = model_of(frontend)
    block = next(b for b in blocks(model) if b["type"] == "permission")
    assert block["state"] == "asking" and [o["name"] for o in block["options"]] == ["Allow once", "Always allow", "Reject"]
    assert block["detail"] == "rm -rf build" and block["title"] == f"Run {IMG}"  # text: the page sets textContent
    key = f"b:{blocks(model).index(block)}"
    # A click from the page, on a comm thread; an unknown option and a second click do nothing.
    view._on_widget_msg(view.widget, {"type": "answer", "block": key, "option": "nope"}, [])
    assert not prompt.done
    await asyncio.to_thread(view._on_widget_msg, view.widget, {"type": "answer", "block": key, "option": "abort"}, [])
    view._on_widget_msg(view.widget, {"type": "answer", "block": key, "option": "approve"}, [])
    assert await asyncio.wait_for(prompt.future, 1) == "abort"
    for _ in range(3):
        await asyncio.sleep(0)
    assert model[key]["state"] == "answered" and model[key]["chosen"] == "Reject"
    turn.add(se.PermissionResolved("s1", "t1", prompt.title, "abort", "reject_once", "user"))
    turn.finish("end_turn")
    md = sink.outputs()[0]["text/markdown"]
    assert md.count("Permission") == 1 and "→ chose **Reject**" in md and live(md) == []


async def test_a_question_far_back_still_travels_and_the_window_is_what_a_long_turn_sends(frontend: Frontend):
    """An unpaced turn's refresh sends only the page's window (its last ``shown`` blocks) and
    the count, not every block it made (the question at step 900 waited behind 426 KB of
    state); a question is always sent, its answer too once 200 blocks have come after it."""
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    view.flush()
    # The 10 Hz refresh's clock stands still: on a slow machine the loop below outlasted an
    # interval and a refresh from within it sent that moment's window (CI saw blocks 1-50).
    now = time.monotonic()
    view._ticker._clock = lambda: now
    for i in range(150):
        turn.apply_update(text(f"Step {i}: `a\nb` $x$ {IMG}\n\n"))
        turn.apply_update(tool_call(f"t{i}", f"Read {NL_PATH}{i}", "read", "completed"))
    prompt = permission_prompt(title=f"Run {IMG}")
    turn.add(prompt)  # the question: sent at once, with the window before it
    model = model_of(frontend)
    question = f"b:{model['count'] - 1}"
    assert model["count"] == 301 and model[question]["state"] == "asking"
    # The first words went at once (the first refresh); then the window, not the 180 blocks before it.
    assert sorted(int(k[2:]) for k in model if k.startswith("b:")) == [0, *range(301 - 120, 301)]
    for i in range(150, 250):
        turn.apply_update(text(f"Step {i}.\n\n"))
        turn.apply_update(tool_call(f"t{i}", f"Read {i}", "read", "completed"))
    view.flush()
    view._on_widget_msg(view.widget, {"type": "answer", "block": question, "option": "approve"}, [])
    assert await asyncio.wait_for(prompt.future, 1) == "approve"
    for _ in range(3):
        await asyncio.sleep(0)
    assert model[question]["state"] == "answered" and model["count"] == 501  # 200 blocks after it: still sent
    turn.finish("end_turn")
    html = sink.outputs()[0]["text/html"]
    assert "Step 0:" in html and "Step 249." in html and live_html(html) == []  # the record has them all


async def test_show_earlier_said_in_a_message_sends_the_held_back_blocks(frontend: Frontend):
    """"Show N earlier" also says the new window in a message (a synced change waits for the
    kernel to go idle): the blocks held back that it brings in are sent at once; a value that
    is not a positive int within MAX_SHOWN does nothing."""
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    for i in range(150):
        turn.apply_update(tool_call(f"t{i}", f"Read {NL_PATH}{i} {IMG}", "read", "in_progress"))
        view.flush()
    turn.apply_update(tool_update("t3", status="completed"))  # out of the window: held back
    view.flush()
    model = model_of(frontend)
    assert model["count"] == 150 and model["b:3"]["status"] == "in_progress"
    for bad in (True, "400", -1, 0, turnoutput.MAX_SHOWN + 1, 2.5e2, None):
        view._on_widget_msg(view.widget, {"type": "shown", "shown": bad}, [])
    assert model["b:3"]["status"] == "in_progress"
    view._on_widget_msg(view.widget, {"type": "shown", "shown": 220}, [])
    assert model["b:3"]["status"] == "completed"
    assert model["b:3"]["title"] == f"Read {NL_PATH}3 {IMG}".replace("\n", "\u240a")  # one line, HTML as text
    turn.finish("end_turn")


async def test_a_waiting_question_is_not_drawn_over_by_the_fallback(frontend: Frontend):
    """The question's state goes at once; the fallback is not rebuilt while it waits (issue 25:
    the page relayed, parsed and drew the whole turn again first, or under the reader's click)
    and follows the answer, with it."""
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    for i in range(30):
        turn.apply_update(text(f"Step {i}: `a\nb` $x$ <img src=x onerror=alert(1)>\n\n"))
        turn.apply_update(tool_call(f"t{i}", f"Read dir/\nfile{i}", "read", "completed"))
    before = len(sink.messages)
    prompt = permission_prompt(title=f"Run {IMG} `x\ny` $z$")
    turn.add(prompt)
    model = model_of(frontend)
    (asking,) = [k for k, b in model.items() if k.startswith("b:") and b.get("type") == "permission"]
    assert model[asking]["state"] == "asking"  # drawn now
    turn.apply_update(text("More text while it waits.\n\n"))
    view._fallback_due()  # the fallback's timer, come while the question waits: nothing is sent
    assert len(sink.messages) == before
    answered = asyncio.Event()
    sink.listeners.append(lambda m: answered.set() if "chose Reject" in m.data.get("text/plain", "") else None)
    view._on_widget_msg(view.widget, {"type": "answer", "block": asking, "option": "abort"}, [])
    await asyncio.wait_for(answered.wait(), 5)
    (update,) = sink.messages[before:]
    assert update.kind == "update" and f"Run {IMG}" in update.data["text/plain"]
    assert inert_data(update.data) == []
    turn.finish("end_turn")


async def test_form_starts_with_required_choices_unset_and_validates(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    prompt = elicitation_prompt()
    prompt.fields["license"]["title"] = "License"
    prompt.required.append("license")
    turn.add(prompt)
    model = model_of(frontend)
    key = "b:0"
    fields = {f["name"]: f for f in model[key]["fields"]}
    assert fields["license"]["value"] is None and fields["license"]["required"]  # no pre-set answer
    assert "<b>" not in model[key]["html"] and "&lt;b&gt;" in model[key]["html"]
    view._on_widget_msg(view.widget, {"type": "submit", "block": key, "values": {"name": "x", "count": 3, "license": None}}, [])
    await asyncio.sleep(0)
    view.flush()
    assert not prompt.done
    assert model[key]["errors"] == ["Project name needs at least 2 characters", "License is required"]
    values = {"name": "demo", "count": 3, "ratio": None, "public": True, "license": 1, "tags": [0, 2]}
    await asyncio.to_thread(view._on_widget_msg, view.widget, {"type": "submit", "block": key, "values": values}, [])
    outcome = await asyncio.wait_for(prompt.future, 1)
    assert outcome["content"] == {"name": "demo", "count": 3, "public": True, "license": "Apache-2.0", "tags": ["a", "c"]}
    for _ in range(3):
        await asyncio.sleep(0)
    view.flush()
    assert model[key]["state"] == "submitted"
    turn.finish("end_turn")
    assert "Apache-2.0" in sink.outputs()[0]["text/plain"]


async def test_hostile_strings_in_every_block(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    assert {"tex2jax_ignore", "mathjax_ignore"} <= set(view.widget._dom_classes)  # MathJax skips the view
    turn.apply_update(text(f"text {IMG} {SPAN} ![leak](http://leak.example/x.png?secret=1)\n\n"))
    turn.apply_update(thought(f"thinking {IMG}"))
    turn.apply_update(tool_call("t1", f"Edit {IMG}", "edit", "completed", locations=[{"path": NL_PATH}], content=[
        {"type": "diff", "path": NL_PATH, "oldText": "a\n", "newText": f"{IMG}\n"},
        {"type": "content", "content": {"type": "text", "text": f"# result {IMG}\n{SPAN}"}}]))
    turn.apply_update(plan((f"plan {IMG}", "pending")))
    turn.add(Notice("warning", f"careful {IMG}\n{SPAN}"))
    turn.add(se.FileWritten("s1", NL_PATH, 3, True))
    view.flush()
    model = dict(model_of(frontend))
    turn.finish("end_turn")
    static = sink.outputs()[0]
    assert WIDGET not in static and inert_data(static) == [], inert_data(static)
    assert "&lt;img src=x" in static["text/html"] and "<img" not in static["text/html"]
    html = model["b:0"]["html"]
    assert "<img" not in html and "&lt;img src=x" in html and "http://leak.example" in html  # the URL only in data-src
    assert 'class="acp-img"' in html and "leak.example: click to load" in html
    assert html.startswith('<div class="tex2jax_ignore mathjax_ignore" style="contain: style">')  # MathJax skips it
    assert tags(html) <= {"div", "p", "code", "span"} and not any(a in ("src", "href") or a.startswith("on") for a in attrs(html))
    row = model["b:2"]
    assert row["title"] == f"Edit {IMG}" and row["locations"] == ["/tmp/a␊# not a heading.py"]
    assert row["diffs"][0]["path"] == "/tmp/a␊# not a heading.py"
    md = sink.outputs()[0]["text/markdown"]
    assert live(md) == [], live(md)
    assert "(image from leak.example)" in md
    assert "\n# result" in md and "```text\n# result" in md  # inside a code block


async def test_the_status_line_reads_as_words_and_the_turn_ends_cancelled_cleanly(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    TurnOutput(turn, sink)
    turn.apply_update({"sessionUpdate": "usage_update", "used": 40, "size": 1000, "cost": {"amount": 0, "currency": "USD"}})
    turn.apply_update({"sessionUpdate": "current_mode_update", "currentModeId": "code"})
    turn.finish("cancelled")
    status = sink.outputs()[0]["text/plain"].splitlines()[-1]
    assert status.startswith("Cancelled · 40/1,000 tokens · $0.00 · code mode · ")


async def test_terminal_frontends_keep_the_append_only_view():
    turn, sink = Turn("s1"), RecordingSink()
    view = view_for(turn, sink, frontend=TERMINAL)
    assert isinstance(view, TurnView)
    turn.apply_update(text("hello\n\n"))
    turn.finish("end_turn")
    assert not sink.updates() and "hello" in sink.outputs()[0]["text/plain"]


@pytest.mark.parametrize("name", ["NOTEBOOK", "HEADLESS", "TERMINAL", "UNSEEN", "PIPED"])
async def test_a_frontend_with_widgets_always_gets_the_widget_view(name, frontend):
    """Why TurnView has no widget mode: every frontend the front-ends make
    (view.frontend's and the magics' own) that shows widgets also applies
    updates, and those get TurnOutput."""
    from acp_kernel.frontends import api
    from acp_kernel.view import frontend as fe

    chosen = getattr(fe, name, None) or getattr(api, name)
    view = view_for(Turn("s1"), RecordingSink(), frontend=chosen, widgets=chosen.widgets)
    assert isinstance(view, TurnOutput) == chosen.widgets
    view.close()


async def test_the_fallback_follows_block_boundaries_at_a_bounded_rate(frontend: Frontend, monkeypatch):
    monkeypatch.setattr(turnoutput, "FALLBACK_INTERVAL", 0.05)
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    updated = asyncio.Event()
    sink.listeners.append(lambda m: updated.set() if m.kind == "update" else None)
    turn.apply_update(tool_call("t1", "Read a", "read", "completed"))
    turn.apply_update(text("middle\n\n"))
    view.flush()
    await asyncio.wait_for(updated.wait(), 5)
    assert "Read a" in sink.outputs()[0]["text/markdown"]
    turn.finish("end_turn")


async def test_a_big_fallback_is_rebuilt_only_once_it_has_doubled(frontend: Frontend, monkeypatch):
    """Past FALLBACK_BIG characters the transcript goes again only when it has doubled (or is
    FALLBACK_STALE seconds old): rebuilt every interval, a long turn sent all of it each time."""
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    para = f"{IMG} {SPAN} $x$ {NL_PATH} " + "words " * 1_600 + "\n\n"  # about 10 KB, completed
    sent = []

    def grow(paragraphs: int) -> None:
        for _ in range(paragraphs):
            turn.apply_update(text(para))
        view.flush()
        before = len(sink.updates())
        view._update_fallback()  # what the fallback's timer calls
        sent.append(len(sink.updates()) - before)

    grow(2)  # small: every rebuild goes
    grow(1)
    grow(6)  # past FALLBACK_BIG (md and text: about 2 x 90 KB): goes
    grow(2)  # 110 of 90 KB: held back
    grow(7)  # 180 of 90: doubled, goes
    grow(1)
    assert sent == [1, 1, 1, 0, 1, 0], sent
    monkeypatch.setattr(turnoutput, "FALLBACK_STALE", 0.0)
    grow(1)  # stale: goes however little it grew
    assert sent[-1] == 1
    turn.finish("end_turn")
    out = sink.outputs()[0]
    assert out["text/markdown"].count("words words") >= 20 and live(out["text/markdown"]) == []
    assert live_html(out["text/html"]) == []


async def test_a_long_live_fallback_keeps_its_markdown_and_text_bounded_and_its_html_whole(frontend: Frontend):
    """The live fallback's markdown and text are bounded as the finished turn's are
    (finished.capped): the start and the end, one line between; its HTML has every block."""
    from acp_kernel.view.finished import FORM_LIMIT

    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    for i in range(40):  # about 200 KB of hostile paragraphs, a tool call after each
        turn.apply_update(text(f"para {i} {IMG} {SPAN} $x$ \\(y\\) {NL_PATH} " + "words " * 800 + "\n\n"))
        turn.apply_update(tool_call(f"t{i}", f"Read {NL_PATH} {IMG} {i}", "read", "completed"))
    view.flush()
    before = len(sink.updates())
    view._update_fallback()  # what the fallback's timer calls
    assert len(sink.updates()) == before + 1
    data = sink.updates()[-1].data
    assert WIDGET in data and all(f"para {i} " in data["text/html"] for i in range(40))
    for form in (data["text/markdown"], data["text/plain"]):
        assert len(form) <= FORM_LIMIT + 1_000
        assert form.count("characters of this turn are not kept") == 1
        assert form.index("para 0 ") < form.index("characters of this turn") < form.index("para 39 ")
    assert inert_data(data) == [] and live_html(data["text/html"]) == []
    turn.finish("end_turn")


async def test_a_cancelled_turn_leaves_no_stale_cancelling_line(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    TurnOutput(turn, sink)
    term = FakeTerminal()
    turn.add(terminal_started("term-1", term, argv=("sleep", "100")))
    turn.apply_update(tool_call("t1", "Run sleep", "execute", "in_progress", content=[{"type": "terminal", "terminalId": "term-1"}]))
    term.emit("started\n")
    turn.add(Notice("info", "cancelling...", key="cancelling"))  # as Session.cancel says it
    turn.finish("cancelled")
    lines = sink.outputs()[0]["text/plain"].splitlines()
    assert not any(line.endswith("cancelling...") for line in lines)
    # The call's parts in order: the command, its output, then the line saying it was stopped.
    assert lines == ["💻 Run sleep · ⊘ cancelled", "    $ sleep 100", "    started",
                     "    (no exit status: the call was cancelled)", "Cancel requested; the turn ended cancelled",
                     lines[-1]] and lines[-1].startswith("Cancelled")


async def test_the_static_end_keeps_the_rows_the_reader_opened_or_folded(frontend: Frontend):
    """The page says each open/fold in a message (the synced ``expanded`` can wait while the
    kernel is busy): the static output opens the rows as the reader left them, else as the
    live row did (a failed call open, a completed one folded)."""
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    body = [{"type": "content", "content": {"type": "text", "text": "body"}}]
    for tid, title, status in (("t1", "Read one", "completed"), ("t2", "Run two", "failed"),
                               ("t3", "Read three", "completed"), ("t4", "Run four", "failed")):
        turn.apply_update(tool_call(tid, title, "read", status, content=body))
    view.flush()
    view._on_widget_msg(view.widget, {"type": "expanded", "block": "b:0", "open": True}, [])
    await asyncio.to_thread(view._on_widget_msg, view.widget, {"type": "expanded", "block": "b:1", "open": False}, [])
    view._on_widget_msg(view.widget, {"type": "expanded", "block": "b:9", "open": True}, [])  # no such row
    view._on_widget_msg(view.widget, {"type": "expanded", "block": "b:2", "open": "yes"}, [])  # not a choice
    turn.finish("end_turn")
    html = sink.outputs()[0]["text/html"]
    opened = [line.split("<summary>")[1].split(" · ")[0] for line in html.split("\n") if "<details open>" in line]
    folded = [line.split("<summary>")[1].split(" · ")[0] for line in html.split("\n") if "<details>" in line]
    assert opened == ["📖 Read one", "📖 Run four"] and folded == ["📖 Run two", "📖 Read three"], html


async def test_a_rows_detail_is_its_command_or_its_raw_input_until_its_content_says_more(frontend: Frontend):
    """The line under a tool call's title: the command its raw input holds, always; else the
    raw input as JSON, only while the call shows nothing of its own (made only then)."""
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    turn.apply_update(tool_call("t1", "Read", "read", rawInput={"path": NL_PATH, "why": IMG}))
    turn.apply_update(tool_call("t2", "Run", "execute", rawInput={"command": f"ls {SPAN}"}))
    view.flush()
    rows = model_of(frontend)
    assert '"path": "/tmp/a\\n# not a heading.py"' in rows["b:0"]["detail"] and IMG in rows["b:0"]["detail"]
    assert rows["b:1"]["detail"] == f"$ ls {SPAN}"
    content = [{"type": "content", "content": {"type": "text", "text": f"$x$ {IMG}"}}]
    for tid in ("t1", "t2"):
        turn.apply_update(tool_update(tid, status="completed", content=content))
    view.flush()
    rows = model_of(frontend)
    assert rows["b:0"]["detail"] == "" and rows["b:1"]["detail"] == f"$ ls {SPAN}"
    row = view.blocks[0].row
    # The JSON was made while the call was pending, not again once its content came.
    assert row._cache["detail"][0] == (1, "pending") and row._cache["command"] == ((2, "completed"), "")
    turn.finish("end_turn")


async def test_tool_calls_taken_in_runs_draw_what_they_draw_one_by_one(frontend: Frontend, monkeypatch):
    """The tool call events of one read reach the view in one call (``Turn.subscribe``'s
    ``runs``): the same rows live and the same saved output as when each update is taken on
    its own, hostile strings inert; a row that fails to draw is reported in the cell and the
    rest of the run is drawn."""
    import json
    import re

    from acp_kernel.protocol import framing

    content = [{"type": "content", "content": {"type": "text", "text": f"{SPAN} $x$ {IMG}"}},
               {"type": "terminal", "terminalId": "not-ours"}]
    ups = [tool_call("t1", f"Read {IMG}", "read", locations=[{"path": NL_PATH, "line": 2}],
                     rawInput={"command": f"cat {NL_PATH}"}),
           tool_call("t2", f"Run $x$ {SPAN}", "execute"),
           tool_update("t1", status="completed", content=content),
           tool_update("t2", status="failed", rawOutput={"exit_code": 3, "aggregated_output": f"{IMG}\n"})]
    lines = [json.dumps({"jsonrpc": "2.0", "method": "session/update",
                         "params": {"sessionId": "s1", "update": u}}).encode() for u in ups]
    got = []
    for how in ("one by one", "in runs"):
        turn, sink = Turn("s1"), RecordingSink()
        view = TurnOutput(turn, sink)
        if how == "in runs":
            run = [(*framing.tool_update(line), line) for line in lines]
            turn.apply_tools(run, 0, 2)
            turn.apply_tools(run, 2, 4)
        else:
            for u in ups:
                turn.apply_update(u)
        view.flush()
        live_rows = [{k: v for k, v in b.items()} for b in blocks(frontend.models[frontend.opens(TURN_WIDGET)[-1]])]
        turn.finish("end_turn")
        elapsed = re.compile(r"\d+\.\d s")  # the status line's time
        got.append((live_rows, {k: elapsed.sub("", v) for k, v in sink.outputs()[0].items()}))
    assert got[0] == got[1]
    rows, out = got[1]
    assert [r["status"] for r in rows if r["type"] == "tool"] == ["completed", "failed"]
    assert live_html(out["text/html"]) == [] and live(out["text/markdown"]) == []

    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    real = view._new_row

    def new_row(call):  # noqa: ANN001
        if call.id == "t1":
            raise RuntimeError(f"broken {IMG}")
        return real(call)

    monkeypatch.setattr(view, "_new_row", new_row)
    run = [(*framing.tool_update(line), line) for line in lines]
    turn.apply_tools(run, 0, 2)
    turn.finish("end_turn")
    out = sink.outputs()[0]
    assert "renderer error: RuntimeError: broken" in out["text/plain"] and "Run" in out["text/plain"]
    assert live_html(out["text/html"]) == []


async def test_once_a_page_shows_the_widget_the_fallback_goes_only_when_stale(frontend: Frontend, monkeypatch):
    """The fallback is for readers without the widget. Once a view on a page says it shows
    the widget (``{"type": "seen"}``, static/turnloader.js), the fallback is rebuilt only
    when FALLBACK_STALE seconds old (for a notebook saved meanwhile); the end is the same."""
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnOutput(turn, sink)
    para = f"{IMG} {SPAN} $x$ {NL_PATH} words\n\n"

    def step() -> int:
        turn.apply_update(text(para))
        turn.apply_update(tool_call(f"t{len(view.blocks)}", f"Read {NL_PATH} {IMG}", "read", "completed"))
        view.flush()
        before = len(sink.updates())
        view._update_fallback()  # what the fallback's timer calls
        return len(sink.updates()) - before

    assert step() == 1  # no page said it shows the widget: the fallback follows
    view.widget._handle_msg({"content": {"data": {"method": "custom", "content": {"type": "seen"}}}, "buffers": []})
    assert [step() for _ in range(5)] == [0] * 5
    monkeypatch.setattr(turnoutput, "FALLBACK_STALE", 0.0)
    assert step() == 1  # stale: it goes
    monkeypatch.setattr(turnoutput, "FALLBACK_STALE", 30.0)
    assert step() == 0
    turn.finish("end_turn")
    out = sink.outputs()[0]
    assert WIDGET not in out and out["text/markdown"].count("words") == 8
    assert inert_data(out) == [] and live_html(out["text/html"]) == []
