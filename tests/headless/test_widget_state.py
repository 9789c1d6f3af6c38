"""Widget messages are parented to the cell that made them, so a notebook run
by nbclient files each turn's output (live: a widget; finished: the static output
that replaced it) with its own cell, not the first."""

from __future__ import annotations

import nbformat
from nbclient import NotebookClient
from tests.kernels import IpcKernelManager

from .conftest import tool_call_turn, use_scripted_agent

WIDGET = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"


def test_two_agent_cells_each_keep_their_own_finished_turn(headless_env, tmp_path):
    use_scripted_agent(headless_env, {"prompts": {"First": tool_call_turn("first read"),
                                                  "Second": tool_call_turn("second read")}})
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "acp", "display_name": "ACP", "language": "markdown"}})
    nb.cells = [nbformat.v4.new_code_cell("First"), nbformat.v4.new_code_cell("Second")]
    NotebookClient(nb, timeout=60, kernel_name="acp", kernel_manager_class=IpcKernelManager, store_widget_state=True,
                   resources={"metadata": {"path": str(tmp_path / "work")}}).execute()
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    saved = nbformat.read(path, as_version=4)
    state = saved.metadata["widgets"][STATE]["state"]
    assert sum(m["state"].get("_anywidget_id") == "acp_kernel.view.turnwidget.TurnWidget" for m in state.values()) == 2
    for cell, title in zip(saved.cells, ("first read", "second read")):
        assert not [o for o in cell.outputs if WIDGET in o.get("data", {})], cell.outputs  # finished: static
        text = "\n".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs)
        html = "\n".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
        assert f"{title} · ✓ done" in text and f"{title} · ✓ done</summary>" in html
