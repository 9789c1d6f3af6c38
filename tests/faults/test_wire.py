"""What comes over the wire is wrong: garbage, bad UTF-8, huge lines, floods,
stray and duplicate responses, updates at odd times. Library level, real pipes."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random

from acp_kernel.client.session import Client
from acp_kernel.client.turn import UnknownUpdate

from ..conftest import scripted_spec

from .conftest import notices, open_session, reset_peak_rss, rss_kib, trim_heap, wait_text


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_garbage_bytes_and_invalid_utf8_are_reported_and_skipped():
    rng = random.Random(7)
    junk = bytes(rng.randrange(256) for _ in range(65536)).replace(b"{", b"(") + b"\n"
    chunk = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "$SID", "update": {"sessionUpdate": "agent_message_chunk",
                                        "content": {"type": "text", "text": "XX"}}}}).encode()
    scenario = {"prompts": {"go": [
        {"chunk": "before "},
        {"raw_b64": b64(junk)},
        {"raw_b64": b64(b"\x00\x00\x00\r\n\x1b[31mred\x1b[0m\n\xc3\x28\n\xed\xa0\x80\n")},
        {"raw_b64": b64(b"".join([b"  \t\n", b"\n" * 100]))},  # blank lines: nothing
        {"raw": "null"}, {"raw": "[1,2,3]"}, {"raw": '"just a string"'},
        {"raw": '{"jsonrpc":"2.0","method":7}'},
        {"raw": '{"jsonrpc":"2.0","id":{"x":1},"method":"fs/read_text_file"}'},
        {"raw": '{"level":"info","msg":"JSON log line on stdout"}'},
        {"raw": '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"x","update":'},
        {"chunk": "after"},
    ]}}
    # $SID is only replaced in JSON actions: put the real id in by a send action instead.
    scenario["prompts"]["go"].insert(-1, {"send": json.loads(chunk.decode().replace("XX", "valid"))})
    client, session = await open_session(scenario)
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 20)
        assert turn.stop_reason == "end_turn" and client.alive
        assert turn.text == "before validafter"  # good text kept, bad never half-applied
        text = notices(turn, "warning")
        assert "not JSON" in text and "invalid UTF-8" in text
        assert "JSON NoneType" in text and "JSON list" in text and "JSON str" in text
        assert "method is not a string" in text
        assert "request id is neither" in text
        assert "neither request, notification nor response" in text
        assert client.conn.noise_count >= 10
        assert (await session.prompt("again")).text == "ok"
    finally:
        await client.close()


async def test_invalid_utf8_inside_a_real_message():
    # A real update whose text holds an invalid byte: reported and skipped whole
    # (never half-applied); the valid non-ASCII update after it arrives intact.
    # A fixed session id (session/load) lets the raw lines name it.
    line = json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": "sess-fixed", "update": {"sessionUpdate": "agent_message_chunk",
                                              "content": {"type": "text", "text": "XX"}}}}).encode()
    scenario = {"load": True, "prompts": {"go": [
        {"chunk": "a"},
        {"raw_b64": b64(line.replace(b"XX", b"bad \xff byte") + b"\n")},
        {"raw_b64": b64(line.replace(b"XX", "ünïcödé ✓".encode()) + b"\n")},
    ]}}
    client = await Client(scripted_spec(scenario)).start()
    try:
        session = await client.load_session("sess-fixed")
        turn = await session.prompt("go")
        assert turn.text == "aünïcödé ✓"
        assert "invalid UTF-8" in notices(turn)
        assert (await session.prompt("next")).text == "ok"
    finally:
        await client.close()


async def test_stray_and_duplicate_responses():
    scenario = {"prompts": {"go": [
        {"chunk": "working "},
        {"send": {"jsonrpc": "2.0", "id": 424242, "result": {"stopReason": "end_turn"}}},
        {"send": {"jsonrpc": "2.0", "id": "no-such-request", "error": {"code": -1, "message": "what"}}},
        {"send": {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}},
        {"chunk": "still working "},
    ]}, "after_prompt": [
        # the prompt's id answered again, twice: the first answer stands
        {"reply_prompt": {"result": {"stopReason": "refusal"}}},
        {"reply_prompt": {"error": {"code": -32603, "message": "late error"}}},
        {"chunk": "LATE"},
    ]}
    client, session = await open_session(scenario)
    try:
        turn = await session.prompt("go")
        assert turn.stop_reason == "end_turn" and turn.error is None
        assert turn.text.startswith("working still working ")
        during = notices(turn)
        assert "response to unknown request id 424242" in during
        assert "response to unknown request id 'no-such-request'" in during
        assert "response to unknown request id None" in during
        await wait_text(turn, "LATE")
        reports = "\n".join(n.text for n in client.reports)
        assert reports.count("stray-response") >= 5  # 3 during the turn + 2 duplicates
        nxt = await session.prompt("next")
        assert nxt.text.startswith("ok") and nxt.stop_reason == "end_turn"
    finally:
        await client.close()


async def test_a_response_whose_id_differs_only_in_type_is_not_taken():
    # The prompt's id is an int; an answer with the same digits as a string is a different id.
    scenario = {"prompts": {"go": [{"chunk": "x"}, {"send": {"jsonrpc": "2.0", "id": "2", "result": {"stopReason": "refusal"}}},
                                   {"send": {"jsonrpc": "2.0", "id": 2.0, "result": {"stopReason": "refusal"}}},
                                   {"chunk": "y"}]}}
    client, session = await open_session(scenario)
    try:
        turn = await session.prompt("go")
        assert turn.text == "xy" and turn.stop_reason == "end_turn"
        assert "response to unknown request id '2'" in notices(turn)
        assert (await session.prompt("next")).text == "ok"
    finally:
        await client.close()


async def test_hundred_megabyte_line_with_default_limit_keeps_memory_bounded():
    size = 100_000_000
    client, session = await open_session({"prompts": {"go": [{"chunk": "a"}, {"big_line": size}, {"chunk": "b"}]}})
    try:
        trim_heap()
        can_reset = reset_peak_rss()
        before = rss_kib()
        turn = await asyncio.wait_for(session.prompt("go"), 300)
        after = rss_kib()
        trim_heap()  # what is held, not what the allocator caches (a worker's earlier tests shape its heap)
        held = rss_kib()
        assert turn.text == "ab" and turn.stop_reason == "end_turn"
        assert "skipped a 100,000,0" in notices(turn, "warning") and "67,108,864-byte limit" in notices(turn)
        peak_growth_mib = (after["VmHWM"] - before["VmRSS"]) / 1024 if can_reset else None
        rss_growth_mib = (held["VmRSS"] - before["VmRSS"]) / 1024
        # The splitter holds at most the limit (64 MiB) of an unfinished line, then
        # drops it as it streams: the peak stays under the limit plus slack, far
        # below the line's 100 MB (+ its decoded copy), and it is given back.
        if peak_growth_mib is not None:
            assert peak_growth_mib < 64 + 8, (peak_growth_mib, before, after)
        assert rss_growth_mib < 20, (rss_growth_mib, before, after)
        assert (await session.prompt("again")).text == "ok"
    finally:
        await client.close()


async def test_oversized_line_with_a_small_limit_costs_no_memory():
    client, session = await open_session({"prompts": {"go": [{"chunk": "a"}, {"big_line": 30_000_000}, {"chunk": "b"}]}},
                                         max_line=1 << 20)
    try:
        reset_peak_rss()
        before = rss_kib()
        turn = await session.prompt("go")
        after = rss_kib()
        assert turn.text == "ab"
        assert (after["VmHWM"] - before["VmRSS"]) / 1024 < 10
        assert (await session.prompt("next")).text == "ok"
    finally:
        await client.close()


async def test_burst_of_ten_thousand_notifications():
    client, session = await open_session({"prompts": {"go": [{"burst": 10_000}]}})
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 120)  # the only clock (speed: benchmarks `chunks`)
        assert turn.text == "".join(f"{i} " for i in range(10_000))
        assert 1 <= len(turn.events) <= 10_000  # a run of lines that came in one read is one event
        assert (await session.prompt("next")).text == "ok"
    finally:
        await client.close()


async def test_updates_before_session_new_response_and_after_prompt_response():
    scenario = {
        "before_new": [{"chunk": "early "}, {"update": {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}},
                       {"update": {"sessionUpdate": "tool_call", "toolCallId": "pre", "title": "Warm up",
                                   "status": "completed"}}],
        "prompts": {"go": [{"chunk": "during"}]},
        "after_prompt": [{"chunk": " after"}, {"update": {"sessionUpdate": "plan", "entries": [
            {"content": "late plan", "status": "pending", "priority": "low"}]}}, {"chunk": " END"}],
    }
    client, session = await open_session(scenario)
    try:
        assert session.background.text == "early " and session.current_mode == "plan"
        assert session.background.tool_calls["pre"].status == "completed"
        turn = await session.prompt("go")
        await wait_text(turn, "END")
        assert turn.text == "during after END" and turn.late_events == 3
        assert turn.plan[0]["content"] == "late plan"
        assert turn.stop_reason == "end_turn"
        # the next turn is not polluted by the late updates of the previous one
        nxt = await session.prompt("next")
        await wait_text(nxt, "END")
        assert nxt.text == "ok after END"
    finally:
        await client.close()


async def test_tool_call_update_for_an_id_never_announced():
    scenario = {"prompts": {"go": [
        {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "ghost", "status": "completed",
                    "title": "Ghost edit", "content": [{"type": "content", "content": {"type": "text", "text": "did it"}}]}},
        {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "", "status": "completed"}},
        {"update": {"sessionUpdate": "tool_call_update", "status": "completed"}},
        {"update": {"sessionUpdate": "tool_call_update", "toolCallId": 17, "status": "completed"}},
        {"chunk": "fine"},
    ]}}
    client, session = await open_session(scenario)
    try:
        turn = await session.prompt("go")
        ghost = turn.tool_calls["ghost"]
        assert not ghost.announced and ghost.title == "Ghost edit" and ghost.status == "completed"
        assert ghost.text == "did it"
        kept = [e for e in turn.events if isinstance(e, UnknownUpdate)]
        assert len(kept) == 3  # malformed ids are kept raw, not dropped, not fatal
        assert turn.text == "fine" and turn.stop_reason == "end_turn"
        assert (await session.prompt("next")).text == "ok"
    finally:
        await client.close()


async def test_session_update_with_broken_shapes():
    scenario = {"prompts": {"go": [
        {"send": {"jsonrpc": "2.0", "method": "session/update", "params": None}},
        {"send": {"jsonrpc": "2.0", "method": "session/update", "params": [1, 2]}},
        {"send": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "$SID", "update": "text?"}}},
        {"send": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "$SID"}}},
        {"update": {"sessionUpdate": "agent_message_chunk", "content": "not a block"}},
        {"update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": 5}}},
        {"update": {"sessionUpdate": "plan", "entries": "nope"}},
        {"update": {"sessionUpdate": "usage_update", "used": None, "size": None, "cost": None}},
        {"send": {"jsonrpc": "2.0", "method": "_vendor/whatever", "params": {"x": 1}}},
        {"send": {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "sess-unknown", "update": {}}}},
        {"chunk": "survived"},
    ]}}
    client, session = await open_session(scenario)
    try:
        turn = await session.prompt("go")
        assert "survived" in turn.text and turn.stop_reason == "end_turn" and client.alive
        assert "not an object" in notices(turn)
        from acp_kernel.view import TurnView  # the renderer survives these shapes too
        from acp_kernel.view.sink import RecordingSink

        sink = RecordingSink()
        TurnView(turn, sink).close()
        assert "survived" in sink.markdown()
        assert (await session.prompt("next")).text == "ok"
    finally:
        await client.close()


def test_random_bytes_are_not_requests():
    # Sanity for the junk generator above: '{'-free bytes can never parse as an object.
    from acp_kernel.protocol.framing import classify, Noise

    rng = random.Random(1)
    for _ in range(200):
        line = os.urandom(rng.randrange(1, 200)).replace(b"{", b"(").replace(b"\n", b" ")
        assert type(classify(line)) is Noise
