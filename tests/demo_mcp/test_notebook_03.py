"""notebooks/03-notebook-mcp.ipynb runs top to bottom through nbclient in a stock python3 kernel.

The demo agent calls the real `notebook` MCP server (acp_kernel.notebook_mcp) that the
magics offer in session/new: `variables` sees the notebook's variables, `execute` defines
one the next cell reads, `cells` lists the cells run so far.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.kernel import conftest as _kernel
from tests.kernels import IpcKernelManager

kernelspec_path = _kernel.kernelspec_path
kernel_env = _kernel.kernel_env

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "03-notebook-mcp.ipynb"


def _offer_exists() -> bool:
    try:
        return callable(getattr(importlib.import_module("acp_kernel.notebook_mcp"), "offer", None))
    except ImportError:
        return False


def _outputs(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        parts.append(data.get("text/markdown", "") or out.get("text", "") or data.get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.slow
@pytest.mark.skipif(not _offer_exists(), reason="acp_kernel.notebook_mcp.offer does not exist yet (the notebook MCP server, issue 16)")
def test_notebook_mcp_demo_runs_through_nbclient(kernel_env, tmp_path, monkeypatch) -> None:
    for key, value in kernel_env.items():
        monkeypatch.setenv(key, value)
    work = tmp_path / "nb"
    work.mkdir()
    shutil.copy(NOTEBOOK, work / NOTEBOOK.name)
    nb = nbformat.read(work / NOTEBOOK.name, as_version=4)
    NotebookClient(nb, timeout=180, kernel_manager_class=IpcKernelManager, resources={"metadata": {"path": str(work)}}).execute()
    nbformat.write(nb, work / NOTEBOOK.name)

    saved = nbformat.read(work / NOTEBOOK.name, as_version=4)
    nbformat.validate(saved)
    code = [c for c in saved.cells if c.cell_type == "code"]
    by_source = {c.source: _outputs(c) for c in code}
    everything = "\n".join(by_source.values())
    assert "Traceback" not in everything
    assert "did not offer a `notebook` MCP server" not in everything, "the magics offered no notebook server"

    variables = by_source["%%acp\nnotebook vars"]
    assert "notebook: variables" in variables and "sales" in variables and "region" in variables

    run = next(out for src, out in by_source.items() if src.startswith("%%acp\nnotebook run"))
    assert "notebook: execute" in run and "north 358" in run
    assert "I ran the code in your notebook" in run
    assert by_source["total"].strip() == "358"  # the agent's variable, read by the next cell

    cells = by_source["%%acp\nnotebook cells"]
    assert "notebook: cells" in cells and "sales = [120, 95, 143]" in cells
    # nbclient: no page, no file name: the cells run here, saying why not the live notebook
    assert ("This kernel does not know its notebook file and no notebook page with acp-kernel's "
            "JupyterLab / Notebook 7 extension is connected to this kernel") in " ".join(cells.split())

    # nbclient: no notebook page to show the proposal in, and a headless run takes no new cell
    # below (set_next_input): the agent is told, the cell is shown in the turn, nothing changes.
    insert = next(out for src, out in by_source.items() if src.startswith("%%acp\nnotebook insert"))
    assert "notebook: insert&#95;cell" in insert  # (markdown: the underscore as a reference)
    assert "not inserted: this front-end takes no new cell from the kernel (a headless run" in " ".join(insert.split())
    assert "Proposed new cell (not inserted" in insert and "print(region, max(sales))" in insert
    both = next(out for src, out in by_source.items() if src.startswith("%%acp\nnotebook all"))
    assert both.count("not inserted: this front-end takes no new cell") == 2, both
    assert "I made 2 notebook calls at once" in both
    # run_cell: no page and no file name here, so the agent is told why it did not run
    run_cell = next(out for src, out in by_source.items() if src.startswith("%%acp\nnotebook run-cell"))
    assert "not run: no notebook page" in " ".join(run_cell.split()) and "does not know its notebook file" in run_cell
    assert len(saved.cells) == len(nb.cells)
