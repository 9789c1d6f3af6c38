"""A hostile agent cannot make the client grow without bound: deep JSON,
updates for unknown sessions, warning floods, and turn history are all
bounded, each at its edge. Real agent processes over real pipes."""

from __future__ import annotations

import asyncio
import json

from acp_kernel.client.host import ClientSettings, Limits
from acp_kernel.client.session import EARLY_SESSIONS, Client
from acp_kernel.client.turn import NOTICE_BURST, Chunk, Notice
from acp_kernel.view.sink import RecordingSink
from acp_kernel.view.turnview import TurnView

from ..conftest import scripted_spec
from ..faults.conftest import answers, notices, open_session


def limits(**kw) -> ClientSettings:
    return ClientSettings(limits=Limits(**kw))


def chunk_to(sid: str, text: str) -> dict:
    return {"send": {"jsonrpc": "2.0", "method": "session/update", "params": {
        "sessionId": sid, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}}}


# -- JSON nesting depth --------------------------------------------------------


async def test_deep_updates_at_the_limit_are_taken_past_it_refused_and_the_answer_arrives():
    depth = Limits().json_depth
    scenario = {"prompts": {"go": [
        {"deep": {"depth": depth}},
        {"deep": {"depth": depth + 1}},
        {"deep": {"depth": 2000}},  # a 4 KB line that used to raise RecursionError
        {"chunk": "answer"},
    ]}}
    client, session = await open_session(scenario)
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 20)
        assert turn.stop_reason == "end_turn" and turn.error is None
        assert turn.text == f"DEEP{depth} answer"
        text = notices(turn, "warning")
        assert f"nested {depth + 1} levels deep (the limit is {depth}, limits.json_depth)" in text
        assert "nested 2,000 levels deep" in text
        assert (await session.prompt("again")).text == "ok"
    finally:
        await client.close()


async def test_a_deep_request_gets_a_clear_invalid_request_error():
    depth = 20
    scenario = {"prompts": {"go": [
        {"deep": {"as": "request", "depth": depth, "method": "_test/deep"}},
        {"deep": {"as": "request", "depth": depth + 1, "method": "_test/deep"}},
        {"deep": {"as": "request", "depth": 2000, "method": "fs/read_text_file"}},
    ]}}
    client, session = await open_session(scenario, settings=limits(json_depth=depth))
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 20)
        got = answers(turn)
        assert [kind for kind, _ in got] == ["ERROR", "ERROR", "ERROR"]
        assert got[0][1]["code"] == -32601  # at the limit: decoded, an unknown method
        assert got[1][1]["code"] == -32600 and f"nested {depth + 1} levels deep" in got[1][1]["message"]
        assert got[2][1]["code"] == -32600 and "limits.json_depth" in got[2][1]["message"]
        assert turn.stop_reason == "end_turn" and client.alive
        assert "refused request 'fs/read_text_file'" in notices(turn, "warning")
    finally:
        await client.close()


async def test_a_deep_answer_to_the_prompt_ends_the_turn_with_an_error_not_a_hang():
    scenario = {"prompts": {"go": [{"chunk": "partial"}, {"deep": {"as": "prompt_answer", "depth": 2000}}]}}
    client, session = await open_session(scenario)
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 20)
        assert turn.text == "partial"
        assert turn.error is not None and "answer was refused" in turn.error and "limits.json_depth" in turn.error
        assert client.alive and (await session.prompt("next")).text == "ok"
    finally:
        await client.close()


# -- updates for unknown session ids ------------------------------------------


async def _early(before_new: list, **kw) -> tuple[Client, object]:
    client = await Client(scripted_spec({"before_new": before_new}), settings=limits(**kw)).start()
    return client, await client.new_session()


async def test_updates_before_session_new_are_kept_up_to_the_limit():
    limit = 5
    client, session = await _early([chunk_to("$SID", f"u{i} ") for i in range(limit)], unknown_session_updates=limit)
    try:
        assert session.background.text == "u0 u1 u2 u3 u4 "
        assert client.early_dropped == 0 and not client.reports
    finally:
        await client.close()


async def test_one_update_past_the_limit_is_dropped_with_one_report():
    limit = 5
    client, session = await _early([chunk_to("$SID", f"u{i} ") for i in range(limit + 3)], unknown_session_updates=limit)
    try:
        assert session.background.text == "u0 u1 u2 u3 u4 "
        assert client.early_dropped == 3
        reports = [n.text for n in client.reports if "unknown session" in n.text]
        assert len(reports) == 1 and "limits.unknown_session_updates" in reports[0]
        assert client._early_count == 0 and client._early == {}
    finally:
        await client.close()


async def test_distinct_unknown_session_ids_are_bounded_and_the_total_across_ids_too():
    ghosts = [chunk_to(f"ghost-{i}", "x") for i in range(EARLY_SESSIONS + 1)]
    scenario = {"prompts": {"go": [*ghosts, *ghosts, {"chunk": "done"}]}}
    client, session = await open_session(scenario, settings=limits(unknown_session_updates=EARLY_SESSIONS + 4))
    try:
        turn = await asyncio.wait_for(session.prompt("go"), 20)
        assert turn.text == "done"
        # EARLY_SESSIONS ids kept; the extra id dropped; then the total limit (4 more) binds.
        assert len(client._early) == EARLY_SESSIONS
        assert client._early_count == EARLY_SESSIONS + 4
        assert sum(len(v) for v in client._early.values()) == EARLY_SESSIONS + 4
        assert client.early_dropped == 2 * (EARLY_SESSIONS + 1) - (EARLY_SESSIONS + 4)
        text = notices(turn, "warning")
        assert text.count("updates for unknown session ids") == 1
        assert f"{EARLY_SESSIONS} distinct unknown session ids" in text
    finally:
        await client.close()


# -- warning floods ------------------------------------------------------------


async def test_warnings_up_to_the_burst_show_one_by_one_one_more_starts_a_summary():
    scenario = {"prompts": {"edge": [{"noise_flood": NOTICE_BURST}], "past": [{"noise_flood": NOTICE_BURST + 1}]}}
    client, session = await open_session(scenario)
    try:
        turn = await session.prompt("edge")
        shown = [e for e in turn.events if type(e) is Notice]
        assert len(shown) == NOTICE_BURST and all(n.key is None for n in shown)
        turn = await session.prompt("past")
        shown = [e for e in turn.events if type(e) is Notice]
        assert len(shown) == NOTICE_BURST + 1
        summary = shown[-1]
        assert summary.key is not None and summary.count == 1
        assert summary.text.startswith("... and 1 more like this; the last: noise: not JSON: noise line 3")
    finally:
        await client.close()


async def test_twenty_thousand_noise_lines_make_a_bounded_number_of_outputs_and_the_answer_arrives():
    n = 20_000
    scenario = {"prompts": {"go": [{"chunk": "before "}, {"noise_flood": n}, {"chunk": "the answer"}]}}
    client, session = await open_session(scenario)
    try:
        sink = RecordingSink()
        turn = session.begin("go")
        view = TurnView(turn, sink, session=session)
        await asyncio.wait_for(session.finish(turn), 30)
        view.close()
        assert turn.text == "before the answer" and turn.stop_reason == "end_turn"
        shown = [e for e in turn.events if type(e) is Notice]
        assert len(shown) == NOTICE_BURST + 1
        assert shown[-1].count == n - NOTICE_BURST
        # Bounded: a handful of displays, and summary updates at the view's rate.
        assert len(sink.messages) < 60, len(sink.messages)
        outputs = [json.dumps(o) for o in sink.outputs()]
        assert sum("more like this" in o for o in outputs) == 1
        assert any(f"{n - NOTICE_BURST:,} more like this" in o and f"noise line {n - 1}" in o for o in outputs)
        assert "Done" in outputs[-1]  # the status line still comes last
    finally:
        await client.close()


# -- retained turn history -----------------------------------------------------


def _busy_turn() -> list:
    big = "x" * 20_000  # three copies stay under the 128 KiB argv limit
    return [
        {"update": {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm " * 100}}},
        {"chunk": "Answer "},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Write big", "kind": "edit",
                    "status": "pending", "rawInput": {"content": big}}},
        {"update": {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                    "content": [{"type": "content", "content": {"type": "text", "text": big}},
                                {"type": "diff", "path": "/tmp/big.txt", "newText": big}]}},
        {"update": {"sessionUpdate": "plan", "entries": [{"content": "step", "status": "completed", "priority": "low"}]}},
        {"burst": 200},
    ]


async def test_finished_turns_past_the_detailed_limit_are_compacted_and_still_readable():
    keep = 2
    client, session = await open_session({"prompt": _busy_turn()}, settings=limits(detailed_turns=keep))
    try:
        first = await session.prompt("one")
        full_text = first.text
        full_events = len(first.events)
        await session.prompt("two")
        assert not any(t.compacted for t in session.turns)  # at the limit: all detailed
        assert len(first.events) == full_events
        await session.prompt("three")  # one past it: the oldest is compacted
        assert [t.compacted for t in session.turns] == [True, False, False]
        assert first.text == full_text and first.thoughts == ""
        assert first.stop_reason == "end_turn" and first.plan and first.plan[0]["content"] == "step"
        call = first.tool_calls["t1"]
        assert (call.title, call.kind, call.status) == ("Write big", "edit", "completed")
        assert call.raw_input is None and len(call.text) < 2_200 and "(diff of /tmp/big.txt)" in call.text
        assert len(first.events) <= 5 < full_events
        assert [type(e).__name__ for e in first.events] == ["Chunk", "ToolCallEvent", "PlanEvent", "Chunk"]
        assert "".join(e.text for e in first.events if type(e) is Chunk) == full_text
        assert session.tool_call_kind("t1") == "edit"
        from acp_kernel.view.transcript import render_markdown, status_line

        md = render_markdown(first, session)  # what a saved transcript of the old turn shows
        assert "Answer" in md and "Write big" in md and "199" in md
        assert status_line(first, session).startswith("Done")
    finally:
        await client.close()
