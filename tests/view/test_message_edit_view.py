"""The live views and the transcript after the agent changes an earlier message (issue 27):
the edited role's text is drawn again from the model, once, through the usual escaping."""

from __future__ import annotations

from typing import Any

import pytest

from acp_kernel.client.turn import Turn
from acp_kernel.view import TERMINAL, RecordingSink, TurnOutput, TurnView, render_markdown
from tests.hostile.render import live

IMG = "<img src=x onerror=alert(1)>"


def said(body: str, mid: str, kind: str = "agent_message_chunk") -> dict[str, Any]:
    return {"sessionUpdate": kind, "messageId": mid, "content": {"type": "text", "text": body}}


def play(view_of: Any) -> tuple[Turn, Any, RecordingSink]:
    turn, sink = Turn("s1"), RecordingSink()
    view = view_of(turn, sink)
    turn.apply_update(said(f"ONE {IMG}", "m1"))
    turn.apply_update({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "look", "status": "completed"})
    turn.apply_update(said("TWO", "m2"))
    view.flush()
    turn.apply_update(said(f"ONE {IMG} REPLACED", "m1"))  # m1 again, whole and extended
    view.flush()
    turn.apply_update(said(" MORE", "m2"))
    turn.finish("end_turn")
    view.close()
    return turn, view, sink


async def test_the_widget_view_ends_with_the_replaced_message_once(frontend):
    turn, view, sink = play(lambda t, s: TurnOutput(t, s))
    assert turn.text == f"ONE {IMG} REPLACED\n\nTWO MORE"
    (final,) = sink.outputs()
    for mime in ("text/plain", "text/markdown", "text/html"):
        assert final[mime].count("ONE") == 1 and final[mime].count("TWO") == 1, final[mime]
    assert "REPLACED" in final["text/plain"] and live(final["text/markdown"]) == []
    assert "<img" not in final["text/html"]


@pytest.mark.parametrize("frontend_", [None, TERMINAL], ids=["markdown displays", "append only"])
async def test_append_only_views_say_so_and_show_the_text_whole_at_the_end(frontend_):
    kwargs = {} if frontend_ is None else {"frontend": frontend_}
    turn, view, sink = play(lambda t, s: TurnView(t, s, **kwargs))
    plain = [o.get("text/plain", "") for o in sink.outputs()]
    assert sum("changed an earlier message" in p for p in plain) == 1
    assert plain[-2] == turn.text  # the whole text as it reads now, before the status line
    assert all(live(o.get("text/markdown", "")) == [] for o in sink.outputs())


def test_the_transcript_shows_the_edited_text_once_where_it_began():
    turn = Turn("s1")
    for u in (said("ONE", "m1"), {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "look", "status": "completed"},
              said("TWO", "m2"), said("ONE, REPLACED", "m1"), said("hm", "t1", "agent_thought_chunk"),
              said("thought again", "t2", "agent_thought_chunk"), said("hm, whole", "t1", "agent_thought_chunk")):
        turn.apply_update(u)
    turn.finish("end_turn")
    md = render_markdown(turn)
    assert md.count("ONE") == 1 and md.index("ONE, REPLACED") < md.index("TWO") < md.index("look")
    assert md.count("hm, whole") == 1 and "thought again" in md
