"""The IPython sink in a real kernel, run by nbclient: what a notebook saves."""

from __future__ import annotations

import os
import textwrap

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CELL = textwrap.dedent(
    """
    import asyncio
    from acp_kernel.turn import Turn
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


def test_a_notebook_run_keeps_markdown_fallbacks_and_widget_views():
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(CELL))
    client = nbclient.NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": ROOT}}, store_widget_state=True
    )
    client.execute()
    outputs = nb.cells[0].outputs
    assert all(o.output_type == "display_data" for o in outputs), outputs
    md = [o.data.get("text/markdown", "") for o in outputs]
    # Updates were applied in place by display id: the first output holds the final text.
    assert md[0].startswith("Hello &lt;script>alert(1)&lt;/script> from the agent.")
    assert "application/vnd.jupyter.widget-view+json" in outputs[1].data
    assert "Run tests" in md[1] and "✓ done" in md[1]
    assert md[2] == "All green."
    assert md[3].startswith("<sub>end_turn")
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    model_id = outputs[1].data["application/vnd.jupyter.widget-view+json"]["model_id"]
    assert state[model_id]["state"]["status"] == "completed"
