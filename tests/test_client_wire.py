"""The session layer against real agent processes that misbehave like real agents."""

from __future__ import annotations

import asyncio
import base64
import os

import pytest

from acp_kernel.protocol import proctree
from acp_kernel.errors import AuthRequired, ConnectionClosed
from acp_kernel.client.session import Client, describe_auth
from acp_kernel.client.turn import Notice, UnknownUpdate

from .conftest import scripted_spec, wait_text


async def open_session(scenario: dict, **kwargs):
    client = await Client(scripted_spec(scenario), **kwargs).start()
    session = await client.new_session()
    return client, session


def notices(turn) -> str:
    return "\n".join(n.text for n in turn.events if isinstance(n, Notice))


async def test_basic_turn_and_clean_shutdown():
    client, session = await open_session({"prompt": [{"chunk": "hello "}, {"chunk": "world"}]})
    pid = client.transport.pid
    turn = await session.prompt("hi")
    assert turn.text == "hello world"
    assert turn.stop_reason == "end_turn"
    await client.close()
    assert not proctree.alive(pid)


async def test_stdout_noise_is_reported_not_fatal():
    scenario = {
        "prompt": [
            {"raw": "INFO starting up, not JSON"},
            {"raw": '{"level":"info","msg":"json log line"}'},
            {"raw": "null"},
            {"raw": "42"},
            {"raw_b64": base64.b64encode(b"\xff\xfe\xfd garbage\n").decode()},
            {"chunk": "still here"},
        ]
    }
    client, session = await open_session(scenario)
    try:
        turn = await session.prompt("go")
        assert turn.text == "still here"
        assert turn.stop_reason == "end_turn"
        text = notices(turn)
        assert "not JSON: INFO starting up" in text
        assert "neither request, notification nor response" in text
        assert "JSON NoneType" in text and "JSON int" in text
        assert "invalid UTF-8" in text or "not JSON" in text
        # and the session keeps working
        assert (await session.prompt("again")).text == "still here"
    finally:
        await client.close()


async def test_oversized_line_is_skipped_and_connection_survives():
    # 10 MB line against a 1 MiB limit: skipped, reported, the next turn works.
    client, session = await open_session(
        {"prompt": [{"chunk": "a"}, {"big_line": 10_000_000}, {"chunk": "b"}]}, max_line=1 << 20
    )
    try:
        turn = await session.prompt("go")
        assert turn.text == "ab"
        assert "skipped a 10,000,0" in notices(turn)
        assert (await session.prompt("again")).text == "ab"
    finally:
        await client.close()


async def test_ten_megabyte_line_within_default_limit_is_delivered():
    client, session = await open_session({"prompt": [{"big_line": 10_000_000}]})
    try:
        turn = await session.prompt("go")
        assert len(turn.text) > 9_999_000
    finally:
        await client.close()


async def test_string_request_ids_and_unknown_update_kinds_kept():
    scenario = {
        "request_ids": "uuid",
        "prompt": [
            {"update": {"sessionUpdate": "brand_new_kind", "stuff": [1, 2]}},
            {"update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ""}}},
            {"update": {"sessionUpdate": "usage_update", "used": None, "size": None}},
            {"request": {"method": "_vendor/ping", "params": {}}},
            {"send": {"jsonrpc": "2.0", "method": "_auth/status_update", "params": {"ok": True}}},
        ],
    }
    client, session = await open_session(scenario)
    try:
        turn = await session.prompt("go")
        unknown = [e for e in turn.events if isinstance(e, UnknownUpdate)]
        assert unknown and unknown[0].kind == "brand_new_kind" and unknown[0].raw["stuff"] == [1, 2]
        # the unknown extension request was answered -32601 with its string id
        assert 'ERROR {"code": -32601' in turn.text
        assert turn.usage == {"sessionUpdate": "usage_update", "used": None, "size": None}
        assert turn.stop_reason == "end_turn"
    finally:
        await client.close()


async def test_updates_before_session_new_and_after_prompt_are_kept():
    scenario = {
        "before_new": [{"update": {"sessionUpdate": "available_commands_update",
                                   "availableCommands": [{"name": "web", "description": "search"}]}},
                       {"chunk": "early"}],
        "prompt": [{"chunk": "during"}],
        "after_prompt": [{"chunk": " late"}, {"chunk": " DONE"}],
    }
    client, session = await open_session(scenario)
    try:
        assert session.commands == [{"name": "web", "description": "search"}]
        assert session.background.text == "early"
        turn = await session.prompt("go")
        # wait for the late chunks by event, not by sleeping
        got = asyncio.get_running_loop().create_future()
        turn.subscribe(lambda e: got.set_result(True) if "DONE" in turn.text and not got.done() else None)
        if "DONE" not in turn.text:
            await asyncio.wait_for(got, 5)
        assert turn.text == "during late DONE"
        assert turn.late_events in (1, 2)  # two lines: one event each, or one if they came in one read
    finally:
        await client.close()


async def test_crash_mid_turn_gives_clear_message_and_reconnect_works():
    scenario = {"prompt": [{"chunk": "partial"}, {"stderr": "panic: out of cheese"}, {"exit": 3}]}
    client, session = await open_session(scenario)
    pid = client.transport.pid
    turn = await session.prompt("go")
    assert turn.text == "partial"  # nothing lost
    assert turn.error is not None
    assert "exit status 3" in turn.error and "out of cheese" in turn.error
    assert not client.alive
    await client.close()
    assert not proctree.alive(pid)
    client2, session2 = await open_session({"prompt": [{"chunk": "fresh"}]})
    try:
        assert (await session2.prompt("go")).text == "fresh"
    finally:
        await client2.close()


async def test_exit_during_initialize():
    client = Client(scripted_spec({"init_actions": [{"stderr": "cannot start: no config"}, {"exit": 7}]}))
    with pytest.raises(ConnectionClosed) as info:
        await client.start()
    assert "no config" in info.value.explain() and "exit status 7" in info.value.explain()


async def test_cancel_ends_turn_with_cancelled():
    client, session = await open_session({"prompts": {"go": [{"chunk": "working"}, {"wait_cancel": True}]}})
    try:
        turn = session.begin("go")
        await wait_text(turn, "working")
        await session.cancel()
        await session.finish(turn)
        assert turn.stop_reason == "cancelled" and not turn.forced
        assert not client.needs_restart
        assert (await session.prompt("next")).stop_reason == "end_turn"
    finally:
        await client.close()


# An agent that never answers a cancel: tests/faults/test_lifecycle.py.


async def test_stderr_flood_does_not_block_the_agent():
    client, session = await open_session({"prompt": [{"stderr_flood": 2_000_000}, {"chunk": "after flood"}]})
    try:
        turn = await session.prompt("go")
        assert turn.text == "after flood"
        assert client.transport.stderr.total >= 2_000_000
    finally:
        await client.close()


async def test_children_of_the_agent_are_ended_on_close():
    client, session = await open_session({"prompt": [{"spawn": "sleep 600"}, {"spawn_detached": "sleep 600"}]})
    turn = await session.prompt("go")
    pids = [int(w) for w in turn.text.split() if w.isdigit()]
    assert len(pids) == 2 and all(proctree.alive(p) for p in pids)
    await client.close()
    assert not any(proctree.alive(p) for p in pids)


async def test_auth_required_is_explained():
    scenario = {
        "init": {"authMethods": [
            {"id": "key", "name": "API key", "type": "env_var", "vars": [{"name": "DEMO_API_KEY"}]},
            {"id": "login", "name": "Log in", "type": "terminal", "args": ["--login"]},
            {"id": "oauth", "name": "OAuth"},
        ]},
        "new_session": {"error": {"code": -32000, "message": "Authentication required"}},
    }
    client = await Client(scripted_spec(scenario)).start()
    try:
        with pytest.raises(AuthRequired) as info:
            await client.new_session()
        text = str(info.value)
        assert "set DEMO_API_KEY" in text
        assert "--login` in a terminal" in text
        assert "authenticate with method id 'oauth'" in text
    finally:
        await client.close()


async def test_slow_consumer_sees_all_the_text_in_order():
    client, session = await open_session({"prompt": [{"burst": 3000}]})
    try:
        turn = session.begin("go")
        seen = []
        async for event in turn.stream():
            if getattr(event, "role", None) == "agent":
                seen.append(event.text)
                if len(seen) % 100 == 0:
                    await asyncio.sleep(0.005)  # a consumer slower than the stream
        await session.finish(turn)
        # A run of chunks that came in one read is one event (Connection.on_text_chunk).
        assert "".join(seen) == "".join(f"{i} " for i in range(3000)) and len(seen) <= 3000
    finally:
        await client.close()


async def test_load_replays_history_into_background():
    history = [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "old question"}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "old answer"}},
    ]
    client = await Client(scripted_spec({"load": True, "history": history})).start()
    try:
        session = await client.load_session("sess-old")
        assert session.background.text == "old answer"
        assert [e.text for e in session.background.events if getattr(e, "role", None) == "user"] == ["old question"]
    finally:
        await client.close()


async def test_a_replay_after_the_load_answer_is_waited_for_and_prompts_are_counted_once():
    """Gemini CLI answers ``session/load`` and then replays the history: the load
    is done when the replay goes quiet, so nothing of it lands in the next turn."""
    from acp_kernel.client.host import ClientSettings, Limits

    def text(kind: str, t: str) -> dict:
        return {"sessionUpdate": kind, "content": {"type": "text", "text": t}}

    history = []
    for i in range(10):  # each prompt in two chunks, as an agent may send one message
        history += [text("user_message_chunk", f"question {i} "), text("user_message_chunk", "(cont.)"),
                    text("agent_message_chunk", f"answer {i}")]
    settings = ClientSettings(limits=Limits(replay_quiet_seconds=2.0))
    client = await Client(scripted_spec({"load": True, "history": history, "replay_after": 0.02}),
                          settings=settings).start()
    try:
        session = await client.load_session("sess-old")
        assert session.background.text == "".join(f"answer {i}" for i in range(10))
        turn = session.begin("next")
        await asyncio.wait_for(session.finish(turn), 30)
        assert turn.text == "ok"  # the scripted agent's default answer, and nothing replayed
    finally:
        await client.close()


def test_describe_auth_without_methods():
    assert "lists no methods" in describe_auth([])


def test_no_kernel_sigint_reaches_agents():
    # Agents run in their own session: a different process group from ours.
    async def main():
        client = await Client(scripted_spec({})).start()
        try:
            return os.getpgid(client.transport.pid) != os.getpgid(0)
        finally:
            await client.close()

    assert asyncio.run(main())
