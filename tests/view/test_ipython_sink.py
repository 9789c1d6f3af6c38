"""The IPython sink in a real kernel, run by nbclient: what a notebook saves."""

from __future__ import annotations

import os
import re
import textwrap

import pytest

from acp_kernel.safe import unwrapped
from tests.hostile.render import inert_data, live, render_html

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CELL = textwrap.dedent(
    """
    import asyncio
    from acp_kernel.client.turn import Turn
    from acp_kernel.view import TurnView, IPythonSink

    async def run():
        turn = Turn("s1")
        view = TurnView(turn, IPythonSink())
        for word in "Hello <script>alert(1)</script> from the agent.".split():
            turn.apply_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": word + " "}})
        turn.apply_update({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Run tests", "kind": "execute", "status": "in_progress"})
        turn.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"})
        turn.apply_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "All green."}})
        turn.finish("end_turn")
        return view

    view = await run()
    """
)


def test_a_notebook_run_without_widgets_keeps_markdown_updated_in_place():
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(CELL))
    client = nbclient.NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": ROOT}}, store_widget_state=True
    )
    client.execute()
    outputs = nb.cells[0].outputs
    assert all(o.output_type == "display_data" for o in outputs), outputs
    md = [unwrapped(o.data.get("text/markdown", "")) for o in outputs]
    assert all(inert_data(o.data) == [] for o in outputs), [inert_data(o.data) for o in outputs]
    # Updates were applied in place by display id: the first output holds the final text.
    assert live(md[0]) == [] and "Hello &lt;script&gt;alert(1)&lt;/script&gt; from the agent." in render_html(md[0])
    assert all("application/vnd.jupyter.widget-view+json" not in o.data for o in outputs)
    assert "Run tests" in md[1] and "✓ done" in md[1]
    assert md[2] == "All green."
    assert md[3].startswith("<sub>Done")


MANY = textwrap.dedent(
    """
    from acp_kernel.client.turn import Turn
    from acp_kernel.view import HEADLESS, IPythonSink, view_for

    OUT = "a line the file has\\n" * 60  # (200 rows of it are over LIMIT: the characters bound it, not TAIL)

    async def run(n):
        turn = Turn("s1")
        view = view_for(turn, IPythonSink(), frontend=HEADLESS)
        turn.apply_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Reading."}})
        for i in range(n):
            turn.apply_update({"sessionUpdate": "tool_call", "toolCallId": f"t{i}", "title": f"Read f{i}.py",
                               "kind": "read", "status": "pending"})
            turn.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": f"t{i}", "status": "completed",
                               "content": [{"type": "content", "content": {"type": "text", "text": OUT}}]})
        turn.finish("end_turn")

    await run(1500)
    """
)


def test_a_turn_of_many_tool_calls_is_one_bounded_static_output_in_the_saved_notebook():
    """Live, the turn is one widget; finished, one static output (no widget view, so a
    reopened notebook needs no model), its size bounded: the first steps, a line saying
    how many were left out, the last ones; the closed model nbclient keeps is a husk."""
    from acp_kernel.view.finished import FORM_LIMIT, HEAD, LIMIT

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(MANY))
    client = nbclient.NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": ROOT}}, store_widget_state=True
    )
    client.execute()
    outputs = nb.cells[0].outputs
    assert len(outputs) == 1 and "application/vnd.jupyter.widget-view+json" not in outputs[0].data
    data = outputs[0].data
    assert len(data["text/html"]) <= LIMIT + 100  # and the wrapping element
    html = data["text/html"]
    kept = html.count("<details")
    left = int(re.search(r"… (\d+) steps of this turn are not kept", html).group(1))
    assert kept + left == 1500 and 0 < left < 1500
    assert "Read f0.py" in html and f"Read f{HEAD - 2}.py" in html and "Read f1499.py" in html  # HEAD counts the text
    assert html.index("Read f0.py") < html.index("not kept") < html.index("Read f1499.py")
    md, plain = data["text/markdown"], data["text/plain"]
    for form in (md, plain):  # the start and the end of what the HTML keeps
        assert len(form) <= FORM_LIMIT + 200
        assert 0 < form.count("· ✓ done") < kept and form.count("characters of this turn are not kept") == 1
        assert form.index("Read f0.py") < form.index("characters of this turn") < form.index("Read f1499.py")
    assert md.count("· ✓ done") == plain.count("· ✓ done") and plain.splitlines()[-1].startswith("Done")
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    ours = [m for m in state.values() if m["state"].get("_anywidget_id") == "acp_kernel.view.turnwidget.TurnWidget"]
    assert len(ours) == 1  # one comm for 1,500 tool calls, emptied before it closed
    saved = ours[0]["state"]
    assert saved["count"] == 0 and not any(saved.get(f"b:{i}") for i in range(1501))
