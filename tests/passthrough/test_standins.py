"""Each behaviour of the real CLIs that broke passthrough, reproduced by a
stand-in under a real PTY and driven by PassthroughTerminal (no kernel):
prompts queued before the CLI is ready keep their order and arrive whole,
a long silent working phase does not end a cell, the agent's cancel keys
stop a reply and the next prompt works, a dialog never eats a prompt."""

from __future__ import annotations

import asyncio

import pytest

from acp_kernel.protocol import proctree

from .standins import events, prompts, settings, wait_event

pytestmark = pytest.mark.slow
PROMPTS = ["alpha one", "bravo two", "charlie three"]
TWO_LINE = "delta first\ndelta second"


async def run_all(term, texts):
    """Queue every prompt at once, as Run All does, before the CLI is ready."""
    tasks = [asyncio.ensure_future(term.send_prompt(t)) for t in texts]
    return await asyncio.wait_for(asyncio.gather(*tasks), 90)


@pytest.mark.parametrize("name", ["ink", "silent", "redraw", "think"])
async def test_queued_prompts_arrive_in_order_one_message_each(manager, tmp_path, name):
    log = tmp_path / "log.jsonl"
    term = manager.open(name, settings(name, log), cwd=str(tmp_path))
    replies = await run_all(term, [*PROMPTS, TWO_LINE])
    assert prompts(log) == [*PROMPTS, TWO_LINE]  # nothing lost, merged or split
    for text, reply in zip(PROMPTS, replies):
        assert reply.outcome == "idle", reply
        assert reply.text == f"stand-in reply to: {text} (1 line)", reply.text
    assert replies[-1].text == "stand-in reply to: delta first (2 lines)"
    assert "? for shortcuts" in replies[-1].screen and "? for shortcuts" not in replies[-1].text
    pid = term.pid
    await term.close()
    assert not proctree.alive(pid)


async def test_without_the_busy_pattern_a_silent_working_phase_waits_for_the_reply(manager, tmp_path):
    """"think" without its busy pattern: the working line is chrome, so nothing new
    shows for 2.5 s after the echo; a submitted prompt with no reply in sight waits
    for one (issue 23) instead of ending the cell when the screen goes quiet."""
    log = tmp_path / "log.jsonl"
    term = manager.open("think", settings("think", log, busy_pattern=""), cwd=str(tmp_path))
    reply = await asyncio.wait_for(term.send_prompt("alpha one"), 40)
    assert reply.outcome == "idle" and reply.text == "stand-in reply to: alpha one (1 line)"
    await term.close()


async def test_the_prompt_is_not_typed_before_raw_mode(manager, tmp_path):
    """The silent start-up flushes what was typed before raw mode: an early prompt would be lost."""
    log = tmp_path / "log.jsonl"
    term = manager.open("silent", settings("silent", log), cwd=str(tmp_path))
    assert term.unready() == "it has not switched its terminal to raw input"
    reply = await asyncio.wait_for(term.send_prompt("alpha one"), 30)
    assert prompts(log) == ["alpha one"] and reply.text == "stand-in reply to: alpha one (1 line)"
    await term.close()


@pytest.mark.parametrize("name", ["esc", "dialog", "quit"])
async def test_cancel_keys_stop_a_reply_and_the_next_prompt_works(manager, tmp_path, name):
    log = tmp_path / "log.jsonl"
    term = manager.open(name, settings(name, log), cwd=str(tmp_path))
    task = asyncio.ensure_future(term.send_prompt("SLOW please"))
    await wait_event(log, lambda e: e.get("text") == "slow chunk 2")
    term.interrupt()
    reply = await asyncio.wait_for(task, 30)
    assert reply.outcome == "interrupted" and reply.detail == "Esc sent"
    assert [e["event"] for e in events(log)].count("cancel") == 1
    assert reply.text.splitlines()[-1] == "Interrupted by user" and "slow chunk 2" in reply.text
    after = await asyncio.wait_for(term.send_prompt("after"), 30)
    assert after.text == "stand-in reply to: after (1 line)"
    assert not any(e["event"] in ("dialog", "quit") for e in events(log))
    await term.close()


async def test_a_dialog_on_the_cancel_key_does_not_eat_the_next_prompt(manager, tmp_path):
    """Codex's Ctrl-C dialog: with Ctrl-C as the cancel key the dialog opens,
    and the next prompt waits for the input box instead of answering it."""
    log = tmp_path / "log.jsonl"
    term = manager.open("dialog", settings("dialog", log, cancel_keys=(("\x03", 0.0),), ready_timeout=2.0),
                        cwd=str(tmp_path))
    task = asyncio.ensure_future(term.send_prompt("SLOW please"))
    await wait_event(log, lambda e: e.get("text") == "slow chunk 2")
    term.interrupt()
    reply = await asyncio.wait_for(task, 30)
    assert reply.outcome == "interrupted" and reply.detail == "Ctrl-C sent"
    await wait_event(log, lambda e: e["event"] == "dialog")
    nxt = await asyncio.wait_for(term.send_prompt("must not answer the dialog"), 30)
    assert nxt.outcome == "timeout" and not nxt.sent
    assert nxt.detail.startswith("not ready after 2 s: its screen does not show")
    assert "Task is still running" in nxt.screen
    assert not any(e["event"] == "cancel" for e in events(log))  # no Enter picked "Cancel task"
    assert "must not answer the dialog" not in prompts(log)
    await term.close()


async def test_ctrl_c_that_quits_is_reported(manager, tmp_path):
    log = tmp_path / "log.jsonl"
    term = manager.open("quit", settings("quit", log, cancel_keys=(("\x03", 0.0),)), cwd=str(tmp_path))
    task = asyncio.ensure_future(term.send_prompt("SLOW please"))
    await wait_event(log, lambda e: e.get("text") == "slow chunk 1")
    term.interrupt()
    reply = await asyncio.wait_for(task, 30)
    assert reply.outcome == "exited" and reply.detail == "Ctrl-C sent; it quit" and reply.exit_status == 3


async def test_a_cell_timeout_says_the_cli_still_works(manager, tmp_path):
    log = tmp_path / "log.jsonl"
    term = manager.open("think", settings("think", log, cell_timeout=1.0), cwd=str(tmp_path))
    reply = await asyncio.wait_for(term.send_prompt("alpha one"), 30)
    assert reply.outcome == "timeout" and reply.sent
    assert reply.detail == "still working after 1 s (the screen shows 'esc to interrupt')"
    await term.close()


async def test_leftover_input_is_cleared_before_the_paste(manager, tmp_path):
    log = tmp_path / "log.jsonl"
    term = manager.open("esc", settings("esc", log), cwd=str(tmp_path))
    assert await term.ready() == "idle"
    term.write("half-typed junk")  # a person typed in the terminal and left it
    reply = await asyncio.wait_for(term.send_prompt("clean"), 30)
    assert prompts(log) == ["clean"] and reply.text == "stand-in reply to: clean (1 line)"
    await term.close()


async def test_a_question_of_the_clis_own_waits_for_the_person_and_no_prompt_answers_it(manager, tmp_path):
    """Kimi's approval box (issue 23): nothing moves while it asks, and with no input box
    in its data the old code ended the cell (the quiet screen) and typed the next prompt
    into the box, whose Enter approved it. Now the cell hears the question and waits for
    the person's answer; the next prompt is typed only after it."""
    log = tmp_path / "log.jsonl"
    term = manager.open("approval", settings("approval", log), cwd=str(tmp_path))
    heard: list[str] = []
    first = asyncio.ensure_future(term.send_prompt("ask rm -r build", on_dialog=heard.append))
    second = asyncio.ensure_future(term.send_prompt("bravo two"))
    await wait_event(log, lambda e: e["event"] == "approval-open")
    await asyncio.sleep(3.0)  # several quiet windows (0.4 s) of a screen that does not move
    assert not first.done() and not second.done()
    assert heard and "shell is requesting approval to run: rm -r build" in heard[-1]
    assert "→ [1] Approve once" in heard[-1] and "│" not in heard[-1]  # the box's text, without its frame
    assert term.unready().startswith("it asks in its own terminal ('shell is requesting approval")
    assert not any(e["event"] == "approval-answer" for e in events(log)) and prompts(log) == ["ask rm -r build"]
    term.write("1")  # the person answers in the terminal
    reply = await asyncio.wait_for(first, 30)
    assert reply.outcome == "idle" and "stand-in ran: rm -r build" in reply.text
    assert heard[-1] == ""  # the question is gone
    nxt = await asyncio.wait_for(second, 30)
    assert nxt.text == "stand-in reply to: bravo two (1 line)"
    assert [e["key"] for e in events(log) if e["event"] == "approval-answer"] == ["1"]
    assert prompts(log) == ["ask rm -r build", "bravo two"]
    await term.close()


async def test_a_question_still_open_at_the_cell_timeout_says_so(manager, tmp_path):
    log = tmp_path / "log.jsonl"
    term = manager.open("approval", settings("approval", log, cell_timeout=2.0), cwd=str(tmp_path))
    reply = await asyncio.wait_for(term.send_prompt("ask ls"), 30)
    assert reply.outcome == "timeout" and reply.sent
    assert reply.detail == ("its own question was still open after 2 s ('shell is requesting approval to run: "
                            "ls'): answer it in the terminal")
    await term.close()


async def test_the_ready_wait_goes_on_while_the_screen_changes(manager, tmp_path):
    """opencode's first draw took 56 s on a loaded machine (issue 23, sixth session): the
    ready timeout counts from the screen's last change, so a CLI that is still drawing its
    start is waited for; one whose screen stands still is not."""
    log = tmp_path / "log.jsonl"
    term = manager.open("loading", settings("loading", log, ready_timeout=1.5), cwd=str(tmp_path))
    reply = await asyncio.wait_for(term.send_prompt("alpha one"), 30)
    assert reply.outcome == "idle" and reply.text == "stand-in reply to: alpha one (1 line)", reply
    await term.close()
    stuck = manager.open("stuck", settings("silent", tmp_path / "stuck.jsonl", ready_timeout=0.5), cwd=str(tmp_path))
    stuck.write("")  # canonical mode and nothing drawn for 1.5 s: no change to wait for
    early = await asyncio.wait_for(stuck.send_prompt("too early"), 30)
    assert early.outcome == "timeout" and early.detail.startswith("not ready after 0.5 s"), early.detail
    await stuck.close()
