"""The agent reads the live notebook: the user types into a cell and does not save, the
agent calls the ``notebook`` server's ``cells``, and its tool result (shown in the turn)
holds the unsaved source and names the active cell. acp-kernel's front-end extension
answers the kernel over the document comm; nothing here is mocked."""

from __future__ import annotations

import json
import re

import pytest

from acp_kernel.notebook_mcp.docwire import OUTPUT_CHARS

from .conftest import START, TURN, Notebook, _open_notebook, ours, skip_unless_browser
from .test_notebook_mcp_ui import _fold
from .test_notebook_ui import END_TURN, status_line

skip_unless_browser()

from playwright.sync_api import expect  # noqa: E402

#: Set on the notebook panel while the extension's document comm is open (it shows nothing).
OPEN = "data-acp-kernel-document"
DRAFT = "draft = 'typed, never saved'  # <img src=x onerror=alert(1)>"
ACTIVE = re.compile(r"## Cell 2: code, id \"[^\"]+\" \(active: the user's cursor is here\)")


@pytest.fixture
def nb2(lab, lab_page, request):
    """An ACP Agent notebook with two empty cells, open and idle in the shared JupyterLab page."""
    yield from _open_notebook(lab, lab_page, request, cells=["", ""])


def unsaved_edit_then_cells(nb: Notebook) -> None:
    """Type into cell 2 without saving, ask for ``cells`` from cell 1 (Shift+Enter makes
    cell 2 the active one), and find both in the agent's tool result."""
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    editor = nb.cell(1).locator(".cm-content")
    editor.click()
    nb.page.keyboard.insert_text(DRAFT)
    expect(editor).to_have_text(DRAFT, use_inner_text=False)
    out = nb.run(0, "notebook cells")
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    row = _fold(out, "notebook: cells")
    expect(row).to_have_count(1)
    expect(row.locator("summary")).to_contain_text("✓ done")
    expect(row).to_contain_text("The notebook as it is now in the user's page (live, unsaved edits included; "
                                "it has unsaved changes): 2 cells")
    expect(row).to_contain_text("The user's active cell is cell 2.")
    expect(row).to_contain_text(ACTIVE)
    expect(row).to_contain_text(DRAFT)
    expect(out.locator("img[src='x']")).to_have_count(0)  # the cell's text stays text
    saved = json.loads((nb.lab.root / nb.name).read_text())
    assert DRAFT not in json.dumps(saved)  # never saved: only the page had it
    errors = ours(nb.console_errors)  # type: ignore[attr-defined]
    assert not errors, errors


def test_the_agent_reads_an_unsaved_edit_and_the_active_cell_in_jupyterlab(nb2: Notebook) -> None:
    unsaved_edit_then_cells(nb2)
    nb2.screenshot("live-cells-lab.png")


def test_a_python_notebook_opens_the_comm_after_load_ext_and_again_after_a_restart(pynb: Notebook) -> None:
    """A python3 kernel offers the target only once ``%load_ext acp_kernel`` ran: the page
    asks again after each run. A restart takes the comm with the old kernel; the new one
    is asked again, and once the magics are back, the comm is open again."""
    nb = pynb
    assert nb.panel.get_attribute(OPEN) is None  # a plain python3 kernel: nothing opened
    nb.run(0, "%load_ext acp_kernel")
    nb.wait_ran(0)
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=TURN)
    # Not awaited here (the restart's promise): the panel's attribute and the indicator say when.
    nb.page.evaluate("() => { window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart(); }")
    expect(nb.panel).not_to_have_attribute(OPEN, "open", timeout=TURN)
    expect(nb.panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=START)
    nb.run(1, "%load_ext acp_kernel")
    nb.wait_ran(1)
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=TURN)
    # A large output is cut by the page before it is sent (head and tail, the count said).
    nb.run(2, "print('x' * 100_000)")
    nb.wait_ran(2)
    expect(nb.run(3, "%acp connect demo")).to_contain_text("Connected", timeout=TURN)
    out = nb.run(4, "%%acp\nnotebook cells")
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    row = _fold(out, "notebook: cells")
    expect(row).to_contain_text("unsaved edits included")
    expect(row).to_contain_text(f"[... {100_001 - OUTPUT_CHARS} characters cut ...]")
    expect(row).to_contain_text("## Cell 5: code")
    errors = ours(nb.console_errors)  # type: ignore[attr-defined]
    assert not errors, errors


def test_a_kernel_change_opens_the_comm_with_the_new_kernel(pynb: Notebook) -> None:
    """Switching a python3 notebook to the ACP kernel: the page asks the new kernel, which
    offers the target from its start, and opens the comm with it."""
    nb = pynb
    assert nb.panel.get_attribute(OPEN) is None
    # Not awaited here (the change's promise): the toolbar and the attribute say when.
    nb.page.evaluate("() => { window.jupyterapp.shell.currentWidget.sessionContext.changeKernel({name: 'acp'}); }")
    expect(nb.panel.locator(".jp-KernelName")).to_have_text("ACP Agent", timeout=START)
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    errors = ours(nb.console_errors)  # type: ignore[attr-defined]
    assert not errors, errors
