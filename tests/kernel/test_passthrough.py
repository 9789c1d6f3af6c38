"""Passthrough terminals in the ACP kernel: the demo CLI under a real PTY,
driven from cells and from a frontend speaking the widget's comm protocol."""

from __future__ import annotations

import asyncio
import os
import re
import sys

import pytest

from acp_kernel.protocol import proctree

from .conftest import wait_until
from .terminal_frontend import TerminalFrontend

pytestmark = pytest.mark.slow
PY = os.path.basename(sys.executable)


async def open_demo(k, front: TerminalFrontend, extra: str = "") -> None:
    res = await k.execute("%passthrough demo" + extra, on_output=front.feed)
    assert res.status == "ok", res.text()
    assert front.comm_id, "the cell showed no terminal widget"
    assert front.state["title"] == f"Demo agent (scripted, no model) · {PY} -m acp_kernel.demo.cli"
    assert "typed into `demo`" in res.text()


async def test_prompt_is_typed_and_reply_shown(acp_kernel):
    k, front = acp_kernel, TerminalFrontend(acp_kernel.kc)
    await open_demo(k, front)
    res = await k.execute("hello from a cell", on_output=front.feed)
    assert res.status == "ok", res.text()
    # The cell shows the same terminal again (another view of the one widget).
    views = [m for m in res.outputs if m["msg_type"] == "display_data"
             and m["content"]["data"].get("application/vnd.jupyter.widget-view+json", {}).get("model_id") == front.comm_id]
    assert len(views) == 1
    assert "You said: hello from a cell" in front.text()
    # A multi-line cell stays one prompt: the app asked for bracketed paste, and got it.
    res = await k.execute("first line\nsecond line\nthird", on_output=front.feed)
    assert res.status == "ok"
    assert "(28 characters, 3 lines)" in front.text()
    assert front.text().count("You said:") == 2


async def test_interrupt_sends_ctrl_c(acp_kernel):
    k, front = acp_kernel, TerminalFrontend(acp_kernel.kc)
    await open_demo(k, front)
    task = await front.run_until_shown(k, "/slow 500", "line 3 of 500")
    await k.km.interrupt_kernel()
    res = await asyncio.wait_for(task, 15)
    assert res.status == "ok"
    assert "Interrupted: Ctrl-C sent to `demo`" in res.text()
    await front.pump_until(lambda: "interrupted" in front.text())
    assert "slow done" not in front.text()
    # The CLI is still there and answers the next cell.
    res = await k.execute("still there?", on_output=front.feed)
    assert "You said: still there?" in front.text()


async def test_view_keystrokes_resize_and_replay(acp_kernel):
    k, front = acp_kernel, TerminalFrontend(acp_kernel.kc)
    await open_demo(k, front)
    await k.execute("before the view", on_output=front.feed)
    # A view starting now gets the history addressed to it, then types and resizes.
    front.hello(rows=30, cols=100)
    await front.pump_until(lambda: front.replayed)
    assert "You said: before the view" in front.view_text()
    front.type("/size\r")
    await front.pump_until(lambda: "size 30x100" in front.view_text())
    front.send({"type": "resize", "view": front.view, "rows": 12, "cols": 50})
    front.type("/size\r")
    await front.pump_until(lambda: "size 12x50" in front.view_text())


async def test_exit_is_reported_and_restart_works(acp_kernel):
    k, front = acp_kernel, TerminalFrontend(acp_kernel.kc)
    await open_demo(k, front)
    res = await k.execute("/exitcode 3", on_output=front.feed)
    assert res.status == "error"
    assert "`demo` exited with status 3" in res.text()
    await front.pump_until(lambda: front.state.get("status") == "exited with status 3")
    res = await k.execute("anyone?", on_output=front.feed)
    assert res.status == "error"
    assert "has exited with status 3; start it again with %passthrough" in res.text()
    front2 = TerminalFrontend(k.kc)
    await open_demo(k, front2)
    await k.execute("back again", on_output=front2.feed)
    assert "You said: back again" in front2.text()


async def test_off_goes_back_to_acp_and_list_stop(acp_kernel):
    k, front = acp_kernel, TerminalFrontend(acp_kernel.kc)
    await open_demo(k, front)
    res = await k.execute("%passthrough list")
    pid = int(re.search(r"running · pid (\d+)", res.text()).group(1))
    assert proctree.alive(pid)
    res = await k.execute("%passthrough off\nhello")
    assert res.status == "ok"
    assert "over ACP again" in res.text()
    assert "You said: hello" not in front.text()  # the demo *agent* answered, not the CLI
    res = await k.execute("%passthrough stop demo")
    assert "Stopped `demo`" in res.text()
    await wait_until(lambda: not proctree.alive(pid))


async def test_bad_commands_are_clear(acp_kernel):
    k = acp_kernel
    res = await k.execute("%passthrough --command no-such-program-xyz")
    assert res.status == "error"
    assert "cannot start no-such-program-xyz: 'no-such-program-xyz' was not found on PATH" in res.text()
    res = await k.execute("%passthrough nosuchagent")
    assert res.status == "error"
    res = await k.execute("%passthrough stop")
    assert "no passthrough terminal to stop" in res.text()
    res = await k.execute("%status")
    assert res.status == "ok"  # the kernel is alive and well


async def test_shutdown_ends_the_terminal(kernel_env, tmp_path):
    from .conftest import KernelHarness, running_kernel

    async with running_kernel(kernel_env, tmp_path / "work") as (km, kc):
        k = KernelHarness(km, kc)
        front = TerminalFrontend(kc)
        await open_demo(k, front)
        res = await k.execute("%passthrough list")
        pid = int(re.search(r"running · pid (\d+)", res.text()).group(1))
    assert not proctree.alive(pid)


# -- terminal login (ACP auth method of type "terminal") -----------------------------------


def login_scenario(tmp_path) -> dict:
    return {
        "auth_file": str(tmp_path / "token"),
        "init": {"authMethods": [
            {"id": "login", "name": "Log in", "type": "terminal", "args": ["--login"],
             "env": {"LOGIN_GREETING": "hello from the method's env"}},
            {"id": "bad", "name": "Broken", "type": "terminal", "args": "--login"},
        ]},
        "prompt": [{"chunk": "logged-in answer"}],
    }


async def test_terminal_login_runs_the_agent_in_a_terminal_then_reconnects(acp_kernel, tmp_path):
    from .conftest import scripted_command

    k = acp_kernel
    res = await k.execute(f"%agent --command {scripted_command(login_scenario(tmp_path))}")
    assert res.status == "ok"
    res = await k.execute("hello")
    assert "**Log in**: run `" in res.text() and "--login` in a terminal" in res.text()
    assert "`%auth METHOD` logs in with one of them here" in res.text()

    front = TerminalFrontend(k.kc)
    prompt_seen = asyncio.Event()

    async def on_output(msg):
        await front.feed(msg)
        if front.comm_id and not prompt_seen.is_set() and "Log in? [y/n]" in front.text():
            prompt_seen.set()
            front.type("y\r")  # the user answers in the terminal

    res = await k.execute("%auth login", on_output=on_output)
    assert res.status == "ok", res.text()
    assert "(log in) · " in front.state["title"] and front.state["title"].endswith(" --login")
    assert "hello from the method's env" in front.text() and "logged in" in front.text()
    assert "Logged in; the agent restarts with the next prompt" in res.text()
    res = await k.execute("hello")
    assert res.status == "ok" and "logged-in answer" in res.text()


async def test_terminal_login_failure_and_malformed_method(acp_kernel, tmp_path):
    from .conftest import scripted_command

    k = acp_kernel
    await k.execute(f"%agent --command {scripted_command(login_scenario(tmp_path))}")
    front = TerminalFrontend(k.kc)

    async def on_output(msg):
        await front.feed(msg)
        if front.comm_id and "Log in? [y/n]" in front.text() and "not logged in" not in front.text():
            front.type("n\r")

    res = await k.execute("%auth login", on_output=on_output)
    assert res.status == "error"
    assert "Login exited with status 1." in res.text()
    res = await k.execute("%auth bad")
    assert res.status == "error"
    assert "login method 'bad' is malformed (args)" in res.text()


async def test_completion_knows_passthrough(acp_kernel):
    k = acp_kernel
    reply = await k.kc.complete("%passthrough ", 13, reply=True)
    matches = reply["content"]["matches"]
    assert {"demo", "claude", "--command", "off", "stop", "list"} <= set(matches)
    await k.execute("hello")  # the demo agent's slash commands are known now
    reply = await k.kc.complete("/", 1, reply=True)
    assert reply["content"]["matches"]
    front = TerminalFrontend(k.kc)
    await open_demo(k, front)
    reply = await k.kc.complete("/", 1, reply=True)
    assert reply["content"]["matches"] == []  # typed into the CLI: the agent's commands do not apply


async def test_malformed_frontend_messages_are_ignored(acp_kernel):
    k, front = acp_kernel, TerminalFrontend(acp_kernel.kc)
    await open_demo(k, front)
    garbage = [
        ["not", "a", "dict"], "text", None, 42,
        {"type": "input", "data": 12345},
        {"type": "input"},
        {"type": "hello", "view": "x", "rows": 10**9, "cols": -4},
        {"type": "resize", "view": "x", "rows": "24", "cols": None},
        {"type": "hello"},  # no view id: nobody to answer
        {"type": "bye", "view": "never-said-hello"},
        {"type": "no-such-type", "view": "v"},
    ]
    for content in garbage:
        msg = k.kc.session.msg("comm_msg", {"comm_id": front.comm_id, "data": {"method": "custom", "content": content}})
        k.kc.shell_channel.send(msg)
    front.hello(rows=20, cols=60)  # a proper view after all that
    await front.pump_until(lambda: front.replayed)
    front.type("/size\r")
    await front.pump_until(lambda: "size 20x60" in front.view_text())
    res = await k.execute("%status")
    assert res.status == "ok" and "passthrough terminal `demo`" in res.text()


async def test_a_views_keys_are_written_in_the_order_it_counted_them(acp_kernel):
    """JupyterLab may deliver a widget's messages on the main shell or a subshell thread,
    so two can arrive swapped: the Enter (count 3) before the letters (count 2)."""
    k, front = acp_kernel, TerminalFrontend(acp_kernel.kc)
    await open_demo(k, front)
    front.hello(rows=20, cols=60)
    await front.pump_until(lambda: front.replayed)
    front.type_counted(1, "ab")
    front.type_counted(3, "\r")
    front.type_counted(2, "c <b>x</b>`y\nz`")  # hostile text stays the CLI's input
    await front.pump_until(lambda: "You said: abc <b>x</b>`y" in front.view_text())
    assert "You said: ab(" not in front.view_text()  # the Enter did not come before the "c"
    # A count that never comes: what waits for it goes out in order after a moment.
    front.type_counted(5, "/si")
    front.type_counted(6, "ze\r")
    await front.pump_until(lambda: "size 20x60" in front.view_text())


async def test_a_view_that_falls_behind_pauses_the_program_until_it_is_given_up(acp_kernel):
    """Flow control: a view that draws nothing (never acknowledges) makes the kernel
    stop reading the PTY after about 4 MiB; after the stale window (5 s) it no
    longer counts and the flood completes. A headless kernel never pauses."""
    k = acp_kernel
    front = TerminalFrontend(k.kc, ack=False)
    await open_demo(k, front)
    front.hello(rows=24, cols=80)
    await front.pump_until(lambda: front.replayed)
    res = await k.execute("/flood 12000000", on_output=front.feed, timeout=60)
    assert res.status == "ok", res.text()
    assert "flood done" in front.text()
    gaps = [(b[0] - a[0], sum(n for _, n in front.arrivals[: i + 1]))
            for i, (a, b) in enumerate(zip(front.arrivals, front.arrivals[1:]))]
    longest, after = max(gaps)
    assert longest >= 4.0, gaps  # the pause: nothing was read until the view was given up
    assert 4 * 1024 * 1024 <= after <= 12_000_000, (longest, after)
