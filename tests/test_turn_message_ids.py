"""Messages matched by ``messageId`` in the turn model (issue 27): pure, no processes.

The rule is :meth:`acp_kernel.client.turn.Turn._chunk_by_id`'s comment: chunks append to
the message they name, a message sent again whole replaces it, the v2 draft's
whole-message updates replace (``null`` / ``[]`` clear), the streaming path is untouched.
"""

from __future__ import annotations

from typing import Any

from acp_kernel.client import turn as tm
from acp_kernel.client.turn import MESSAGE_IDS, Chunk, MessageEdit, Turn


def said(text: str, mid: str | None = None, kind: str = "agent_message_chunk") -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if mid is not None:
        update["messageId"] = mid
    return update


def whole(mid: str, *texts: str, kind: str = "agent_message", content: Any = ...) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": kind, "messageId": mid}
    if content is not ...:
        update["content"] = content
    elif texts:
        update["content"] = [{"type": "text", "text": t} for t in texts]
    return update


def run(*updates: dict[str, Any]) -> tuple[Turn, list[Any]]:
    t = Turn("s")
    return t, [t.apply_update(u) for u in updates]


def test_no_id_at_all_is_one_appended_stream_as_before():
    t, events = run(said("Hello "), said("world"), said("!", kind="agent_thought_chunk"), said("."))
    assert t.text == "Hello world." and t.thoughts == "!"
    assert [type(e) for e in events] == [Chunk] * 4 and not t.edited
    assert all(e._raw is None for e in events)  # plain chunks still keep no dict


def test_the_same_id_appends_on_the_streaming_path():
    t, events = run(said("Look", "m1"), said("ing", "m1"), said(" now", "m1"))
    assert t.text == "Looking now" and [e.text for e in events] == ["Look", "ing", " now"]
    assert [type(e) for e in events] == [Chunk] * 3 and not t.edited
    assert events[1]._raw is None  # the streaming path keeps no dict, as before


def test_an_earlier_id_appends_to_that_message_not_a_copy_at_the_end():
    t, events = run(said("First", "m1"), said("Second", "m2"), said(" part", "m1"), said(" more", "m2"))
    assert t.text == "First part\n\nSecond more"
    assert type(events[2]) is MessageEdit and events[2].text == " part" and not events[2].replaced
    assert type(events[3]) is Chunk and events[3].text == " more"  # the last message: streams on
    assert t.edited == {"agent"}


def test_a_message_sent_again_whole_replaces_it():
    # after m2, the agent replays m1 (a reconnect): equal is nothing new, an extension replaces
    t, events = run(said("Hel", "m1"), said("lo", "m1"), said("Bye", "m2"), said("Hello", "m1"))
    assert t.text == "Hello\n\nBye" and type(events[3]) is MessageEdit and not events[3].changed
    assert "agent" not in t.edited
    t.apply_update(said(" now", "m2"))
    ev = t.apply_update(said("Hello, world", "m1"))
    assert type(ev) is MessageEdit and ev.replaced and ev.text == "Hello, world"
    assert t.text == "Hello, world\n\nBye now" and t.edited == {"agent"}
    # straight after, the same id is the message being streamed: its chunks append (the spec's rule)
    assert type(t.apply_update(said("!", "m1"))) is MessageEdit and t.text == "Hello, world!\n\nBye now"


def test_the_last_message_sent_again_after_another_kind_streams_only_the_new_part():
    t, events = run(said("Hi", "m1"), said("q", "u1", "user_message_chunk"), said("Hi there", "m1"))
    assert t.text == "Hi there" and type(events[2]) is Chunk and events[2].text == " there"
    assert not t.edited
    assert t.role_text("user") == "q"


def test_v2_whole_message_updates_replace_and_clear():
    t, events = run(said("A", "m1"), said("B", "m1"), whole("m1", "C"))
    assert t.text == "C"  # the RFD's own example: [A, B] then agent_message [C] -> [C]
    assert type(events[2]) is MessageEdit and events[2].replaced
    t.apply_update(said("D", "m1"))
    assert t.text == "CD"  # chunks after an update append to it (the RFD's second example)
    t.apply_update(whole("m2", "Two"))
    assert t.text == "CD\n\nTwo"
    t.apply_update(whole("m1", content=None))
    assert t.text == "Two"  # cleared, and the blank line before Two with it
    t.apply_update(whole("m2", content=[]))
    assert t.text == ""
    ev = t.apply_update(whole("m2"))  # no content: only _meta would change
    assert type(ev) is MessageEdit and not ev.changed and t.text == ""


def test_v2_whole_message_for_a_new_id_is_a_new_message_and_thoughts_and_user_too():
    t, events = run(whole("m1", "Hello ", "world"), whole("t1", "hmm", kind="agent_thought"),
                    whole("u1", "my prompt", kind="user_message"), whole("u1", "my prompt, echoed", kind="user_message"))
    assert t.text == "Hello world" and t.thoughts == "hmm" and t.role_text("user") == "my prompt, echoed"
    assert type(events[0]) is Chunk and events[0].role == "agent"
    assert type(events[3]) is Chunk and events[3].text == ", echoed"  # the last user message: extended
    ev = t.apply_update(whole("t1", "reconsidered", kind="agent_thought"))
    assert type(ev) is MessageEdit and ev.role == "thought" and t.thoughts == "reconsidered"
    assert t.edited == {"thought"}
    bad = t.apply_update({"sessionUpdate": "agent_message", "content": [{"type": "text", "text": "x"}]})
    assert type(bad) is tm.UnknownUpdate and t.text == "Hello world"  # no messageId: kept raw


def test_past_the_id_limit_new_ids_are_not_remembered_and_a_notice_says_so_once():
    t = Turn("s")
    for i in range(MESSAGE_IDS + 5):
        t.apply_update(said(f"m{i}", f"id{i}"))
    notices = [e for e in t.events if type(e) is tm.Notice]
    assert len(notices) == 1 and f"{MESSAGE_IDS:,} message ids" in notices[0].text
    ev = t.apply_update(said(" again", f"id{MESSAGE_IDS + 2}"))  # not remembered: a new message at the end
    assert type(ev) is Chunk and t.text.endswith(f"m{MESSAGE_IDS + 4}\n\n again")
    ev = t.apply_update(said(" again", "id0"))  # remembered: appended to it
    assert type(ev) is MessageEdit and t.text.startswith("m0 again\n\nm1")
    assert sum(len(d) for d in t._ids.values()) == MESSAGE_IDS


def test_replay_checks_cost_the_text_sent_not_the_message_so_far():
    # chunks that each name the other message: every one is an append by id (no
    # quadratic join: a message's length is counted once per piece)
    t = Turn("s")
    for i in range(2000):
        t.apply_update(said(f"<{i}>", "a" if i % 2 else "b"))
    assert t.text == "".join(f"<{i}>" for i in range(0, 2000, 2)) + "\n\n" + "".join(f"<{i}>" for i in range(1, 2000, 2))
    msg = t._ids["agent"]["a"]
    assert msg.counted >= len(msg.pieces) - 1  # counted as it went, each piece once


def test_compact_keeps_the_edited_text_once():
    t, _ = run(said("Old", "m1"), said("Two", "m2"), said("Old and new", "m1"))
    t.finish("end_turn")
    t.compact()
    chunks = [e for e in t.events if type(e) is Chunk]
    assert [c.text for c in chunks] == ["Old and new\n\nTwo"] and t.text == "Old and new\n\nTwo"
