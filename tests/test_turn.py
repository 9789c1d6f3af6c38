"""Turn state: pure folding of updates into events."""

from __future__ import annotations

from acp_kernel.client.turn import Chunk, Notice, PlanEvent, ToolCallEvent, Turn, UnknownUpdate


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
    from acp_kernel.client.turn import NOTICE_BURST

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


# -- command output outside ``content`` (real adapters' payloads) -------------

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

PAYLOADS = Path(__file__).parent / "fixtures" / "payloads"
HOSTILE_OUTPUT = "<img src=x onerror=alert(1)>\n`code span\nacross a line` </pre>\n/tmp/a\nb.txt\n"


def _payloads():
    return sorted(PAYLOADS.glob("*.json"))


@pytest.mark.parametrize("path", _payloads(), ids=lambda p: p.stem)
def test_real_payloads_fill_output_and_exit_code(path):
    from acp_kernel.client.turn import update_model

    fixture = json.loads(path.read_text())
    t = Turn("s")
    for update in fixture["updates"]:
        update_model(update)  # the fixture is a valid ACP update (the SDK's model)
        t.apply_update(update)
    (call,) = t.tool_calls.values()
    expect = fixture["expect"]
    assert call.output == expect["output"]
    assert call.exit_code == expect["exit_code"]
    assert call.status == expect["status"]
    assert call.output_dropped == 0
    # A terminal the agent only reports through _meta is flagged as the agent's.
    uses_meta = any("terminal_" in k for u in fixture["updates"] for k in (u.get("_meta") or {}))
    assert call.agent_terminal == uses_meta


def test_there_are_payloads_of_each_adapter():
    stems = {p.stem.split("_")[0] for p in _payloads()}
    assert {"codex", "claude", "pi"} <= stems


def test_streamed_output_is_not_doubled_by_the_final_raw_output():
    fixture = json.loads((PAYLOADS / "codex_acp_terminal_meta.json").read_text())
    t = Turn("s")
    for update in fixture["updates"]:
        t.apply_update(update)
    call = t.tool_calls["call_9x"]
    assert call.output == "ok 1\nwarning: slow\nok 2\n"  # once, though rawOutput has it too


def test_output_and_exit_in_one_update_with_raw_output_counts_the_output_once():
    t = Turn("s")
    t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "1", "status": "completed",
                    "_meta": {"terminal_output": {"terminal_id": "1", "data": "done\n"},
                              "terminal_exit": {"terminal_id": "1", "exit_code": 0, "signal": None}},
                    "rawOutput": {"aggregated_output": "done\n", "exit_code": 0}})
    assert t.tool_calls["1"].output == "done\n" and t.tool_calls["1"].exit_code == 0


def test_raw_output_stdout_and_stderr_and_pi_details():
    t = Turn("s")
    t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "a",
                    "rawOutput": {"stdout": "out", "stderr": "err\n", "exit_code": 3}})
    assert t.tool_calls["a"].output == "out\nerr\n" and t.tool_calls["a"].exit_code == 3
    t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "b",
                    "rawOutput": {"content": [{"type": "text", "text": "x"}],
                                  "details": {"stdout": "x\n", "exitCode": 0}}})
    assert t.tool_calls["b"].output == "x\n" and t.tool_calls["b"].exit_code == 0
    # The demo agent's shape: an exit code, no output.
    t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "c",
                    "rawOutput": {"exitCode": 1, "signal": None}})
    assert t.tool_calls["c"].output == "" and t.tool_calls["c"].exit_code == 1


def test_tool_results_that_are_not_command_results_make_no_output():
    t = Turn("s")
    for raw in ["file1.txt", ["a"], {"result": "42"}, None, 7]:
        t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "r", "rawOutput": raw})
    call = t.tool_calls["r"]
    assert call.output == "" and call.exit_code is None and not call.agent_terminal
    assert call.raw_output == 7


def test_hostile_output_is_kept_verbatim_and_wrong_types_are_ignored():
    t = Turn("s")
    t.apply_update({"sessionUpdate": "tool_call", "toolCallId": "h", "title": "<b>x</b>",
                    "_meta": {"terminal_info": {"terminal_id": "h\n<img>", "cwd": "/tmp/a\nb"}}})
    t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "h",
                    "_meta": {"terminal_output": {"terminal_id": "h", "data": HOSTILE_OUTPUT}}})
    for bad in [{"data": 5}, {"data": None}, {"data": ["x"]}, "text", ["x"], None]:
        t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "h",
                        "_meta": {"terminal_output": bad, "terminal_output_delta": bad}})
    for code in [True, "1", 1.5, None, {"x": 1}]:
        t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "h",
                        "_meta": {"terminal_exit": {"exit_code": code}}})
    t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "h", "_meta": "not an object"})
    call = t.tool_calls["h"]
    # The turn keeps agent text as sent: escaping is the view's job (safe.py).
    assert call.output == HOSTILE_OUTPUT
    assert call.exit_code is None and call.agent_terminal
    t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "h",
                    "_meta": {"terminal_exit": {"exit_code": -9, "signal": "SIGKILL"}}})
    assert call.exit_code == -9


def test_output_deltas_are_bounded_to_the_last_characters():
    t = Turn("s", tool_output_limit=100)
    for i in range(1000):
        t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "n",
                        "_meta": {"terminal_output_delta": {"data": f"{i:04d}\n"}}})
    call = t.tool_calls["n"]
    assert len(call.output) == 100 and call.output.endswith("0999\n")
    assert call.output_dropped == 5000 - 100
    assert (call.output_dropped + len(call.output)) == 5 * 1000


def test_session_takes_the_output_limit_from_its_limits():
    from acp_kernel.client.host import ClientSettings, Limits
    from acp_kernel.client.session import Session

    session = Session(None, "s", "/", ClientSettings(limits=Limits(tool_output_chars=10)))  # type: ignore[arg-type]
    session.apply({"sessionUpdate": "tool_call", "toolCallId": "1",
                   "_meta": {"terminal_output": {"terminal_id": "1", "data": "0123456789abc"}}})
    assert session.background.tool_calls["1"].output == "3456789abc"


def test_compaction_keeps_a_bounded_tail_of_the_output():
    from acp_kernel.client.turn import COMPACT_TOOL_TEXT

    t = Turn("s")
    t.apply_update({"sessionUpdate": "tool_call", "toolCallId": "1", "status": "completed",
                    "_meta": {"terminal_output": {"terminal_id": "1", "data": "x" * 5000 + "END"},
                              "terminal_exit": {"terminal_id": "1", "exit_code": 0}}})
    t.finish("end_turn")
    t.compact()
    call = t.tool_calls["1"]
    assert len(call.output) == COMPACT_TOOL_TEXT and call.output.endswith("END")
    assert call.output_dropped == 5003 - COMPACT_TOOL_TEXT and call.exit_code == 0


def test_raw_output_already_shown_in_the_content_is_not_repeated():
    t = Turn("s")
    t.apply_update({"sessionUpdate": "tool_call", "toolCallId": "1",
                    "content": [{"type": "content", "content": {"type": "text", "text": "```sh\nsame\n```\n"}}]})
    t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "1", "status": "completed",
                    "rawOutput": {"aggregated_output": "same\n", "exit_code": 0}})
    assert t.tool_calls["1"].output == "" and t.tool_calls["1"].exit_code == 0
    t.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "2", "status": "completed",
                    "content": [{"type": "content", "content": {"type": "text", "text": "a summary"}}],
                    "rawOutput": {"aggregated_output": "other\n", "exit_code": 1}})
    assert t.tool_calls["2"].output == "other\n" and t.tool_calls["2"].exit_code == 1


def test_a_changed_message_id_starts_a_new_message_and_each_raw_update_stays_as_sent():
    def said(text, mid, kind="agent_message_chunk"):
        return {"sessionUpdate": kind, "messageId": mid, "content": {"type": "text", "text": text}}

    t = Turn("s")
    updates = [said("Looking", "m1"), said(" now.", "m1"), said("Found it", "m2"), said("a\n", "m3"), said("b", "m4"),
               said("x", "t1", "agent_thought_chunk"), said("y", "t2", "agent_thought_chunk"), chunk(" (no id)")]
    for u in updates:
        t.apply_update(u)
    assert t.text == "Looking now.\n\nFound it\n\na\n\nb (no id)"
    assert t.thoughts == "x\n\ny"
    assert [e.raw for e in t.events] == updates  # rebuilt (id included) or kept: always what the agent sent
    assert [e.message_id for e in t.events] == ["m1", "m1", "m2", "m3", "m4", "t1", "t2", None]
    assert t.events[1]._raw is None and t.events[2]._raw is not None  # plain chunks keep no dict; a break keeps it


def test_the_stream_bulk_is_not_tracked_by_the_garbage_collector():
    """A long turn keeps one event per update and one state per tool call. Were they
    tracked, each full collection would walk them all again (40% of the library's time
    on 20,000 tool-call pairs in a user's Python, whose collector we leave as it is)."""
    import gc

    t = Turn("s")
    chunk_ev = t.apply_update(chunk("hello"))
    call_ev = t.apply_update({"sessionUpdate": "tool_call", "toolCallId": "1", "title": "Read",
                              "locations": [{"path": "/a"}], "rawInput": {"path": "/a"}})
    kept = t.apply_update({"sessionUpdate": "agent_message_chunk", "messageId": "m1",
                           "content": {"type": "text", "text": "x", "annotations": {"audience": ["user"]}}})
    assert type(chunk_ev) is Chunk and type(call_ev) is ToolCallEvent and type(kept) is Chunk
    assert not gc.is_tracked(chunk_ev) and not gc.is_tracked(call_ev) and not gc.is_tracked(call_ev.call)
    assert not gc.is_tracked(kept) and kept.raw["content"]["annotations"] == {"audience": ["user"]}
    # What they hold is tracked as before; only the holders are left out.
    assert gc.is_tracked(call_ev.raw) and gc.is_tracked(call_ev.call.locations)


def test_the_record_reads_the_last_mode_and_the_files_written_kept_as_events_arrive():
    from acp_kernel.services.events import FileWritten

    t = Turn("s")
    for mode in ("plan", 7, "code", None):
        t.apply_update({"sessionUpdate": "current_mode_update", "currentModeId": mode})
        t.apply_update(chunk("x"))
    written = FileWritten("s", "/w/a\nb.py", True, 3)
    t.add(written)
    t.add(Notice("info", "not a file"))
    assert t.last_mode() == "code" and t.files_written == [written]
    t.finish("end_turn")
    t.compact()  # the record was made before; the events it read may go
    record = t.record
    assert record is not None and record["mode"] == "code"
    assert [f["path"] for f in record["files_written"]] == ["/w/a\nb.py"] and record["files_written"][0]["created"]


def test_an_ending_hook_runs_once_before_listeners_hear_the_end():
    """``on_ending``: the controller freezes the turn's objects there, before the view renders
    the finished turn; so it must come first, and only once (a second finish is ignored)."""
    turn = Turn("s")
    heard: list[str] = []
    turn.subscribe(lambda ev: heard.append("end" if ev is None else type(ev).__name__))
    turn.on_ending(lambda: heard.append("ending"))
    turn.apply_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}})
    turn.finish("end_turn")
    turn.finish("end_turn")
    assert heard == ["Chunk", "ending", "end"]
