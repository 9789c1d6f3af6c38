"""Outputs every frontend can read: the frontend rule, the append-only view a
terminal frontend gets, text/plain everywhere, and agent-sent command output."""

from __future__ import annotations

import asyncio

from acp_kernel.client.turn import Turn
from acp_kernel.view import RecordingSink, TurnView
from acp_kernel.view.frontend import HEADLESS, NOTEBOOK, TERMINAL, WidgetClients, frontend_for
from tests.hostile.render import live

from .helpers import permission_prompt, plan, text, tool_call, tool_update

IMG = "<img src=x onerror=alert(1)>"
WIDGET = "application/vnd.jupyter.widget-view+json"


def msg(msg_type: str, session: str, **content) -> dict:
    return {"header": {"msg_type": msg_type, "session": session}, "content": content}


# -- the rule -----------------------------------------------------------------------


def test_the_rule_widget_manager_then_stdin_then_headless():
    assert frontend_for(widget_manager=True, allow_stdin=True) == NOTEBOOK
    assert frontend_for(widget_manager=True, allow_stdin=False) == NOTEBOOK
    assert frontend_for(widget_manager=False, allow_stdin=True) == TERMINAL
    assert frontend_for(widget_manager=False, allow_stdin=False) == HEADLESS
    assert TERMINAL.updates is False and TERMINAL.ask == "stdin" and not TERMINAL.widgets
    assert HEADLESS.widgets and HEADLESS.ask == "none"


def test_widget_clients_are_told_apart_by_their_session():
    clients = WidgetClients()
    assert clients.note(msg("comm_open", "lab", comm_id="c", target_name="jupyter.widget.control", data={}))
    assert clients.note(msg("comm_info_request", "old-lab", target_name="jupyter.widget"))
    assert not clients.note(msg("comm_open", "console", comm_id="d", target_name="something.else", data={}))
    assert not clients.note(msg("comm_info_request", "console"))  # every comm, no target: not a widget manager
    assert clients.has_widgets(msg("execute_request", "lab"))
    assert clients.has_widgets(msg("execute_request", "old-lab"))
    assert not clients.has_widgets(msg("execute_request", "console"))
    assert clients.frontend(msg("execute_request", "console"), allow_stdin=True) == TERMINAL
    assert clients.frontend(msg("execute_request", "nbclient"), allow_stdin=False) == HEADLESS
    assert clients.frontend(msg("execute_request", "lab"), allow_stdin=True) == NOTEBOOK
    assert not clients.has_widgets({"header": {}})


def test_widget_clients_forget_the_oldest_past_the_cap():
    from acp_kernel.view import frontend

    clients = WidgetClients()
    for i in range(frontend.MAX_CLIENTS + 5):
        clients.note(msg("comm_open", f"page{i}", comm_id="c", target_name="jupyter.widget.control"))
    assert not clients.has_widgets(msg("execute_request", "page0"))
    assert clients.has_widgets(msg("execute_request", f"page{frontend.MAX_CLIENTS + 4}"))


# -- append only ------------------------------------------------------------------------


def plains(sink: RecordingSink) -> list[str]:
    return [m.data["text/plain"] for m in sink.messages]


async def test_a_terminal_frontend_gets_only_appended_final_outputs_all_with_text():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink, frontend=TERMINAL)
    turn.apply_update(text("Hello, I will run"))
    turn.apply_update(text(" the tests.\n\nFirst block done. "))
    turn.apply_update(plan(("Run tests", "in_progress"), ("Fix", "pending")))
    turn.apply_update(tool_call("t1", "Run make test", status="pending", rawInput={"command": "make test"}))
    turn.apply_update(tool_update("t1", status="in_progress"))
    turn.apply_update(tool_update("t1", status="completed"))
    view.flush()
    turn.apply_update(plan(("Run tests", "completed"), ("Fix", "in_progress")))
    turn.apply_update(tool_call("t2", "Never finishes", status="in_progress"))
    turn.apply_update(text("All done."))
    turn.finish("end_turn")
    assert view.closed
    assert all(m.kind == "display" for m in sink.messages), [m.kind for m in sink.messages]
    assert all("text/plain" in m.data for m in sink.messages)
    out = "\n".join(plains(sink))
    assert "Hello, I will run the tests." in out and "All done." in out
    assert "💻 Run make test · ○ pending" in out  # the start line
    assert "💻 Run make test · ✓ done\n    $ make test" in out  # the final line, once
    assert out.count("Run make test · ✓ done") == 1
    assert "Never finishes · ⊘ cancelled" in out  # the end settles open calls
    assert "[~] Run tests" in out and "[x] Run tests" in out and "[~] Fix" in out
    assert plains(sink)[-1].startswith("Done")
    # the text of each block is shown once: no tail copies
    assert out.count("First block done.") == 1


async def test_a_terminal_frontend_repeats_nothing_for_thousands_of_chunks():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink, frontend=TERMINAL)
    for i in range(3000):
        turn.apply_update(text(f"w{i} " + ("\n\n" if i % 100 == 99 else "")))
    turn.finish("end_turn")
    joined = " ".join(plains(sink)[:-1])
    assert joined.split() == [f"w{i}" for i in range(3000)]


async def test_permission_lines_in_text_are_neither_html_nor_markdown_escaped():
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink, frontend=TERMINAL)
    prompt = permission_prompt(title="cd build && make <all>")
    turn.add(prompt)
    prompt.answer("approve")
    await asyncio.sleep(0)  # the answer settles on the loop
    turn.finish("end_turn")
    view.close()
    out = "\n".join(plains(sink))
    assert "cd build && make <all>" in out
    assert "&amp;" not in out and "\\&" not in out and "&lt;" not in out
    assert "-> chose Allow once" in out


async def test_final_message_text_carries_text_plain():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink)
    turn.apply_update(text("**Bold** answer with `code`.\n\nSecond."))
    turn.finish("end_turn")
    for out in sink.outputs():
        assert "text/plain" in out
    assert sink.outputs()[0]["text/plain"].startswith("**Bold** answer")


async def test_hostile_strings_in_the_terminal_view_stay_text():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink, frontend=TERMINAL)
    turn.apply_update(text(f"See {IMG} and `a\nb` here.\n\n"))
    turn.apply_update(tool_call("t1", f"Read {IMG}", "read", "completed",
                                locations=[{"path": "/tmp/evil\npath.md"}]))
    turn.apply_update(plan((f"Step {IMG}", "pending")))
    turn.finish("end_turn")
    for m in sink.messages:
        md = m.data.get("text/markdown")
        if md:
            assert live(md) == [], md
        assert "\x1b" not in m.data["text/plain"]
    out = "\n".join(plains(sink))
    assert IMG in out  # shown, as text


# -- command output the agent sends outside content ----------------------------------------


async def test_raw_output_and_meta_terminal_output_show_in_the_row_and_transcript():
    from acp_kernel.view import render_markdown

    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink)
    turn.apply_update(tool_call("c1", "Run ls", status="in_progress", rawInput={"command": ["ls", "-la"]},
                                content=[{"type": "terminal", "terminalId": "agent-term-1"}],
                                _meta={"terminal_info": {"terminal_id": "agent-term-1"}}))
    turn.apply_update(tool_update("c1", _meta={"terminal_output": {"terminal_id": "agent-term-1", "data": "a.txt\n````\n"}}))
    view.flush()
    turn.apply_update(tool_update("c1", _meta={"terminal_output": {"terminal_id": "agent-term-1", "data": "b.txt\n"},
                                               "terminal_exit": {"terminal_id": "agent-term-1", "exit_code": 0}}))
    turn.apply_update(tool_update("c1", status="completed"))
    turn.apply_update(tool_call("c2", "Codex exec", status="completed", rawInput={"command": "echo hi"},
                                rawOutput={"aggregated_output": "hi\n", "exit_code": 3}))
    turn.finish("end_turn")
    md = render_markdown(turn)
    assert "output not available" not in md
    assert "a.txt\n````\nb.txt" in md and "`````console" in md  # fence longer than the run inside
    assert "*exit code 0*" in md and "hi\n" in md and "*exit code 3*" in md
    assert live(md) == []
    state = view.rows["c1"].state()
    agent = [t for t in state["terminals"] if t["id"] == "agent-output"][0]
    assert agent["output"] == "a.txt\n````\nb.txt\n" and agent["exit"] == "exit code 0" and not agent["live"]
    assert "output not available" not in sink.outputs()[0]["text/markdown"]


async def test_a_terminal_frontend_shows_the_final_output_of_a_command():
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink, frontend=TERMINAL)
    turn.apply_update(tool_call("c2", "Codex exec", status="in_progress", rawInput={"command": "pytest -q"}))
    turn.apply_update(tool_update("c2", status="failed", rawOutput={"aggregated_output": "1 failed\n", "exit_code": 1}))
    turn.finish("end_turn")
    out = "\n".join(plains(sink))
    assert "Codex exec · ✗ failed\n    $ pytest -q\n    1 failed\n    (exit code 1)" in out


async def test_prompts_in_a_terminal_frontend_go_to_the_asker():
    asked = []
    turn, sink = Turn("s1"), RecordingSink()
    view = TurnView(turn, sink, frontend=TERMINAL, asker=lambda prompt, call: asked.append((prompt, call)))
    turn.apply_update(tool_call("t1", "Run rm", status="pending", rawInput={"command": "rm -rf build"}))
    prompt = permission_prompt()
    turn.add(prompt)
    assert [p for p, _ in asked] == [prompt] and asked[0][1].id == "t1"
    assert not any("Options:" in p for p in plains(sink))  # the question itself is the input prompt
    prompt.answer("abort")
    await asyncio.sleep(0)
    turn.finish("end_turn")
    view.close()
    assert any("-> chose Reject" in p for p in plains(sink))


async def test_a_notebook_never_calls_the_asker():
    asked = []
    turn, sink = Turn("s1"), RecordingSink()
    TurnView(turn, sink, asker=lambda p, c: asked.append(p))
    prompt = permission_prompt()
    turn.add(prompt)
    prompt.cancel()
    turn.finish("end_turn")
    assert asked == []
