"""Passthrough terminals below the kernel: the pure input logic, then real PTYs
(the demo CLI and bash) through terminado, with no notebook in between."""

from __future__ import annotations

import asyncio
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_kernel.protocol import proctree
from acp_kernel.passthrough.manager import PassthroughError
from acp_kernel.passthrough.pty_input import PASTE_END, PASTE_START, Flow, ModeWatch, paste, plain_text
from acp_kernel.client.registry import Passthrough
from acp_kernel.protocol.transport import CommandNotFound
from tests.passthrough.conftest import manager  # noqa: F401  (the fixture)

DEMO_CLI = Passthrough((sys.executable, "-m", "acp_kernel.demo.cli"), idle_seconds=0.3)

# -- pure ------------------------------------------------------------------------------


def test_paste_brackets_and_uses_carriage_returns():
    assert paste("a\nb\r\nc", bracketed=True) == f"{PASTE_START}a\rb\rc{PASTE_END}"
    assert paste("a\nb", bracketed=False) == "a\rb"


def test_paste_cannot_end_the_paste_early():
    sneaky = f"ok{PASTE_END}rm -rf /\r\x03"
    out = paste(sneaky, bracketed=True)
    assert out.count(PASTE_END) == 1 and out.endswith(PASTE_END)
    assert "\x1b" not in out[len(PASTE_START):-len(PASTE_END)]
    assert "\x03" not in out


@given(st.text())
def test_paste_body_never_holds_escape_or_interrupt(text):
    body = paste(text, bracketed=True)[len(PASTE_START):-len(PASTE_END)]
    assert not any(ch in body for ch in "\x1b\x03\x04\x00\n")


def test_mode_watch_follows_the_last_request_across_reads():
    w = ModeWatch()
    assert not w.bracketed_paste
    for piece in ["banner\x1b[?20", "04h> "]:
        w.feed(piece)
    assert w.bracketed_paste
    w.feed("bye\x1b[?2004l")
    assert not w.bracketed_paste
    w.feed("\x1b[?2004l\x1b[?2004h")
    assert w.bracketed_paste


@given(st.lists(st.sampled_from(["x", "\x1b[?2004h", "\x1b[?2004l", "\x1b[1m", "\r\n"]), max_size=20),
       st.integers(min_value=1, max_value=9))
def test_mode_watch_is_independent_of_read_boundaries(pieces, step):
    whole = "".join(pieces)
    one, split = ModeWatch(), ModeWatch()
    one.feed(whole)
    for i in range(0, len(whole), step):
        split.feed(whole[i:i + step])
    assert one.bracketed_paste == split.bracketed_paste


def test_plain_text_drops_escapes_and_keeps_the_last_frame():
    raw = "\x1b[1;32mhi\x1b[0m\r\n\r⠋ thinking\r⠙ thinking\r\x1b[2KYou said: x\r\nab\b \bc\x1b]0;title\x07!"
    assert plain_text(raw) == "hi\nYou said: x\nac!"


# -- real PTYs -------------------------------------------------------------------------


class Watcher:
    """A terminado client that waits for some text."""

    size = (None, None)

    def __init__(self, needle: str) -> None:
        self.needle, self.text, self.found = needle, "", asyncio.Event()

    def on_pty_read(self, text: str) -> None:
        self.text += text
        if self.needle in self.text:
            self.found.set()

    def on_pty_died(self) -> None:
        pass


async def test_prompt_reply_and_bracketed_paste(manager, tmp_path):
    term = manager.open("demo", DEMO_CLI, cwd=str(tmp_path))
    reply = await term.send_prompt("one\ntwo")
    assert reply.outcome == "idle"
    assert term.modes.bracketed_paste  # the CLI asked for it, and the prompt used it
    assert "You said: one\ntwo\n(7 characters, 2 lines)" in reply.text
    await term.close()
    assert term.exited.done() and not proctree.alive(term.pid)


async def test_a_change_of_screen_counts_once_read_even_before_anyone_looked(manager, tmp_path):
    """A CLI with no input box in the registry (the demo CLI): a paste counts as shown
    when its echo has been read, not only once something else applied the reads (the
    paste's wait sat out its whole 3 s window, each prompt, and a settle judged the
    screen quiet on reads not yet applied)."""
    term = manager.open("demo", DEMO_CLI, cwd=str(tmp_path))
    assert await term.ready() == "idle"
    seq = term._interrupt_seq
    typed_at = asyncio.get_running_loop().time()
    term.write("x")  # echoed into the demo CLI's input line
    assert await term.wait_screen(lambda: term._changed_after(typed_at), 30, seq) == "ok"
    assert not term._quiet_since(typed_at, 30)
    await term.close()


async def test_without_bracketed_paste_lines_are_submitted_one_by_one(manager, tmp_path):
    settings = Passthrough((*DEMO_CLI.command, "--no-bracketed-paste"), idle_seconds=0.3)
    term = manager.open("demo", settings, cwd=str(tmp_path))
    reply = await term.send_prompt("solo")
    assert not term.modes.bracketed_paste
    assert "You said: solo" in reply.text
    await term.close()


async def test_interrupt_ends_the_wait_and_the_reply(manager, tmp_path):
    term = manager.open("demo", DEMO_CLI, cwd=str(tmp_path))
    seen = Watcher("line 2 of 400")
    term.pty.clients.append(seen)  # another terminado client, as the widget is
    task = asyncio.ensure_future(term.send_prompt("/slow 400"))
    await asyncio.wait_for(seen.found.wait(), 10)
    term.interrupt()
    reply = await asyncio.wait_for(task, 10)
    assert reply.outcome == "interrupted"
    follow = await term.send_prompt("after")
    assert "You said: after" in follow.text
    assert "interrupted" in plain_text(seen.text) and "slow done" not in seen.text
    await term.close()


async def test_exit_status_and_prompt_after_exit(manager, tmp_path):
    term = manager.open("demo", DEMO_CLI, cwd=str(tmp_path))
    reply = await term.send_prompt("/exitcode 7")
    assert reply.outcome == "exited" and reply.exit_status == 7
    assert term.describe_exit() == "exited with status 7"
    assert "demo" not in manager.terminals
    with pytest.raises(PassthroughError, match="has exited with status 7"):
        await term.send_prompt("hello?")


async def test_hangup_ends_a_tree_that_ignores_it(manager, tmp_path):
    """A shell that traps SIGHUP and a background child: close() still leaves nothing."""
    script = "trap '' HUP; sleep 300 & echo ready; while :; do sleep 1; done"
    settings = Passthrough(("/bin/bash", "-c", script), idle_seconds=0.2, raw_mode=False)
    term = manager.open("stubborn", settings, cwd=str(tmp_path))
    assert await term.ready() == "idle"
    members = proctree.tree(term.pid) | {term.pid}
    assert len(members) >= 2
    await term.close(grace=0.3)
    assert not any(proctree.alive(p) for p in members)


async def test_missing_program_is_a_clear_error(manager, tmp_path):
    with pytest.raises(CommandNotFound, match="no-such-cli-xyz"):
        manager.open("x", Passthrough(("no-such-cli-xyz",)), cwd=str(tmp_path))
    assert manager.terminals == {}


async def test_same_name_gets_a_new_name(manager, tmp_path):
    a = manager.open("demo", DEMO_CLI, cwd=str(tmp_path))
    b = manager.open("demo", DEMO_CLI, cwd=str(tmp_path))
    assert (a.name, b.name) == ("demo", "demo-2")
    await a.close()
    await b.close()


async def test_an_app_that_stops_reading_never_blocks_the_loop(manager, tmp_path):
    """Raw mode and no reads: the PTY's input buffer fills after a few KB. A big
    prompt must not freeze the event loop (the kernel), and Ctrl-C still works."""
    app = "import time, tty; tty.setraw(0); print('ready', flush=True); time.sleep(600)"
    settings = Passthrough((sys.executable, "-c", app), idle_seconds=0.2, submit_delay=0.05)
    term = manager.open("deaf", settings, cwd=str(tmp_path))
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    tick = asyncio.ensure_future(ticker())
    task = asyncio.ensure_future(term.send_prompt("x" * 2_000_000))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not term._writer:  # until the outbox waits for the PTY to take more
        assert loop.time() < deadline, "the write never had to wait"
        await asyncio.sleep(0.01)
    before = ticks
    while ticks < before + 5:  # the loop keeps running while the write waits
        await asyncio.sleep(0.01)
    term.interrupt()
    reply = await asyncio.wait_for(task, 10)
    tick.cancel()
    assert reply.outcome == "interrupted"
    assert len(term._outbox) <= 1  # the unsent prompt was dropped; at most Ctrl-C waits
    await term.close()


# -- flow control (pure) -------------------------------------------------------------------

def test_flow_pauses_when_every_view_is_far_behind_and_resumes_when_one_catches_up():
    f = Flow(high=100, low=20, stale=5)
    assert not f.should_pause(0)  # no views: a headless run never pauses
    f.on_send(1000)
    assert not f.should_pause(0)
    f.hello("a", 0)  # starts caught up (the replay covers what was sent)
    f.hello("b", 0)
    f.on_send(150)
    assert f.behind(1) == 150 and f.should_pause(1)
    f.ack("a", 90, 2)  # the fastest view counts
    assert f.behind(2) == 60 and not f.may_resume(2)
    f.ack("a", 140, 3)
    assert f.may_resume(3)
    f.ack("a", 10, 3)  # an old, smaller count is ignored
    assert f.behind(3) == 10


def test_flow_forgets_a_view_that_went_quiet_while_behind():
    f = Flow(high=100, low=20, stale=5)
    f.hello("gone", 0)
    f.on_send(500)
    assert f.should_pause(1)
    assert f.behind(6) is None and f.may_resume(6)  # a closed tab cannot stall the program
    f.ack("gone", 490, 7)  # it was only slow: it counts again
    assert f.behind(7) == 10
    f.bye("gone")
    assert f.behind(7) is None


def test_login_target_is_the_agents_own_command_plus_the_methods_args_and_env():
    from acp_kernel.passthrough.ptycell import login_target
    from acp_kernel.client.registry import AgentSpec

    spec = AgentSpec("x", "X agent", ("x-agent", "--acp"), env={"A": "1"})
    t = login_target(spec, {"id": "l", "name": "Log in", "type": "terminal", "args": ["--login"], "env": {"B": "2"}})
    assert t.settings.command == ("x-agent", "--acp", "--login") and t.env == {"A": "1", "B": "2"}
    v2 = login_target(spec, {"id": "l", "name": "n", "type": "terminal", "env": [{"name": "B", "value": "3"}]})
    assert v2.settings.command == spec.command and v2.env == {"A": "1", "B": "3"}
    # a method cannot name a program of its own: "command" is not part of the type
    sneaky = login_target(spec, {"id": "l", "name": "n", "type": "terminal", "command": "rm", "args": []})
    assert sneaky.settings.command == spec.command
    with pytest.raises(PassthroughError, match=r"malformed \(args"):
        login_target(spec, {"id": "l", "name": "n", "type": "terminal", "args": "--login"})
    # the SDK's model drops an env it cannot read rather than refusing the method
    assert login_target(spec, {"id": "l", "name": "n", "type": "terminal", "env": {"B": 3}}).env == {"A": "1"}


def test_in_order_holds_keys_that_come_early_and_gives_up_on_a_gap():
    from acp_kernel.passthrough.pty_input import InOrder

    keys = InOrder(max_held=3)
    assert keys.take("v", 1, "a") == ["a"]
    assert keys.take("v", 3, "\r") == [] and keys.holding("v")
    assert keys.take("w", 1, "other view") == ["other view"]  # views count on their own
    assert keys.take("v", 2, "b") == ["b", "\r"] and not keys.holding("v")
    assert keys.take("v", 2, "again") == ["again"]  # a repeat is written, never lost
    # A gap that never fills: given up, in order; later counts go on from there.
    assert keys.take("v", 6, "y") == [] and keys.take("v", 5, "x") == []
    assert keys.give_up("v") == ["x", "y"] and keys.take("v", 7, "z") == ["z"]
    # Too many held: written in order without waiting.
    for n, ch in zip(range(9, 12), "pqr"):
        assert keys.take("v", n, ch) == []
    assert keys.take("v", 12, "s") == ["p", "q", "r", "s"]
    assert keys.forget("w") == [] and keys.take("w", 1, "new start") == ["new start"]
