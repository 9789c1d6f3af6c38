"""The IPython sink in a real kernel, run by nbclient: what a notebook saves."""

from __future__ import annotations

import os
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

    async def run(n):
        turn = Turn("s1")
        view = view_for(turn, IPythonSink(), frontend=HEADLESS)
        turn.apply_update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Reading."}})
        for i in range(n):
            turn.apply_update({"sessionUpdate": "tool_call", "toolCallId": f"t{i}", "title": f"Read f{i}.py",
                               "kind": "read", "status": "pending"})
            turn.apply_update({"sessionUpdate": "tool_call_update", "toolCallId": f"t{i}", "status": "completed"})
        turn.finish("end_turn")

    await run(1500)
    """
)


def test_a_turn_of_many_tool_calls_is_one_widget_in_the_saved_notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(MANY))
    client = nbclient.NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": ROOT}}, store_widget_state=True
    )
    client.execute()
    outputs = nb.cells[0].outputs
    views = [o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.data]
    assert len(outputs) == 1 and len(views) == 1  # the whole turn is one output
    assert views[0].data["text/markdown"].count("· ✓ done") == 1500
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    ours = [m for m in state.values() if m["state"].get("_anywidget_id") == "acp_kernel.view.turnwidget.TurnWidget"]
    assert len(ours) == 1  # one comm for 1,500 tool calls
    saved = ours[0]["state"]
    tools = [saved[f"b:{i}"] for i in range(saved["count"]) if saved[f"b:{i}"]["type"] == "tool"]
    assert [(t["title"], t["status"]) for t in tools] == [(f"Read f{i}.py", "completed") for i in range(1500)]
