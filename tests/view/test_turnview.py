"""A real Turn, fed raw ACP updates as an agent sends them, through a TurnView into a RecordingSink."""

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
TOOLS_WIDGET = "acp_kernel.view.toolcall.ToolCallsWidget"
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
    """A tool call's row as its widget last sent it (what the frontend model holds)."""
    row = view.rows[tool_call_id]
    return row.widget.rows()[row.key]


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
        if WIDGET in o:
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
    assert WIDGET in sink.outputs()[2]
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


async def test_tool_call_widget_state_after_completion_with_diff():
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
    w = view.rows["t1"].widget
    r = row_state(view, "t1")
    assert (r["status"], r["status_label"], r["kind"], r["icon"]) == ("completed", "✓ done", "edit", "✏️")
    assert r["title"] == f"Edit {IMG}"  # the state holds raw text; the JS sets textContent only
    assert r["locations"] == ["/w/a.py:3"]
    assert r["text"] == f"ok {IMG}"
    (diff,) = r["diffs"]
    assert diff["path"] == "/w/a.py" and diff["added"] == 1 and diff["removed"] == 1
    assert ["-", "-b"] in diff["lines"] and ["+", f"+{SCRIPT}"] in diff["lines"]
    # The display's fallback was updated to the final markdown.
    out = sink.outputs()[0]
    assert out[WIDGET]["model_id"] == w.model_id and out[WIDGET]["version_major"] == 2
    md = out["text/markdown"]
    assert "✓ done" in md and "```diff" in md and f"+{SCRIPT}" in md
    assert live(md) == []
    assert "ok &lt;img src=x onerror=alert(1)&gt;" in render_html(md)


async def test_terminal_output_is_live_as_deltas_and_final_in_the_row_state(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    term = FakeTerminal()
    term.emit("before subscribe\n")
    turn.add(terminal_started("term-1", term, ("pytest", "-q")))
    turn.apply_update(tool_call("t1", "Run tests", "execute", "in_progress", content=[{"type": "terminal", "terminalId": "term-1"}]))
    row = view.rows["t1"]
    for i in range(200):
        term.emit(f"test {i} ok\n")
        if i % 50 == 49:
            view.flush()  # what the coalescing timer does, deterministically
    assert row_state(view, "t1")["terminals"][0]["live"] is True
    assert row_state(view, "t1")["terminals"][0]["output"] == ""
    sent = [m["content"] for m in frontend.sent(row.widget.comm.comm_id, "custom")]
    assert {(m["type"], m["row"], m["id"]) for m in sent} == {("term", "row:0", "term-1")}
    received = "".join(m["data"] for m in sent)
    # Deltas only: every byte once, the replay of what came before the view included.
    assert received == "before subscribe\n" + "".join(f"test {i} ok\n" for i in range(200))
    assert len(sent) <= 5
    term.exit(0)
    turn.add(se.TerminalExited("s1", "term-1", term.exit_status, "exited"))
    turn.apply_update(tool_update("t1", status="completed"))
    turn.finish("end_turn")
    t = row_state(view, "t1")["terminals"][0]
    assert t["live"] is False and t["output"].endswith("test 199 ok\n") and t["exit"].startswith("exit code 0")
    assert t["command"] == "pytest -q"
    # ... and the frontend's model has the same final row.
    assert frontend.models[row.widget.comm.comm_id]["row:0"]["terminals"][0] == t
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
    view = TurnView(turn, sink, widgets=False)
    turn.apply_update(tool_call("t1", "Read", "read", "in_progress"))
    turn.apply_update(tool_update("t1", status="failed"))
    turn.finish("end_turn")
    assert view.rows["t1"].widget is None
    out = sink.outputs()[0]
    assert WIDGET not in out and "✗ failed" in out["text/markdown"]


async def test_markdown_only_rows_are_one_display_each_updated_in_place():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink, widgets=False)
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


# -- one widget per run of tool calls ----------------------------------------------


def kinds_of(sink: RecordingSink) -> list[str]:
    """Each output in order: "tools(<titles>)" for a tool call display, else its markdown."""
    out = []
    for o in sink.outputs():
        if WIDGET in o:
            out.append("tools(" + ", ".join(line.split(" ", 1)[1].split(" · ")[0] for line in o["text/plain"].split("\n")) + ")")
        else:
            out.append(unwrapped(o.get("text/markdown", "")))
    return out


async def test_consecutive_tool_calls_share_one_widget_in_event_order():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    turn.apply_update(text("Looking."))
    for tid in ("a", "b", "c"):
        turn.apply_update(tool_call(tid, f"Read {tid}", "read", "in_progress"))
    turn.apply_update(text("Now editing."))
    turn.apply_update(tool_call("d", "Edit d", "edit", "in_progress"))
    turn.apply_update(plan(("fix", "in_progress")))
    turn.apply_update(tool_call("e", "Run e", "execute", "in_progress"))
    for tid in "abcde":  # updates land in their rows, wherever those are; nothing is appended
        turn.apply_update(tool_update(tid, status="completed"))
    turn.finish("end_turn")
    kinds = kinds_of(sink)
    assert kinds[:6] == ["Looking.", "tools(Read a, Read b, Read c)", "Now editing.", "tools(Edit d)",
                         kinds[4], "tools(Run e)"]
    assert kinds[4].startswith("**Plan**") and kinds[6].startswith("<sub>Done")
    widgets = [view.rows[t].widget for t in "abcde"]
    assert widgets[0] is widgets[1] is widgets[2] and len({id(w) for w in widgets}) == 3
    assert [view.rows[t].key for t in "abcde"] == ["row:0", "row:1", "row:2", "row:0", "row:0"]
    for tid in "abcde":
        assert row_state(view, tid)["status"] == "completed" and row_state(view, tid)["id"] == tid
    assert [g.widget for g in view.groups] == [widgets[0], widgets[3], widgets[4]]
    # The run's markdown fallback lists its rows in order, in their final state.
    md = sink.outputs()[1]["text/markdown"]
    assert md.index("Read a · ✓ done") < md.index("Read b · ✓ done") < md.index("Read c · ✓ done")


async def test_a_settled_run_gets_its_final_fallback_when_it_closes():
    """Readers without widgets see a finished run at once, not at the end of the turn."""
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink, rate_hz=0.001)  # no flush of its own between the updates, however slow the machine
    turn.apply_update(tool_call("a", "Read a", "read", "in_progress"))
    turn.apply_update(tool_call("b", "Read b", "read", "in_progress"))
    turn.apply_update(tool_update("a", status="completed"))
    turn.apply_update(tool_update("b", status="completed"))
    turn.apply_update(text("Both read."))  # closes the run
    run_id = sink.messages[0].display_id
    (update,) = sink.updates(run_id)
    assert update.data["text/plain"] == "📖 Read a · ✓ done\n📖 Read b · ✓ done" and WIDGET in update.data
    turn.finish("end_turn")
    assert len(sink.updates(run_id)) == 1  # nothing changed since: not sent again


async def test_thousands_of_tool_calls_open_one_comm(frontend: Frontend):
    n = 2000
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    turn.apply_update(text("Reading everything."))
    for i in range(n):
        turn.apply_update(tool_call(f"t{i}", f"Read file_{i}.py", "read", "pending", rawInput={"path": f"file_{i}.py"}))
        turn.apply_update(tool_update(f"t{i}", status="completed",
                                      content=[{"type": "content", "content": {"type": "text", "text": f"body {i}"}}]))
    turn.finish("end_turn")
    (comm_id,) = frontend.opens(TOOLS_WIDGET)
    model = frontend.models[comm_id]
    assert model["count"] == n
    assert [model[f"row:{i}"]["title"] for i in range(n)] == [f"Read file_{i}.py" for i in range(n)]
    assert all(model[f"row:{i}"]["status"] == "completed" and model[f"row:{i}"]["text"] == f"body {i}" for i in range(n))
    # Only changed rows travel: each row at most once per flush it changed in, never the whole run per change.
    updates = frontend.sent(comm_id, "update")
    rows_sent = sum(sum(1 for k in u["state"] if k.startswith("row:")) for u in updates)
    assert len(updates) <= view._ticker.flushes + 1 and rows_sent <= 2 * n
    # One display for the whole run, its fallback updated once, to the final state.
    tool_msgs = [m for m in sink.messages if WIDGET in m.data]
    assert [m.kind for m in tool_msgs] == ["display", "update"]
    assert tool_msgs[-1].data["text/markdown"].count("· ✓ done") == n


async def test_only_the_rows_that_changed_are_sent(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    # A rate that never lets an update flush by itself: the two updates below reach the
    # explicit flush together even on a machine slow enough to take 0.1 s between them.
    view = TurnView(turn, sink, rate_hz=0.001)
    for i in range(100):
        turn.apply_update(tool_call(f"t{i}", f"Search {i}", "search", "in_progress"))
    view.flush()
    comm_id = view.rows["t0"].widget.comm.comm_id
    before = len(frontend.sent(comm_id, "update"))
    turn.apply_update(tool_update("t42", status="failed"))
    turn.apply_update(tool_update("t7", title="Search seven"))
    view.flush()
    (update,) = frontend.sent(comm_id, "update")[before:]
    assert sorted(update["state"]) == ["count", "row:42", "row:7"]
    assert update["state"]["row:42"]["status"] == "failed" and update["state"]["row:7"]["title"] == "Search seven"
    view.flush()  # nothing changed: nothing sent
    assert len(frontend.sent(comm_id, "update")) == before + 1


async def test_the_readers_expanded_choice_is_kept(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    turn.apply_update(tool_call("a", "Read a", "read", "completed", content=[{"type": "content", "content": {"type": "text", "text": "x"}}]))
    turn.apply_update(tool_call("b", "Run b", "execute", "failed"))
    view.flush()
    w = view.rows["a"].widget
    # The frontend writes the choice (a click on each row head): open a, fold b.
    w.set_state({"expanded": {"row:0": True, "row:1": False}})
    turn.apply_update(tool_update("a", title="Read a again"))
    turn.apply_update(tool_update("b", status="completed"))
    turn.finish("end_turn")
    assert w.expanded == {"row:0": True, "row:1": False}  # row updates never reset it
    assert w.get_state()["expanded"] == {"row:0": True, "row:1": False}  # a reloaded page gets it
    assert all("expanded" not in u["state"] for u in frontend.sent(w.comm.comm_id, "update"))


async def test_cancelled_turn_marks_open_tool_calls():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    turn.apply_update(tool_call("t1", "Long job", "execute", "in_progress"))
    turn.finish("cancelled")
    assert row_state(view, "t1")["status"] == "cancelled"
    assert sink.outputs()[-1]["text/plain"].startswith("Cancelled")


# -- permission and elicitation -------------------------------------------------------


async def test_permission_buttons_answer_with_the_option_id():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    prompt = permission_prompt(title=f"Run {SCRIPT}")
    turn.add(prompt)
    form = view.forms[0]
    assert [b.description for b in form.buttons] == ["Allow once", "Always allow", "Reject"]
    assert form.buttons[0].button_style == "success" and form.buttons[2].button_style == "danger"
    assert "<script" not in form.header.value and "rm -rf build" in form.header.value
    fallback = sink.outputs()[0]
    assert WIDGET in fallback and "Options: Allow once / Always allow / Reject" in fallback["text/markdown"]
    form.buttons[1].click()
    form.buttons[2].click()  # too late: already answered
    assert await asyncio.wait_for(prompt.future, 1) == "approve_for_session"
    assert all(b.disabled for b in form.buttons)
    await asyncio.sleep(0)  # the future's done-callbacks run on the next loop pass
    assert "Always allow" in form.status.value
    md = sink.outputs()[0]["text/markdown"]
    assert "chose **Always allow**" in md and live(md) == []
    # The broker's own record of the user's answer adds no second line.
    turn.add(se.PermissionResolved("s1", "t1", prompt.title, "approve_for_session", "allow_always", "user"))
    assert len(sink.outputs()) == 1


async def test_permission_button_click_from_another_thread():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    prompt = permission_prompt()
    turn.add(prompt)
    await asyncio.to_thread(view.forms[0].buttons[0].click)
    assert await asyncio.wait_for(prompt.future, 1) == "approve"


async def test_permission_cancelled_by_the_session_locks_the_buttons():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    prompt = permission_prompt()
    turn.add(prompt)
    prompt.cancel()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert all(b.disabled for b in view.forms[0].buttons)
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


async def test_a_reopened_widget_view_gets_the_output_kept_so_far(frontend: Frontend):
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    turn.apply_update(tool_call("t0", "Read", "read", "completed"))
    term = FakeTerminal()
    turn.add(terminal_started("term-1", term))
    turn.apply_update(tool_call("t1", "Run", "execute", content=[{"type": "terminal", "terminalId": "term-1"}]))
    term.emit("one\n")
    view.flush()
    group = view.rows["t1"].group
    comm_id = group.widget.comm.comm_id
    before = len(frontend.sent(comm_id, "custom"))
    # A new view (page reload) says hello from the comm thread; the answer comes on the loop.
    await asyncio.to_thread(group._on_widget_msg, group.widget, {"type": "hello"}, [])
    await asyncio.sleep(0)
    replay = [m["content"] for m in frontend.sent(comm_id, "custom")[before:]]
    assert replay == [{"type": "reset", "row": "row:1", "id": "term-1", "data": "one\n"}]
    # A reloaded page asks for the whole state: every row is in it.
    state = group.widget.get_state()
    assert state["count"] == 2 and state["row:0"]["title"] == "Read" and state["row:1"]["terminals"][0]["live"]


async def test_elicitation_form_validates_then_submits():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    prompt = elicitation_prompt()
    turn.add(prompt)
    form = view.forms[0]
    import ipywidgets as w

    kinds = {name: type(box) for name, box in form.inputs.items()}
    assert kinds == {
        "name": w.Text, "count": w.IntText, "ratio": w.FloatText, "public": w.Checkbox,
        "license": w.Dropdown, "tags": w.SelectMultiple,
    }
    submit = form.buttons[0]
    form.inputs["name"].value = "x"
    submit.click()
    assert not prompt.done
    assert "Project name needs at least 2 characters" in form.errors.value
    assert "count is required" in form.errors.value
    form.inputs["name"].value = "demo"
    form.inputs["count"].value = 3
    form.inputs["tags"].value = ("a", "c")
    submit.click()
    answer = await asyncio.wait_for(prompt.future, 1)
    assert answer == {"action": "accept", "content": {"name": "demo", "count": 3, "public": False, "tags": ["a", "c"]}}
    await asyncio.sleep(0)
    assert all(b.disabled for b in form.buttons)
    assert "submitted" in sink.outputs()[0]["text/markdown"]
    assert "<b>the</b>" not in sink.outputs()[0]["text/markdown"]


async def test_elicitation_decline():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    prompt = elicitation_prompt()
    turn.add(prompt)
    view.forms[0].buttons[1].click()
    assert await asyncio.wait_for(prompt.future, 1) == {"action": "decline"}


async def test_question_widgets_are_outside_mathjax():
    """ipywidgets typesets a control's description with MathJax: an agent's
    field label or title "$x$" would be math. The forms' boxes carry the
    classes MathJax 3 and 4 skip, and their HTML is our escaped text."""
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    turn.add(permission_prompt(title="Run $x$ \\\\( <img src=x onerror=alert(1)> @@0@@"))
    prompt = elicitation_prompt()
    prompt.fields["name"]["title"] = "Name $\\style{background-color:red}{x}$"
    turn.add(prompt)
    for form in view.forms:
        assert {"tex2jax_ignore", "mathjax_ignore"} <= set(form.widget._dom_classes)
    assert "<img" not in view.forms[0].header.value and "$x$" in view.forms[0].header.value
    for data in sink.outputs():
        assert inert_data(data) == [], inert_data(data)
    view.forms[1].buttons[2].click()


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
