"""Questions belong to their turn, in a real ACP kernel (jupyter_client) on the
scripted agent: a permission request that arrives while no cell runs a prompt
is not asked and not put into the next turn's output; it is answered (rejected)
and said, once, in a display of its own before the next cell's turn."""

from __future__ import annotations

import json

from tests.hostile.render import live

from .conftest import scripted_command, wait_until

IMG = "<img src=x onerror=alert(1)>"
HOSTILE = f"{IMG} `a\nb` $x$ \\( y \\)"


def _displays(res) -> list[dict]:
    return [m["content"]["data"] for m in res.outputs if m["msg_type"] == "display_data"]


async def test_a_request_between_cells_is_said_before_the_next_turn_not_inside_it(acp_kernel, tmp_path):
    marker = tmp_path / "late-answered"
    late = {"request": {"method": "session/request_permission", "params": {
        "sessionId": "$SID",
        "toolCall": {"toolCallId": "late", "title": f"Late {HOSTILE}", "kind": "execute",
                     "rawInput": {"command": "touch /tmp/evil\nnewline"}},
        "options": [{"optionId": "ok", "name": f"OK {IMG}", "kind": "allow_once"},
                    {"optionId": "no", "name": "No", "kind": "reject_once"}]}}}
    scenario = {"prompts": {"go": [{"chunk": "first"}], "again": [{"chunk": "second"}]},
                # after the prompt's answer: the late question, then a mark that it was answered
                "after_prompt": [late, {"spawn": f"touch {marker}"}]}
    res = await acp_kernel.execute(f"%agent --command {scripted_command(scenario)}")
    assert res.status == "ok", res.text()
    first = await acp_kernel.execute("go")
    assert first.status == "ok" and "first" in first.text()
    await wait_until(marker.exists, timeout=20)
    second = await acp_kernel.execute("again")
    assert second.status == "ok" and "second" in second.text()
    displays = _displays(second)
    said = [d for d in displays if "no turn was running" in d.get("text/plain", "")]
    assert len(said) == 1, [d.get("text/plain") for d in displays]
    assert "Before this cell" in said[0]["text/plain"] and "reject_once" in said[0]["text/plain"]
    assert live(said[0]["text/markdown"]) == []
    # It is its own display, before the turn's; the turn shows no permission question.
    assert displays.index(said[0]) < len(displays) - 1
    comms = json.dumps([m["content"] for m in second.outputs if m["msg_type"] in ("comm_open", "comm_msg")])
    assert '"type": "permission"' not in comms and "Permission requested" not in second.text()
    assert "no turn was running" not in first.text()
