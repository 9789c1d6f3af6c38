"""A real Turn, fed raw ACP updates as an agent sends them, through a TurnView into a RecordingSink.

TurnView is the view without widgets (markdown displays, or append-only for
terminal frontends); the notebook's widget view is tests/view/test_turnoutput.py.
"""

from __future__ import annotations

import asyncio
import random
import time

from acp_kernel.services import events as se
from acp_kernel.client.turn import Notice, Turn
from acp_kernel.view import RecordingSink, TurnView, render_markdown
from tests.hostile.render import inert_data, live, render_html, visible_text
from acp_kernel.safe import unwrapped

from .helpers import (
    FakeTerminal,
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
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"


def response_chunks(n: int = 5000, size: int = 200, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    words = ["the", "agent", "streams", "markdown", "with", "`code`", "and", "**bold**", "text", "while", "it", "works", "on", "a", "task"]
    out = []
    for i in range(n):
        s = " ".join(rng.choice(words) for _ in range(40))[: size - 2]
        out.append(s + (".\n\n" if i % 7 == 6 else " "))
    return out


def row_state(view: TurnView, tool_call_id: str) -> dict:
    """A tool call's row state (what the turn widget draws; TurnOutput sends it)."""
    return view.rows[tool_call_id].state()


def text_messages(sink: RecordingSink, kind: str | None = None):
    return [
        m for m in sink.messages
        if (m.display_id or "").startswith("acp-text-") and (kind is None or m.kind == kind)
    ]


# -- traffic ----------------------------------------------------------------------


async def test_one_megabyte_in_5000_chunks_costs_about_twice_its_size():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    chunks = response_chunks()
    started = time.monotonic()
    for c in chunks:
        turn.apply_update(text(c))
    elapsed = time.monotonic() - started
    turn.finish("end_turn")
    size = sum(len(c.encode()) for c in chunks)
    assert size > 990_000
    # markdown + its HTML + plain text of each block, sent once: ~3x, never n^2.
    assert sink.total_bytes <= 3.3 * size
    # Tail updates are bounded by the rate, not by the 5,000 chunks.
    assert len(text_messages(sink, "update")) <= elapsed * 10 + 3
    assert view.closed
    assert "".join(chunks).split()[:50] == sink.markdown().split()[:50]


async def test_a_response_without_blank_lines_or_newlines_stays_linear():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    chunks = [c.replace("\n", " ") for c in response_chunks(2000)]
    for c in chunks:
        turn.apply_update(text(c))
    turn.finish("end_turn")
    assert sink.total_bytes <= 3.3 * sum(len(c) for c in chunks)  # markdown, HTML, plain: ~3x


async def test_tail_updates_follow_the_timer_not_the_chunks():
    """Chunks arrive in 12 bursts; each burst waits for the coalescing timer
    to flush it (awaited through the sink, no sleeping)."""
    turn, sink = Turn("s1"), RecordingSink()
    flushed = asyncio.Event()
    sink.listeners.append(lambda m: flushed.set())
    view = TurnView(turn, sink, rate_hz=50.0)
    turn.apply_update(text("start "))  # first chunk: shown at once
    assert len(sink.messages) == 1
    for burst in range(12):
        flushed.clear()
        for i in range(100):
            turn.apply_update(text(f"b{burst}w{i} " + ("\n\n" if i == 50 else "")))
        await asyncio.wait_for(flushed.wait(), 5)
    # 1,201 chunks; at most one flush per burst (a block display + a tail update each).
    assert len(sink.messages) <= 1 + 12 * 2
    assert len(text_messages(sink, "update")) <= 12 * 2
    view.close()
    outs = sink.outputs()
    joined = " ".join(unwrapped(o["text/markdown"]) for o in outs)
    assert joined.split() == ("start " + " ".join(f"b{b}w{i}" for b in range(12) for i in range(100))).split()


async def test_thoughts_are_one_collapsed_display_updated_in_place():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    for i in range(500):
        turn.apply_update(thought(f"hmm {i} {SCRIPT} "))
    turn.apply_update(text("Answer."))
    turn.finish("end_turn")
    outs = sink.outputs()
    assert unwrapped(outs[0]["text/markdown"]).startswith("<details><summary>Thinking</summary>")
    assert "hmm 499" in outs[0]["text/markdown"]
    assert live(outs[0]["text/markdown"]) == [] and "<script" not in outs[0]["text/html"]
    assert unwrapped(outs[1]["text/markdown"]) == "Answer."
    thought_ids = {m.display_id for m in sink.messages if (m.display_id or "").startswith("acp-thought")}
    assert len(thought_ids) == 1


# -- order ------------------------------------------------------------------------


async def test_outputs_follow_event_order_and_a_tool_call_closes_the_tail():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    turn.apply_update(text("Let me look "))
    turn.apply_update(text("at the code."))
    turn.apply_update(tool_call("t1", "Read main.py", "read", "in_progress"))
    turn.apply_update(text("Found it."))
    turn.apply_update(plan(("fix", "in_progress"), ("test", "pending")))
    turn.add(Notice("warning", "agent wrote to stdout"))
    turn.apply_update(tool_update("t1", status="completed"))  # in place, appends nothing
    turn.apply_update(text("Done."))
    turn.apply_update(plan(("fix", "completed"), ("test", "completed")))  # in place
    turn.finish("end_turn")
    kinds = []
    for o in sink.outputs():
        md = unwrapped(o.get("text/markdown", ""))
        if "Read main.py" in md:
            kinds.append("tool")
        elif md.startswith("**Plan**"):
            kinds.append("plan")
        elif "warning" in md:
            kinds.append("notice")
        elif md.startswith("<sub>"):
            kinds.append("status")
        else:
            kinds.append(md)
    assert kinds == ["Let me look at the code.", "tool", "Found it.", "plan", "notice", "Done.", "status"]
    plan_out = sink.outputs()[3]["text/markdown"]
    assert "- [x] fix" in plan_out and "- [x] test" in plan_out
    tool_out = sink.outputs()[1]
    assert "✓ done" in tool_out["text/markdown"] and "📖" in tool_out["text/plain"]


async def test_view_attached_late_replays_the_turn():
    turn, sink = Turn("s1"), RecordingSink()
    turn.apply_update(text("early\n\nwords"))
    turn.apply_update(tool_call("t1", "Search", "search"))
    view = TurnView(turn, sink)
    turn.apply_update(text("later"))
    view.close()
    view.close()  # idempotent
    md = [unwrapped(o.get("text/markdown") or "") for o in sink.outputs()]
    assert (md[0], md[1], md[3]) == ("early", "words", "later")
    assert "Search" in md[2] and WIDGET not in sink.outputs()[2]
    assert len(sink.outputs()) == 4  # the turn has not ended: no status line


async def test_unknown_updates_render_as_collapsed_raw_json():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    turn.apply_update({"sessionUpdate": "_vendor/thing", "payload": {"a": SCRIPT}})
    turn.apply_update("not even an object")
    turn.finish("end_turn")
    md = unwrapped(sink.outputs()[0]["text/markdown"])
    assert md.startswith("<details><summary>unknown update <code>_vendor/thing</code>")
    assert "```json" in md and '"payload"' in md
    assert "ignored a session/update" in sink.outputs()[1]["text/markdown"]


async def test_a_renderer_bug_never_reaches_the_connection():
    class Broken(RecordingSink):
        def display(self, data, metadata=None, display_id=None):
            if "text/markdown" in data and "boom" in data["text/markdown"]:
                raise RuntimeError("frontend gone")
            super().display(data, metadata, display_id)

    turn, sink = Turn("s1"), Broken()
    view = TurnView(turn, sink)
    turn.add(Notice("error", "boom"))  # must not raise
    turn.apply_update(text("still alive"))
    turn.finish("end_turn")
    assert view.errors == 1
    assert any("still alive" in o.get("text/markdown", "") for o in sink.outputs())


# -- tool calls -------------------------------------------------------------------


async def test_tool_call_row_state_and_markdown_after_completion_with_diff():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    turn.apply_update(tool_call("t1", f"Edit {IMG}", "edit", "pending", locations=[{"path": "/w/a.py", "line": 3}]))
    turn.apply_update(tool_update("t1", status="in_progress"))
    turn.apply_update(
        tool_update(
            "t1",
            status="completed",
            content=[
                {"type": "diff", "path": "/w/a.py", "oldText": "a\nb\n", "newText": f"a\n{SCRIPT}\n"},
                {"type": "content", "content": {"type": "text", "text": f"ok {IMG}"}},
            ],
        )
    )
    view.close()
    r = row_state(view, "t1")
    assert (r["status"], r["status_label"], r["kind"], r["icon"]) == ("completed", "✓ done", "edit", "✏️")
    assert r["title"] == f"Edit {IMG}"  # the state holds raw text; the JS sets textContent only
    assert r["locations"] == ["/w/a.py:3"]
    assert r["text"] == f"ok {IMG}"
    (diff,) = r["diffs"]
    assert diff["path"] == "/w/a.py" and diff["added"] == 1 and diff["removed"] == 1
    assert ["-", "-b"] in diff["lines"] and ["+", f"+{SCRIPT}"] in diff["lines"]
    # The row's display was updated to the final markdown.
    out = sink.outputs()[0]
    assert WIDGET not in out
    md = out["text/markdown"]
    assert "✓ done" in md and "```diff" in md and f"+{SCRIPT}" in md
    assert live(md) == []
    assert "ok &lt;img src=x onerror=alert(1)&gt;" in render_html(md)


async def test_terminal_output_is_final_in_the_row_state_and_its_display():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    term = FakeTerminal()
    term.emit("before subscribe\n")
    turn.add(terminal_started("term-1", term, ("pytest", "-q")))
    turn.apply_update(tool_call("t1", "Run tests", "execute", "in_progress", content=[{"type": "terminal", "terminalId": "term-1"}]))
    for i in range(200):
        term.emit(f"test {i} ok\n")
        if i % 50 == 49:
            view.flush()  # what the coalescing timer does, deterministically
    assert row_state(view, "t1")["terminals"][0]["live"] is True
    term.exit(0)
    turn.add(se.TerminalExited("s1", "term-1", term.exit_status, "exited"))
    turn.apply_update(tool_update("t1", status="completed"))
    turn.finish("end_turn")
    t = row_state(view, "t1")["terminals"][0]
    assert t["live"] is False and t["output"].startswith("before subscribe\n") and t["output"].endswith("test 199 ok\n")
    assert t["exit"].startswith("exit code 0") and t["command"] == "pytest -q"
    assert term.subscribers == 0  # unsubscribed at the end; output kept in the row state
    md, page = sink.outputs()[0]["text/markdown"], visible_text(sink.outputs()[0]["text/html"])
    assert "$ pytest -q" in page and "test 199 ok" in md and "exit code 0" in md
    assert "&#36; pytest -q" in md and "$" not in md  # nothing for JupyterLab's math pre-pass


async def test_terminal_started_after_the_tool_call_names_it():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    turn.apply_update(tool_call("t1", "Run", "execute", content=[{"type": "terminal", "terminalId": "term-9"}]))
    term = FakeTerminal()
    turn.add(terminal_started("term-9", term, ("sh", "-c", "echo hi | tr a-z A-Z"), note="ran via the shell"))
    term.emit("HI\n")
    term.exit(0)
    view.close()
    assert row_state(view, "t1")["terminals"][0]["output"] == "HI\n"
    assert any("ran via the shell" in o.get("text/markdown", "") for o in sink.outputs())


async def test_real_terminal_process_output_reaches_the_row():
    from acp_kernel.services.terminals import Terminal

    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    term = Terminal(["sh", "-c", "for i in 1 2 3; do echo line $i; done"], terminal_id="term-r")
    await term.start()
    turn.add(se.TerminalStarted("s1", "term-r", term.argv, term.cwd, False, term))
    turn.apply_update(tool_call("t1", "Count", "execute", "in_progress", content=[{"type": "terminal", "terminalId": "term-r"}]))
    status = await asyncio.wait_for(term.wait(), 10)
    turn.apply_update(tool_update("t1", status="completed"))
    turn.finish("end_turn")
    t = row_state(view, "t1")["terminals"][0]
    assert t["output"] == "line 1\nline 2\nline 3\n" and status.exit_code == 0


async def test_markdown_only_mode_needs_no_widgets():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    turn.apply_update(tool_call("t1", "Read", "read", "in_progress"))
    turn.apply_update(tool_update("t1", status="failed"))
    turn.finish("end_turn")
    out = sink.outputs()[0]
    assert WIDGET not in out and "✗ failed" in out["text/markdown"]


async def test_markdown_only_rows_are_one_display_each_updated_in_place():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    turn.apply_update(tool_call("t1", "Read a", "read", "in_progress"))
    turn.apply_update(tool_call("t2", "Read b", "read", "in_progress"))
    turn.apply_update(tool_update("t1", status="completed"))
    turn.finish("end_turn")
    outs = sink.outputs()
    assert [o["text/plain"] for o in outs[:2]] == ["📖 Read a · ✓ done", "📖 Read b · ⊘ cancelled"]
    assert all(WIDGET not in o for o in outs)
    # t2's display only ever held t2: a row's change never resends its neighbours.
    t2_id = sink.messages[1].display_id
    assert all("Read a" not in m.data["text/markdown"] for m in sink.messages if m.display_id == t2_id)


async def test_cancelled_turn_marks_open_tool_calls():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    turn.apply_update(tool_call("t1", "Long job", "execute", "in_progress"))
    turn.finish("cancelled")
    assert row_state(view, "t1")["status"] == "cancelled"
    assert sink.outputs()[-1]["text/plain"].startswith("Cancelled")


# -- permission and elicitation -------------------------------------------------------


async def test_a_permission_answer_updates_its_display_in_place():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    prompt = permission_prompt(title=f"Run {SCRIPT}")
    turn.add(prompt)
    fallback = sink.outputs()[0]
    assert WIDGET not in fallback and "Options: Allow once / Always allow / Reject" in fallback["text/markdown"]
    assert live(fallback["text/markdown"]) == [] and "&lt;script&gt;" in fallback["text/markdown"]
    prompt.answer("approve_for_session")
    assert await asyncio.wait_for(prompt.future, 1) == "approve_for_session"
    await asyncio.sleep(0)  # the future's done-callbacks run on the next loop pass
    md = sink.outputs()[0]["text/markdown"]
    assert "chose **Always allow**" in md and live(md) == []
    # The broker's own record of the user's answer adds no second line.
    turn.add(se.PermissionResolved("s1", "t1", prompt.title, "approve_for_session", "allow_always", "user"))
    assert len(sink.outputs()) == 1


async def test_permission_cancelled_by_the_session_says_so():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    prompt = permission_prompt()
    turn.add(prompt)
    prompt.cancel()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert "cancelled" in sink.outputs()[0]["text/markdown"]


async def test_permission_resolved_by_policy_is_one_line():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    turn.add(se.PermissionResolved("s1", "t9", f"Read {IMG}", "allow", "allow_once", "policy"))
    (out,) = sink.outputs()
    md = unwrapped(out["text/markdown"])
    assert live(md) == [] and live(out["text/markdown"]) == []
    assert render_html(md).strip() == (
        "<p>🔐 Permission for Read &lt;img src=x onerror=alert(1)&gt;: <strong>allow_once</strong> (policy)</p>")


async def test_an_elicitation_shows_its_fields_then_its_outcome():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    prompt = elicitation_prompt()
    prompt.fields["name"]["title"] = "Name $\\style{background-color:red}{x}$"
    turn.add(prompt)
    assert "Fields:" in sink.outputs()[0]["text/markdown"]
    prompt.decline()
    assert await asyncio.wait_for(prompt.future, 1) == {"action": "decline"}
    await asyncio.sleep(0)
    assert "→ *decline*" in sink.outputs()[0]["text/markdown"]
    turn.add(permission_prompt(title="Run $x$ \\\\( <img src=x onerror=alert(1)> @@0@@"))
    for data in sink.outputs():
        assert inert_data(data) == [], inert_data(data)


# -- the transcript and the status line ---------------------------------------------


class FakeSession:
    current_mode = "code"
    usage = None


async def test_transcript_has_text_tools_plan_and_status():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink, session=FakeSession())
    turn.apply_update(thought("planning"))
    turn.apply_update(text(f"I will fix it. {SCRIPT}\n\n"))
    turn.apply_update(plan(("read", "completed"), ("edit", "in_progress")))
    turn.apply_update(tool_call("t1", "Edit app.py", "edit", "completed", content=[{"type": "diff", "path": "app.py", "oldText": "a\n", "newText": "b\n"}]))
    turn.apply_update(text("Fixed."))
    turn.apply_update({"sessionUpdate": "usage_update", "used": 1234, "size": 200000, "cost": {"amount": 0.02, "currency": "USD"}})
    turn.finish("end_turn")
    md = render_markdown(turn, FakeSession())
    assert "I will fix it." in md and "Fixed." in md
    assert "Edit app.py" in md and "-a\n+b" in md
    assert "- [x] read" in md and "**edit** *(in progress)*" in md
    assert "<details><summary>Thinking</summary>" in md
    # "$" as a reference: JupyterLab's math pre-pass finds no "$" (and no backslash) to take.
    assert "Done · 1,234/200,000 tokens · &#36;0.02 · code mode" in md and "$" not in md and "\\" not in md
    assert live(md) == []
    status = sink.outputs()[-1]["text/plain"]
    assert status.startswith("Done · 1,234/200,000 tokens · $0.02 · code mode")


async def test_transcript_of_a_failed_turn_and_usage_with_nulls():
    turn = Turn("s1")
    turn.apply_update({"sessionUpdate": "usage_update", "used": None, "size": None, "cost": None})
    turn.add(Notice("error", "agent crashed"))
    turn.finish(None, error="agent crashed")
    md = render_markdown(turn)
    assert "❌ **error:** agent crashed" in md and "<sub>Error" in md


async def test_payloads_stay_escaped_everywhere():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    turn.apply_update(text(f"{SCRIPT}\n\n{IMG}\n\n[x](javascript:alert(1))\n\n"))
    turn.apply_update(tool_call("t1", SCRIPT, "other", "completed", content=[{"type": "content", "content": {"type": "text", "text": IMG}}]))
    turn.apply_update(plan((IMG, "pending")))
    turn.add(Notice("warning", SCRIPT))
    turn.finish("end_turn")
    for o in sink.outputs():
        assert live(o.get("text/markdown", "")) == [], o
        body = o.get("text/html", "")
        assert "<script" not in body and "<img" not in body, body
    assert live(render_markdown(turn)) == []
