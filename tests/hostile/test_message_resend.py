"""A message the agent sends again whole, through the real ACP kernel (jupyter_client) and
the scripted agent (issue 27): the cell's final output has its text once, and every
hostile string in it (raw HTML, a code span across a line break, math, a path with a
newline) comes out inert, through the same escaping as any agent text."""

from __future__ import annotations

import pytest

from tests.hostile.render import visible_text
from tests.hostile.test_kernel_outputs import PATH, PAY, assert_inert
from tests.kernel.conftest import acp_kernel, kernel_env, kernelspec_path, scripted_command  # noqa: F401

FIRST = PAY + " $$y$$ " + PATH + " FIRST-MESSAGE"


def said(text: str, mid: str, kind: str = "agent_message_chunk") -> dict:
    return {"update": {"sessionUpdate": kind, "messageId": mid, "content": {"type": "text", "text": text}}}


@pytest.mark.slow
async def test_a_message_sent_again_whole_is_shown_once_and_inert(acp_kernel):  # noqa: F811
    k = acp_kernel
    scenario = {"prompt": [
        said(FIRST[:40], "m1"), said(FIRST[40:], "m1"),  # streamed in two chunks
        said("START-OF-SECOND ", "m2"), said(PAY, "m2"),
        said(FIRST + " AND-MORE", "m1"),  # m1 again, whole and extended (a replay): replaces m1
        said(" END-OF-SECOND", "m2"),  # the last message streams on
    ]}
    assert (await k.execute(f"%agent --command {scripted_command(scenario)}")).status == "ok"
    res = await k.execute("hello")
    assert res.status == "ok"
    assert_inert(res)
    final = [m["content"]["data"] for m in res.outputs if "text/html" in m["content"].get("data", {})][-1]
    shown = visible_text(final["text/html"])
    assert shown.count("FIRST-MESSAGE") == 1 and "FIRST-MESSAGE AND-MORE" in shown
    assert shown.count("START-OF-SECOND") == 1 and "END-OF-SECOND" in shown
    assert shown.index("AND-MORE") < shown.index("START-OF-SECOND")  # in its place, not a copy at the end
    for mime in ("text/markdown", "text/plain"):
        assert final[mime].count("FIRST-MESSAGE") == 1, final[mime]
    assert "onerror=alert(1)" in shown  # shown as text, not dropped
