"""Agents that die, hang, or never finish: at the library level, over real pipes.

Each case checks: the client survives with a clear message, nothing received
before the fault is lost, no process is left behind, and the next prompt or
the next connection works.
"""

from __future__ import annotations

import asyncio

import pytest

from acp_kernel.protocol import proctree
from acp_kernel.errors import ConnectionClosed
from acp_kernel.client.host import ClientSettings
from acp_kernel.client.session import Client

from ..conftest import scripted_spec

from .conftest import answers, gone, next_connection_works, notices, open_session, wait_text

#: These agents run commands: the default policy (ask, nobody to answer) would refuse them.
ALLOW_ALL = ClientSettings(permissions="allow-all")


async def test_exit_during_initialize():
    client = Client(scripted_spec({"init_actions": [{"stderr": "fatal: no config file"}, {"exit": 7}]}))
    with pytest.raises(ConnectionClosed) as info:
        await client.start()
    text = info.value.explain()
    assert "no config file" in text and "exit status 7" in text
    assert not client.alive
    await gone([client.transport.pid])
    await next_connection_works()


async def test_killed_during_initialize_is_named_by_its_signal():
    client = Client(scripted_spec({"init_actions": [{"signal": 9}]}))
    with pytest.raises(ConnectionClosed) as info:
        await client.start()
    assert "SIGKILL" in info.value.explain()
    await next_connection_works()


async def test_exit_mid_turn_keeps_the_text_and_says_why():
    scenario = {"prompt": [{"chunk": "partial answer"}, {"stderr": "panic: out of cheese"}, {"exit": 3}]}
    client, session = await open_session(scenario)
    pid = client.transport.pid
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 10)
        assert turn.text == "partial answer"  # nothing lost
        assert turn.error and "exit status 3" in turn.error and "out of cheese" in turn.error
        assert "out of cheese" in notices(turn, "error")
        assert not client.alive
    finally:
        await client.close()
    await gone([pid])
    await next_connection_works()


async def test_agent_sigkilled_while_a_terminal_runs():
    # The terminal runs a small tree (a shell with a background child); the
    # agent dies by SIGKILL with it still running.
    scenario = {"prompt": [
        {"chunk": "starting "},
        {"request": {"method": "terminal/create", "params": {
            "sessionId": "$SID", "command": "sh", "args": ["-c", "sleep 600 & echo started; wait"]}}},
        {"sleep": 0.3},
        {"signal": 9},
    ]}
    client, session = await open_session(scenario, settings=ALLOW_ALL)
    agent = client.transport.pid
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 10)
        assert turn.text.startswith("starting RESULT")
        assert "SIGKILL" in turn.error
        terms = client.services.terminals.terminals()
        assert len(terms) == 1 and terms[0].running
        term_tree = proctree.tree(terms[0].pid) | {terms[0].pid}
        assert len(term_tree) >= 2
        assert "started" in terms[0].output()[0]
    finally:
        await client.close()
    await gone(term_tree | {agent})
    await next_connection_works()


async def test_agent_closes_stdout_but_keeps_running():
    client, session = await open_session({"ignore_eof": True,
                                          "prompt": [{"chunk": "bye "}, {"close_stdout": True}, {"sleep": 3600}]})
    pid = client.transport.pid
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 10)
        assert turn.text == "bye "
        assert "closed its output" in turn.error
        assert proctree.alive(pid)  # a zombie-free, live, mute agent...
    finally:
        await client.close()  # ...that close() still ends
    await gone([pid])


async def test_hang_forever_then_cancel():
    # The agent never ends the turn by itself but does answer session/cancel.
    client, session = await open_session({"prompts": {"go": [{"chunk": "thinking..."}, {"sleep": 3600}]}})
    try:
        turn = session.begin("go")
        await wait_text(turn, "thinking")
        await session.cancel()
        await session.finish(turn)
        assert turn.stop_reason == "cancelled" and not turn.forced and turn.text == "thinking..."
        assert not client.needs_restart
        assert (await session.prompt("next")).text == "ok"
    finally:
        await client.close()


async def test_awaiting_caller_gives_up_and_the_turn_is_cancelled():
    # A caller-side timeout cancels the await: the turn is cancelled per the protocol.
    client, session = await open_session({"prompts": {"go": [{"chunk": "slow"}, {"sleep": 3600}]}})
    try:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(session.prompt("go"), 0.5)
        turn = session.turns[-1]
        assert turn.done and turn.stop_reason == "cancelled" and turn.text == "slow"
        assert (await session.prompt("next")).text == "ok"
    finally:
        await client.close()


async def test_agent_never_answers_cancel():
    scenario = {"on_cancel": "ignore", "ignore_eof": True, "prompt": [{"chunk": "busy"}, {"sleep": 3600}]}
    client, session = await open_session(scenario)
    pid = client.transport.pid
    try:
        turn = session.begin("go")
        await wait_text(turn, "busy")
        # The grace runs out and the turn is forced to end; a cancel that waits for ever fails at 60 s.
        await asyncio.wait_for(session.cancel(grace=0.3), 60)
        assert turn.done and turn.stop_reason == "cancelled" and turn.forced and turn.text == "busy"
        assert "did not end the turn" in notices(turn)
        assert client.needs_restart
    finally:
        await client.close()  # ignores stdin EOF too: terminated as a tree
    await gone([pid])
    await next_connection_works()


async def test_unknown_stop_reason_is_kept_and_flagged():
    client, session = await open_session({"prompts": {"go": [{"chunk": "done"}, {"stop": "galaxy_brain"}]}})
    try:
        turn = await session.prompt("go")
        assert turn.stop_reason == "galaxy_brain" and turn.error is None and turn.text == "done"
        assert "unknown stop reason 'galaxy_brain'" in notices(turn, "warning")
        assert (await session.prompt("next")).stop_reason == "end_turn"
    finally:
        await client.close()


@pytest.mark.parametrize("reply", [
    {"result": {}},
    {"result": None},
    {"result": {"stopReason": 42}},
    {"result": "end_turn"},
    {"error": "not an object"},
    {"error": {"code": -32603, "message": "model overloaded"}},
])
async def test_malformed_prompt_answers(reply):
    client, session = await open_session({"prompt": [{"chunk": "text"}, {"reply_prompt": reply}, {"sleep": 0.2}]})
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 10)
        assert turn.done and turn.text == "text"
        msg = notices(turn)
        if "error" in reply:
            assert turn.error and ("model overloaded" in turn.error or "malformed error" in turn.error)
        else:
            assert turn.stop_reason == "end_turn" and "no stopReason" in msg
        assert client.alive
    finally:
        await client.close()


async def test_tool_calls_that_never_finish_are_not_shown_running():
    scenario = {"prompts": {"go": [
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Run tests", "kind": "execute",
                    "status": "in_progress"}},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "Read file", "status": "pending"}},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t3", "title": "Done one", "status": "completed"}},
        {"chunk": "all done"},
    ]}}
    client, session = await open_session(scenario)
    try:
        turn = await session.prompt("go")
        assert turn.stop_reason == "end_turn"
        status = {tid: c.status for tid, c in turn.tool_calls.items()}
        assert status["t3"] == "completed"
        assert status["t1"] in ("failed", "cancelled") and status["t2"] in ("failed", "cancelled"), status
        text = notices(turn)
        assert "Run tests" in text and "Read file" in text and "Done one" not in text
        # the next turn starts clean
        assert (await session.prompt("next")).tool_calls == {}
    finally:
        await client.close()


async def test_tool_calls_open_at_a_crash_are_failed():
    scenario = {"prompt": [
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Edit", "status": "in_progress"}},
        {"exit": 1},
    ]}
    client, session = await open_session(scenario)
    try:
        turn = await session.prompt("go")
        assert turn.tool_calls["t1"].status == "failed" and turn.error
    finally:
        await client.close()


async def test_late_final_status_after_the_prompt_answer_still_lands():
    scenario = {
        "prompt": [{"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Slow",
                               "status": "in_progress"}}],
        "after_prompt": [{"update": {"sessionUpdate": "tool_call_update", "toolCallId": "t1",
                                     "status": "completed"}}, {"chunk": "DONE"}],
    }
    client, session = await open_session(scenario)
    try:
        turn = await session.prompt("go")
        await wait_text(turn, "DONE")
        assert turn.tool_calls["t1"].status == "completed"
        assert turn.late_events == 2
    finally:
        await client.close()


async def test_children_and_terminals_are_gone_after_close_even_when_detached():
    scenario = {"prompt": [
        {"spawn": "sleep 600"}, {"spawn_detached": "sleep 600"},
        {"request": {"method": "terminal/create", "params": {"sessionId": "$SID", "command": "sleep",
                                                              "args": ["600"]}}},
    ]}
    client, session = await open_session(scenario, settings=ALLOW_ALL)
    turn = await session.prompt("go")
    pids = [int(w) for w in turn.text.split() if w.isdigit()]
    assert answers(turn)[0][0] == "RESULT"
    term = client.services.terminals.terminals()[0]
    assert all(proctree.alive(p) for p in pids) and term.running
    await client.close()
    await gone([*pids, term.pid, client.transport.pid])
