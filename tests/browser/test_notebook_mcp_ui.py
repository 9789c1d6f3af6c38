"""The ``notebook`` MCP server in JupyterLab: a python3 notebook with the
magics, the demo agent asks to run code through the server, the question and
the run show in the turn, and the variable is there for the next cell."""

from __future__ import annotations

import json

import pytest

from .conftest import TURN, Notebook, ours, skip_unless_browser
from .test_notebook_ui import END_TURN, status_line

skip_unless_browser()

from playwright.sync_api import expect  # noqa: E402

CODE = "x = 6 * 7\nprint('<img src=x onerror=alert(1)> `a', x)\nprint('/tmp/evil\\n# heading')"


def _fold(out, title: str):
    """A finished turn's tool call: its ``<details>``, found by its header."""
    return out.locator("details").filter(has=out.page.locator("summary", has_text=title))


@pytest.mark.slow
def test_execute_asks_runs_live_in_the_turn_and_the_next_cell_sees_it(pynb: Notebook) -> None:
    nb = pynb
    nb.run(0, "%load_ext acp_kernel")
    connected = nb.run(1, "%acp connect demo --permissions ask")
    expect(connected).to_contain_text("Connected", timeout=TURN)
    out = nb.run(2, "%%acp\nnotebook run\n```python\n" + CODE + "\n```")
    form = out.locator(".acp-permission")
    expect(form).to_have_count(1, timeout=TURN)
    expect(form).to_contain_text("Run Python in this notebook")
    expect(form).to_contain_text("x = 6 * 7")
    nb.screenshot("notebook-mcp-asking.png")
    form.get_by_role("button", name="Allow once").click()
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    # Finished, the turn is static: the call folded under its header, its output inside.
    row = _fold(out, "Run Python in this notebook")
    expect(row).to_have_count(1)
    expect(row.locator("summary")).to_contain_text("✓ done")
    expect(row).to_contain_text("<img src=x onerror=alert(1)> `a 42")
    expect(row).to_contain_text("# heading")
    expect(out.locator("img[src='x']")).to_have_count(0)  # text, never an element
    nb.screenshot("notebook-mcp-done.png")
    value = nb.run(3, "x")
    expect(value).to_contain_text("42", timeout=TURN)
    # Saved, the file is what `cells` reads (Jupyter Server names it to the kernel).
    nb.save()
    cells = nb.run(4, "%%acp\nnotebook cells")
    expect(status_line(cells)).to_have_text(END_TURN, timeout=TURN)
    saved = json.loads((nb.lab.root / nb.name).read_text())
    assert "".join(saved["cells"][3]["source"]) == "x"
    row = _fold(cells, "notebook: cells")
    expect(row).to_contain_text(nb.name)
    expect(row).to_contain_text("%acp connect demo --permissions ask")
    errors = ours(nb.console_errors)  # type: ignore[attr-defined]
    assert not errors, errors
