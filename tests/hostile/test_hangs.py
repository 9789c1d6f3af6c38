"""Nothing an agent does (or fails to do) hangs the client: requests other
than the prompt time out with a message that names the agent, the method and
the limit; an agent that stops reading its stdin is reported, not fed
forever, and the event loop keeps serving others meanwhile."""

from __future__ import annotations

import asyncio
import sys

import pytest

from acp_kernel.errors import AgentStalled, ConnectionClosed, RequestTimeout
from acp_kernel.client.host import ClientSettings, Limits
from acp_kernel.client.session import Client
from acp_kernel.protocol.transport import ProcessTransport

from ..conftest import scripted_spec
from ..faults.conftest import notices, open_session


def limits(**kw) -> ClientSettings:
    return ClientSettings(limits=Limits(**kw))


# -- timeouts ------------------------------------------------------------------


async def test_initialize_never_answered_times_out_with_the_agent_method_limit_and_stderr():
    spec = scripted_spec({"never_answer": ["initialize"], "init_actions": [{"stderr": "downloading the agent..."}]})
    # The limit leaves the agent's interpreter time to start and write its stderr line
    # (init_actions run when initialize arrives) even on a loaded machine: at 0.3 s the
    # timeout could fire before the line existed, and the tail assertion failed under load.
    client = Client(spec, settings=limits(initialize_seconds=3))
    with pytest.raises(RequestTimeout) as info:
        await asyncio.wait_for(client.start(), 20)
    text = str(info.value)  # what every front-end shows, with the stderr tail
    assert "agent 'scripted' did not answer 'initialize' within 3 s" in text
    assert "limits.initialize_seconds" in text and "config file" in text
    assert "downloading the agent..." in text  # the stderr tail
    assert isinstance(info.value, TimeoutError)
    assert not client.alive  # start() closed it: the autouse fixture checks no process is left


async def test_initialize_answered_within_its_limit_works():
    client = Client(scripted_spec({"answer_delay": {"initialize": 0.2}}), settings=limits(initialize_seconds=10))
    try:
        await asyncio.wait_for(client.start(), 20)
        assert client.agent_info.get("name") == "scripted"
    finally:
        await client.close()


async def test_session_new_never_answered_times_out_and_the_client_stays_usable():
    client = await Client(scripted_spec({"never_answer": ["session/new"]}), settings=limits(request_seconds=0.3)).start()
    try:
        with pytest.raises(RequestTimeout) as info:
            await asyncio.wait_for(client.new_session(), 10)
        assert "did not answer 'session/new' within 0.3 s (limits.request_seconds" in str(info.value)
        assert client.alive and not client.conn._pending  # the request was forgotten
    finally:
        await client.close()


async def test_set_mode_never_answered_times_out_but_a_prompt_has_no_timeout():
    scenario = {"never_answer": ["session/set_mode"],
                "prompts": {"slow": [{"chunk": "slow "}, {"wait_cancel": True}]}, "on_cancel": "end"}
    client, session = await open_session(scenario, settings=limits(request_seconds=0.3))
    try:
        with pytest.raises(RequestTimeout, match="'session/set_mode'"):
            await asyncio.wait_for(session.set_mode("plan"), 10)
        # A turn is the user's to cancel: it outlives request_seconds.
        turn = session.begin("slow")
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(session.finish(turn)), 1.0)
        assert not turn.done and turn.text == "slow "
        await asyncio.wait_for(session.cancel(), 10)
        assert turn.stop_reason == "cancelled"
    finally:
        await client.close()


# -- backpressure --------------------------------------------------------------


async def test_write_buffer_edge_at_the_limit_writes_flow_one_past_it_they_wait():
    high = 256 * 1024
    # A real process that never reads its stdin: the pipe fills, then our queue.
    transport = ProcessTransport([sys.executable, "-c", "import time; time.sleep(60)"],
                                 write_buffer_bytes=high, write_stall_seconds=60)
    transport.attach(lambda data: None, lambda: None)
    await transport.start()
    try:
        while transport.write_buffer_size() == 0:  # fill the pipe itself first
            transport.write(b"x" * 4096)
        transport.write(b"y" * (high - transport.write_buffer_size()))
        assert transport.write_buffer_size() == high and not transport.write_paused
        transport.write(b"z")
        assert transport.write_buffer_size() == high + 1 and transport.write_paused
        waiter = asyncio.ensure_future(transport.drain())
        await asyncio.sleep(0)
        assert not waiter.done()  # writers wait: the queue does not grow
        waiter.cancel()
    finally:
        await transport.close(grace=0)


async def test_an_agent_that_stops_reading_is_reported_and_the_loop_stays_responsive():
    scenario = {"prompts": {"stall": [{"stop_reading": True}]}}
    settings = limits(write_buffer_bytes=64 * 1024, write_stall_seconds=0.5)
    client, session = await open_session(scenario, settings=settings)
    try:
        assert (await session.prompt("stall")).stop_reason == "end_turn"  # it stops reading after this
        order: list[str] = []
        turn = session.begin("large prompt " + "x" * 2_000_000)
        turn.subscribe(lambda event: event is None and order.append("turn ended"))
        assert client.transport.write_paused  # past the limit: backpressure is on
        other = asyncio.Event()

        async def someone_else() -> None:
            order.append("other coroutine ran")
            other.set()

        asyncio.ensure_future(someone_else())
        # A request while the queue is full waits for room, then fails clearly.
        with pytest.raises(AgentStalled) as info:
            await asyncio.wait_for(session.set_mode("plan"), 10)
        await asyncio.wait_for(session.finish(turn), 10)
        assert other.is_set() and order == ["other coroutine ran", "turn ended"]
        message = str(info.value)
        assert "agent 'scripted' stopped reading its input" in message and "limits.write_stall_seconds" in message
        assert turn.error is not None and "stopped reading its input" in turn.error
        assert "stalled: agent 'scripted' stopped reading" in notices(turn, "warning")
        assert client.needs_restart and not client.alive
        # Nothing more is fed to it: the next prompt fails at once, clearly.
        with pytest.raises(ConnectionClosed, match="stopped reading"):
            client.conn.notify("session/cancel", {"sessionId": session.id})
        nxt = await asyncio.wait_for(session.prompt("again"), 10)
        assert nxt.error is not None and "stopped reading" in nxt.error
    finally:
        await client.close()


async def test_backpressure_lifts_when_the_agent_reads_and_is_not_a_stall():
    # 1 MB prompts through a 64 KiB queue limit to an agent that reads: writes
    # pause and resume; nothing is reported, every turn completes.
    settings = limits(write_buffer_bytes=64 * 1024, write_stall_seconds=5)
    client, session = await open_session({"prompt": [{"chunk": "read it"}]}, settings=settings)
    try:
        for _ in range(3):
            turn = session.begin("p " + "x" * 1_000_000)
            assert client.transport.write_paused
            await asyncio.wait_for(session.finish(turn), 20)
            assert turn.text == "read it" and turn.error is None
            await asyncio.wait_for(client.conn.writable(), 10)  # drained below the limit again
            assert not client.transport.write_paused
        assert client.alive and not client.transport.stalled and not client.reports
    finally:
        await client.close()
