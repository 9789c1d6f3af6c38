"""An ACP kernel in ``jupyter console``: a terminal frontend prints text/plain
of display_data and ignores update_display_data; questions come through stdin."""

from __future__ import annotations

import pytest

IMG = "<img src=x onerror=alert(1)>"


def turn_with_everything() -> list[dict]:
    return [
        {"update": {"sessionUpdate": "plan", "entries": [
            {"content": "Look around", "status": "in_progress", "priority": "high"},
            {"content": "Report", "status": "pending", "priority": "low"}]}},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "List files", "kind": "execute",
                    "status": "pending", "rawInput": {"command": "ls -a"}}},
        {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"}},
        {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                    "rawOutput": {"aggregated_output": "a.txt\nb.txt\n", "exit_code": 0}}},
        {"update": {"sessionUpdate": "plan", "entries": [
            {"content": "Look around", "status": "completed", "priority": "high"},
            {"content": "Report", "status": "in_progress", "priority": "low"}]}},
        {"chunk": "Hello from the scripted agent. "},
        {"chunk": f"It found two files and {IMG}.\n"},
    ]


def test_a_console_shows_the_answer_text(console):
    c = console({"prompt": turn_with_everything()})
    out = c.run("Look around")
    assert "Hello from the scripted agent. It found two files and " + IMG in out
    assert "Done" in out  # the status line


def test_a_console_shows_final_tool_call_states_and_the_plan(console):
    c = console({"prompt": turn_with_everything()})
    out = c.run("Look around", timeout=30)
    assert "List files · ✓ done" in out and "a.txt" in out
    assert "pending" not in out.split("List files · ✓ done")[1]
    assert "[x] Look around" in out and "[~] Report" in out


def test_a_console_answers_a_permission_through_stdin(console):
    ask = {"request": {"method": "session/request_permission", "params": {
        "sessionId": "$SID",
        "toolCall": {"toolCallId": "t9", "title": "Delete build", "kind": "execute",
                     "rawInput": {"command": "rm -rf build && echo gone"}},
        "options": [{"optionId": "yes", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"}]}}}
    c = console({"prompt": [ask]})
    question = c.run_until("Clean up", r"Choose 1-2 \(empty = reject\): ", timeout=30)
    assert "rm -rf build && echo gone" in question and "1. Allow once" in question
    out = c.answer("1", timeout=30)
    assert 'RESULT {"outcome": {"outcome": "selected", "optionId": "yes"}}' in out


def test_kernel_messages_print_as_text_not_markdown_source(console):
    """%status, %help and an error read as text in a console: no ``\\&``
    escapes, no ``**`` or backticks; a hostile mode name stays text."""
    c = console({"prompt": [{"chunk": "ok"}],
                 "modes": {"currentModeId": "a&b", "availableModes": [
                     {"id": "a&b", "name": f"Mode {IMG}", "description": "line one\nline `two`"}]}})
    c.run("Hi")
    status = c.run("%status").split("\n- running:", 1)[1]  # (the agent's command line holds the scenario)
    assert "\n- mode: a&b\n" in status and "\\" not in status and "**" not in status and "`" not in status
    modes = c.run("%mode")
    assert f"- a&b Mode {IMG} — line one line `two` ← current" in modes
    helped = c.run("%help")
    assert "%set NAME VALUE" in helped and "%mode [ID]   list the agent's modes, or set one" in helped
    assert "\\|" not in helped
    failed = c.run("%mode a b")
    assert "Error: usage: %mode [ID]" in failed and "**" not in failed
    assert "UsageError: usage: %mode [ID]" in failed


def test_set_values_reach_a_console_prompt(console):
    c = console({"prompts": {'Fix flaky "tests" 3 times': [{"chunk": "Fixed."}]},
                 "prompt": [{"chunk": "WRONG PROMPT"}]})
    # A first cell that takes a moment (the agent starts): a console whose first cell
    # ends at once can miss that cell's idle status while its iopub subscription is
    # still joining (ZMQ's slow joiner), and then waits forever (seen once under load).
    c.run("warm up")
    said = c.run('%set topic "flaky \\"tests\\""')
    assert 'topic = "flaky \\"tests\\""' in said
    c.run("%set n 3")  # (a console runs each typed line as a cell)
    out = c.run("Fix {topic} {n} times")
    assert "Fixed." in out and "WRONG PROMPT" not in out


def permission_turn(title: str = "Delete build") -> list[dict]:
    return [{"request": {"method": "session/request_permission", "params": {
        "sessionId": "$SID",
        "toolCall": {"toolCallId": "t9", "title": title, "kind": "execute",
                     "rawInput": {"command": "rm -rf build && echo gone", "path": "/tmp/a\nb"}},
        "options": [{"optionId": "yes", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "no", "name": f"Reject {IMG}", "kind": "reject_once"}]}}}]


TERMINAL_IPYTHON = ["-m", "IPython", "--simple-prompt", "--no-banner", "--colors=NoColor"]


@pytest.mark.parametrize("where", ["python3 kernel in jupyter console", "terminal IPython"])
def test_the_python_api_asks_a_permission_through_stdin(console, where):
    c = (console({"prompt": permission_turn(f"Delete {IMG}")}, kernel="python3") if "console" in where
         else console({"prompt": permission_turn(f"Delete {IMG}")}, argv=TERMINAL_IPYTHON))
    c.run("import acp_kernel; agent = await acp_kernel.connect('scripted')")
    question = c.run_until("turn = await agent.prompt('Clean up')", r"Choose 1-2 \(empty = reject\): ", timeout=30)
    assert f"the agent asks: Delete {IMG}" in question and "rm -rf build && echo gone" in question
    assert "| /tmp/a\n" in question and "| b\n" in question  # a path with a newline: its lines, each marked
    # words from the kind; the agent's name (with its HTML, as text) beside them
    assert "2. Reject [reject_once]" in question and f"(the agent's words: \u201cReject {IMG}\u201d)" in question
    out = c.answer("1", timeout=30)
    assert 'RESULT {"outcome": {"outcome": "selected", "optionId": "yes"}}' in out
    assert "end_turn" in c.run("print(turn.stop_reason)")
    c.run("await agent.close()")


def test_magics_in_a_console_print_text_and_an_empty_answer_rejects(console):
    c = console({"prompt": permission_turn()}, kernel="python3")
    c.run("%load_ext acp_kernel")
    connected = c.run("%acp connect scripted")
    assert "Connected scripted:" in connected and "**" not in connected
    status = c.run("%acp status")
    assert "- scripted (default):" in status and "- agent: scripted (" in status and "`" not in status
    c.child.sendline("%%acp")  # a cell magic: the console asks for lines until an empty one
    c.child.sendline("Clean up")
    asked = c.run_until("", r"Choose 1-2 \(empty = reject\): ", timeout=30)
    assert "rm -rf build && echo gone" in asked and "1. Allow once" in asked
    out = c.answer("", timeout=30)  # empty: rejected with the agent's reject option
    assert 'RESULT {"outcome": {"outcome": "selected", "optionId": "no"}}' in out
