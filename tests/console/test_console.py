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
    assert "end_turn" in out  # the status line


@pytest.mark.xfail(strict=True, reason="needs the kernel wiring: the frontend rule (view/frontend.py) picks "
                                       "the append-only view for a console (H4's report)")
def test_a_console_shows_final_tool_call_states_and_the_plan(console):
    c = console({"prompt": turn_with_everything()})
    out = c.run("Look around", timeout=30)
    assert "List files · ✓ done" in out and "a.txt" in out
    assert "pending" not in out.split("List files · ✓ done")[1]
    assert "[x] Look around" in out and "[~] Report" in out


@pytest.mark.xfail(strict=True, reason="needs the kernel wiring: stdin questions (acp_kernel.ask) "
                                       "for a frontend without widgets (H4's report)")
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
