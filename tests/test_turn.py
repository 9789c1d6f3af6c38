"""Turn state: pure folding of updates into events."""

from __future__ import annotations

from acp_kernel.turn import Chunk, Notice, PlanEvent, ToolCallEvent, Turn, UnknownUpdate


def chunk(text, kind="agent_message_chunk"):
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def test_text_and_thoughts_accumulate_and_empty_chunks_vanish():
    t = Turn("s")
    for u in [chunk("a"), chunk(""), chunk("b"), chunk("hm", "agent_thought_chunk")]:
        t.apply_update(u)
    assert t.text == "ab" and t.thoughts == "hm"
    assert [type(e) for e in t.events] == [Chunk, Chunk, Chunk]


def test_models_are_built_on_demand():
    t = Turn("s")
    ev = t.apply_update(chunk("hello"))
    assert ev.model.content.text == "hello"


def test_repeated_tool_call_is_an_update_and_unknown_update_creates():
    t = Turn("s")
    t.apply_update({"sessionUpdate": "tool_call", "toolCallId": "1", "title": "Read", "kind": "read",
                    "content": [{"type": "content", "content": {"type": "text", "text": "x"}}]})
    ev = t.apply_update({"sessionUpdate": "tool_call", "toolCallId": "1", "status": "in_progress"})
    assert isinstance(ev, ToolCallEvent) and not ev.new
    assert t.tool_calls["1"].title == "Read" and t.tool_calls["1"].status == "in_progress"
    assert t.tool_calls["1"].text == "x"
    ev = t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "2", "status": "completed",
                         "content": [{"type": "diff", "path": "/a", "oldText": "1", "newText": "2"}]})
    assert ev.new and not ev.call.announced and t.tool_calls["2"].diffs[0]["path"] == "/a"
    # content replaces, it does not append
    t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "2", "content": []})
    assert t.tool_calls["2"].content == []


def test_plan_replaces_and_unknown_kinds_are_kept():
    t = Turn("s")
    t.apply_update({"sessionUpdate": "plan", "entries": [{"content": "a", "status": "pending"}]})
    ev = t.apply_update({"sessionUpdate": "plan", "entries": [{"content": "b", "status": "completed"}]})
    assert isinstance(ev, PlanEvent) and t.plan == [{"content": "b", "status": "completed"}]
    ev = t.apply_update({"sessionUpdate": "hologram", "x": 1})
    assert isinstance(ev, UnknownUpdate) and ev.raw == {"sessionUpdate": "hologram", "x": 1}
    ev = t.apply_update("not an object")
    assert isinstance(ev, Notice)


def test_cancel_marks_open_tool_calls():
    t = Turn("s")
    t.apply_update({"sessionUpdate": "tool_call", "toolCallId": "1", "title": "Run", "status": "in_progress"})
    t.apply_update({"sessionUpdate": "tool_call", "toolCallId": "2", "title": "Done", "status": "completed"})
    ended = []
    t.subscribe(ended.append)
    t.finish("cancelled")
    assert t.tool_calls["1"].status == "cancelled" and t.tool_calls["2"].status == "completed"
    assert ended == [None] and t.done


def test_repeated_warnings_are_coalesced_and_reemitted_a_bounded_number_of_times():
    from acp_kernel.turn import NOTICE_BURST

    t = Turn("s")
    heard: list = []
    t.subscribe(heard.append)
    for i in range(20_000):
        t.add(Notice("warning", f"noise {i}", kind="noise"))
    t.add(Notice("warning", "something else", kind="other"))
    t.finish("end_turn")
    notices = [e for e in t.events if type(e) is Notice]
    assert [n.text for n in notices[:NOTICE_BURST]] == [f"noise {i}" for i in range(NOTICE_BURST)]
    summary = notices[NOTICE_BURST]
    assert summary.key and summary.count == 20_000 - NOTICE_BURST
    assert summary.text == f"... and {20_000 - NOTICE_BURST:,} more like this; the last: noise 19999"
    assert notices[-1].text == "something else" and len(notices) == NOTICE_BURST + 2
    reemits = [e for e in heard if e is summary]
    assert 2 <= len(reemits) <= 30  # 1, 2, 5, 10, ... plus the final count
    assert heard[-2] is summary and heard[-1] is None  # the final count before the end


def test_info_notices_are_never_coalesced():
    t = Turn("s")
    for _ in range(10):
        t.add(Notice("info", "cancelling..."))
    assert len(t.events) == 10


def test_compact_keeps_text_tool_state_plan_and_drops_thoughts():
    t = Turn("s", prompt=[{"type": "text", "text": "hi"},
                          {"type": "resource", "resource": {"uri": "file:///a/b.txt", "text": "x" * 10_000}}])
    t.apply_update(chunk("think", "agent_thought_chunk"))
    t.apply_update(chunk("a"))
    t.apply_update({"sessionUpdate": "tool_call", "toolCallId": "1", "title": "Run", "kind": "execute",
                    "rawInput": {"command": "ls"}, "rawOutput": "y" * 10_000})
    t.apply_update(chunk("b"))
    t.apply_update(chunk("c"))
    t.compact()
    assert not t.compacted  # only finished turns
    t.finish("end_turn")
    t.compact()
    assert t.compacted and t.text == "abc" and t.thoughts == ""
    assert [type(e).__name__ for e in t.events] == ["Chunk", "ToolCallEvent", "Chunk", "Notice"]
    call = t.tool_calls["1"]
    assert call.status == "cancelled" and call.raw_output is None and call.raw_input is None
    assert t.prompt == [{"type": "text", "text": "hi"}, {"type": "resource_link", "uri": "file:///a/b.txt", "name": "b.txt"}]
