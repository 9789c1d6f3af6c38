"""What ``%load`` / ``%resume`` report of a replayed history: the prompts and the last
answer, with messages the replay changed counted once (issue 27, messageId)."""

from __future__ import annotations

from acp_kernel.client.lifecycle import replayed
from acp_kernel.client.turn import Turn


def _chunk(kind: str, text: str, mid: str | None = None) -> dict:
    update = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if mid is not None:
        update["messageId"] = mid
    return update


def _events(*updates: dict) -> list:
    turn = Turn("s1")
    for update in updates:
        turn.apply_update(update)
    return turn.events


def test_prompts_and_the_last_answer_without_ids() -> None:
    events = _events(_chunk("user_message_chunk", "one"), _chunk("agent_message_chunk", "first"),
                     _chunk("user_message_chunk", "tw"), _chunk("user_message_chunk", "o"),
                     _chunk("agent_message_chunk", "second "), _chunk("agent_message_chunk", "answer"))
    assert replayed(events) == (2, "second answer")


def test_a_message_sent_again_whole_counts_once_and_an_earlier_prompts_edit_is_not_the_answer() -> None:
    hostile = "<img src=x onerror=alert(1)> `a\nb` $x$ /tmp/a\nb"
    events = _events(
        _chunk("user_message_chunk", "one", "u1"), _chunk("agent_message_chunk", "old", "a1"),
        _chunk("user_message_chunk", "two", "u2"),
        _chunk("agent_message_chunk", "Hello ", "a2"), _chunk("agent_message_chunk", hostile, "a2"),
        _chunk("agent_message_chunk", "More.", "a3"),
        _chunk("agent_message_chunk", "Hello " + hostile, "a2"),  # a2 again, whole
        _chunk("agent_message_chunk", " and then", "a1"),  # the earlier prompt's message
    )
    prompts, answer = replayed(events)
    assert prompts == 2
    assert answer == "Hello " + hostile + "\n\nMore."
    assert answer.count(hostile) == 1 and "and then" not in answer


def test_a_whole_message_update_replaces_the_answer() -> None:
    events = _events(_chunk("user_message_chunk", "q", "u1"), _chunk("agent_message_chunk", "draft", "a1"),
                     _chunk("agent_message_chunk", "second", "a2"),
                     {"sessionUpdate": "agent_message", "messageId": "a1",
                      "content": [{"type": "text", "text": "final"}]})
    assert replayed(events) == (1, "final\n\nsecond")
