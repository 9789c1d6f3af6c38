"""The agent changes the live notebook only through proposals the user answers in the page
(issue 26): the demo agent calls the ``notebook`` server's ``insert_cell``, ``edit_cell``
and ``delete_cell``; acp-kernel's front-end extension shows each on the cell it concerns
(the new source, or the old and new lines) with Accept and Reject, and the agent's tool
result says what became of it. A user's edit to a cell whose proposal waits is a conflict,
never applied over their text; an applied change has Undo; under allow-all a change applies
at once and is still shown. JupyterLab, the ACP kernel, nothing mocked."""

from __future__ import annotations

import re

import pytest

from .conftest import START, TURN, Notebook, _open_notebook, ours, skip_unless_browser
from .test_live_cells import OPEN
from .test_notebook_mcp_ui import _fold
from .test_notebook_ui import END_TURN, status_line

skip_unless_browser()

from playwright.sync_api import expect  # noqa: E402

#: Raw HTML, a code span across a line break, math delimiters and a path with a newline.
HOSTILE = "print('<img src=x onerror=alert(1)> `a\\nb` $x$ \\\\(y\\\\) /tmp/a\\nb.py')"


@pytest.fixture
def nb3(lab, lab_page, request):
    """An ACP Agent notebook: a cell for prompts, and two cells of the user's."""
    yield from _open_notebook(lab, lab_page, request, cells=["", "x = 1", "y = 2"])


def _ask(nb: Notebook, prompt: str):
    """Run ``prompt`` in cell 0 (the agent's turn); its output area."""
    return nb.run(0, prompt)


def test_insert_edit_delete_are_proposals_the_user_answers(nb3: Notebook) -> None:
    nb = nb3
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    _, x_id, y_id = nb.cell_ids()

    # Insert below x: shown on x's cell as text; accepted, a real cell with that source.
    out = _ask(nb, f"notebook insert after {x_id}\n```\n{HOSTILE}\n```")
    box = nb.cell(1).locator(".acp-proposal-insert")
    expect(box).to_be_visible(timeout=TURN)
    expect(box.locator(".acp-proposal-source")).to_have_text(HOSTILE)
    assert box.locator("img").count() == 0
    nb.screenshot("proposal-insert.png")
    box.get_by_role("button", name="Accept").click()
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    expect(_fold(out, "notebook: insert_cell")).to_contain_text("Applied: inserted as cell")
    assert nb.sources()[1:] == ["x = 1", HOSTILE, "y = 2"]
    expect(box).to_have_attribute("data-state", "applied")

    # Edit x: the old and new lines; rejected with the user's words, which reach the agent.
    out = _ask(nb, f"notebook edit {x_id}\n```\nx = 10\n```")
    box = nb.cell(1).locator(".acp-proposal-edit")
    expect(box).to_be_visible(timeout=TURN)
    expect(box.locator(".acp-del")).to_have_text("- x = 1")
    expect(box.locator(".acp-add")).to_have_text("+ x = 10")
    nb.screenshot("proposal-diff.png")
    box.locator(".acp-proposal-words").fill("keep x small")
    box.get_by_role("button", name="Reject").click()
    expect(status_line(out)).to_have_text(re.compile(r"\S"), timeout=TURN)
    row = _fold(out, "notebook: edit_cell")
    expect(row).to_contain_text("Rejected", timeout=TURN)
    expect(row).to_contain_text("keep x small")
    assert nb.sources()[1] == "x = 1"

    # Edit y while the user edits it too: a conflict, never applied over the user's text.
    out = _ask(nb, f"notebook edit {y_id}\n```\ny = 20\n```")
    y_cell = nb.cell(3)  # below the inserted cell
    box = y_cell.locator(".acp-proposal-edit")
    expect(box).to_be_visible(timeout=TURN)
    y_cell.locator(".cm-content").click()
    nb.page.keyboard.press("End")
    nb.page.keyboard.insert_text("  # mine")
    expect(box).to_have_attribute("data-state", "conflict", timeout=TURN)
    nb.screenshot("proposal-conflict.png")
    expect(_fold(out, "notebook: edit_cell")).to_contain_text("Conflict", timeout=TURN)
    assert nb.sources()[-1] == "y = 2  # mine"

    # Delete the inserted cell: accepted, gone; Undo brings it back.
    inserted = nb.cell_ids()[2]
    out = _ask(nb, f"notebook delete {inserted}")
    box = nb.panel.locator(".acp-proposal-delete")
    expect(box).to_be_visible(timeout=TURN)
    box.get_by_role("button", name="Accept").click()
    expect(_fold(out, "notebook: delete_cell")).to_contain_text("Applied", timeout=TURN)
    assert HOSTILE not in nb.sources()
    expect(box).to_have_attribute("data-state", "applied")  # kept on the cell above, with Undo
    box.get_by_role("button", name="Undo").click()
    expect(box).to_have_attribute("data-state", "undone")
    assert nb.sources()[1:] == ["x = 1", HOSTILE, "y = 2  # mine"]
    nb.screenshot("proposal-undone.png")
    # The insert's Undo, after the user edited the inserted cell: never over their edit.
    inserted_cell = nb.cell(2)
    inserted_cell.locator(".cm-content").click()
    nb.page.keyboard.press("End")
    nb.page.keyboard.insert_text("  # kept")
    first = nb.cell(1).locator(".acp-proposal-insert")
    first.get_by_role("button", name="Undo").click()
    expect(first).to_have_attribute("data-state", "kept")
    expect(first.locator(".acp-proposal-status")).to_have_text("Not undone: the cell changed since.")
    assert nb.sources()[2] == HOSTILE + "  # kept"
    errors = ours(nb.console_errors)  # type: ignore[attr-defined]
    assert not errors, errors


def test_under_allow_all_a_change_applies_at_once_and_can_be_undone(nb3: Notebook) -> None:
    nb = nb3
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    _, x_id, _ = nb.cell_ids()
    expect(nb.run(0, "%permissions allow-all")).to_contain_text("allow-all", timeout=TURN)
    out = _ask(nb, f"notebook edit {x_id}\n```\nx = 3\n```")
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    expect(_fold(out, "notebook: edit_cell")).to_contain_text("Applied")
    assert nb.sources()[1] == "x = 3"
    box = nb.cell(1).locator(".acp-proposal-edit")
    expect(box).to_have_attribute("data-state", "applied")
    expect(box.locator(".acp-proposal-status")).to_have_text(re.compile("allow-all"))
    nb.screenshot("proposal-applied.png")
    # JupyterLab's own undo and redo, in the cell, step through the agent's change too.
    editor = nb.cell(1).locator(".cm-content")
    editor.click()
    nb.page.keyboard.press("ControlOrMeta+z")
    expect(editor).to_have_text("x = 1")
    nb.page.keyboard.press("ControlOrMeta+Shift+z")
    expect(editor).to_have_text("x = 3")
    box.get_by_role("button", name="Undo").click()
    expect(box).to_have_attribute("data-state", "undone")
    assert nb.sources()[1] == "x = 1"


@pytest.fixture
def nb7_2(notebook7, browser_context, request):
    """The same in Notebook 7's notebook page: a cell for prompts and one of the user's."""
    yield from _open_notebook(notebook7, browser_context, request, "/notebooks/{name}", cells=["", "x = 1"])


def test_an_edit_is_accepted_in_notebook7(nb7_2: Notebook) -> None:
    """The cell's id as the agent learns it, from the cells tool (Notebook 7 has no jupyterapp)."""
    nb = nb7_2
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    listed = _ask(nb, "notebook cells")
    expect(status_line(listed)).to_have_text(END_TURN, timeout=TURN)
    result = _fold(listed, "notebook: cells").text_content() or ""  # folded: its text, not what shows
    found = re.search(r'## Cell 2: code, id "([A-Za-z0-9_-]+)"', result)
    assert found, result
    out = _ask(nb, f"notebook edit {found.group(1)}\n```\n{HOSTILE}\n```")
    box = nb.cell(1).locator(".acp-proposal-edit")
    expect(box).to_be_visible(timeout=TURN)
    expect(box.locator(".acp-add")).to_have_text(f"+ {HOSTILE}")
    assert box.locator("img").count() == 0
    box.get_by_role("button", name="Accept").click()
    expect(_fold(out, "notebook: edit_cell")).to_contain_text("Applied", timeout=TURN)
    expect(nb.cell(1).locator(".cm-content")).to_have_text(HOSTILE.replace("\n", ""), use_inner_text=False)
    nb.screenshot("proposal-notebook7.png")


def test_a_proposal_through_the_magics_in_a_python_notebook(pynb: Notebook) -> None:
    nb = pynb
    nb.run(0, "%load_ext acp_kernel")
    expect(nb.run(1, "%acp connect demo --permissions ask")).to_contain_text("Connected", timeout=TURN)
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    anchor = nb.cell_ids()[1]
    nb.run(2, f"%%acp\nnotebook insert after {anchor}\n```\nz = 3\n```")
    box = nb.cell(1).locator(".acp-proposal-insert")
    expect(box).to_be_visible(timeout=TURN)
    box.get_by_role("button", name="Accept").click()
    expect(_fold(nb.output(3), "notebook: insert_cell")).to_contain_text("Applied", timeout=TURN)  # below the new cell
    assert nb.sources()[2] == "z = 3"


def _bar(nb: Notebook):
    """The bar of a turn's proposals, on the cell that ran the turn (cell 0)."""
    return nb.cell(0).locator(".acp-proposals-turn")


def _saved_sources(nb: Notebook) -> list[str]:
    nb.save()
    model = nb.lab.api("GET", f"/api/contents/{nb.name}?content=1")
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in model["content"]["cells"]]


def test_a_turns_proposals_are_rejected_or_accepted_together_and_undone_in_one_step(nb3: Notebook) -> None:
    """Two proposals made at once (parallel tool calls) share a bar on the turn's cell."""
    nb = nb3
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    _, x_id, y_id = nb.cell_ids()
    both = (f"notebook all\ninsert after {x_id}\n```\n{HOSTILE}\n```\n"
            f"edit {y_id}\n```\ny = 20\n```")

    # Reject all, with the user's words: both tool calls hear them.
    out = _ask(nb, both)
    bar = _bar(nb)
    expect(bar).to_have_attribute("data-waiting", "2", timeout=TURN)
    expect(bar.locator(".acp-proposals-turn-summary")).to_have_text("This turn's proposals: 2 waiting.")
    bar.locator(".acp-proposals-turn-words").fill("not now")
    bar.get_by_role("button", name="Reject all").click()
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    for title in ("notebook: insert_cell", "notebook: edit_cell"):
        expect(_fold(out, title)).to_contain_text("Rejected")
        expect(_fold(out, title)).to_contain_text("not now")
    assert nb.sources()[1:] == ["x = 1", "y = 2"]
    expect(bar.locator(".acp-proposals-turn-summary")).to_have_text("This turn's proposals: 2 rejected.")

    # Accept all: both applied; then the turn's edits undone in one step.
    out = _ask(nb, both)
    bar = _bar(nb)  # the second turn's: the first one's went (it had nothing left to undo)
    expect(bar).to_have_attribute("data-waiting", "2", timeout=TURN)
    box = nb.cell(1).locator(".acp-proposal-insert[data-state='waiting']")
    expect(box.locator(".acp-proposal-source")).to_have_text(HOSTILE)
    assert nb.cell(1).locator("img").count() == 0
    nb.screenshot("proposal-turn.png")
    bar.get_by_role("button", name="Accept all").click()
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    expect(_fold(out, "notebook: insert_cell")).to_contain_text("Applied: inserted as cell")
    expect(_fold(out, "notebook: edit_cell")).to_contain_text("Applied")
    assert nb.sources()[1:] == ["x = 1", HOSTILE, "y = 20"]
    assert _saved_sources(nb)[1:] == ["x = 1", HOSTILE, "y = 20"]
    expect(bar).to_have_attribute("data-applied", "2")
    bar.get_by_role("button", name="Undo this turn's edits").click()
    expect(bar.locator(".acp-proposals-turn-status")).to_have_text("Undid this turn's 2 changes.")
    expect(bar.locator(".acp-proposals-turn-summary")).to_have_text("This turn's proposals: 2 undone.")
    assert nb.sources()[1:] == ["x = 1", "y = 2"]
    nb.screenshot("proposal-turn-undone.png")
    assert _saved_sources(nb)[1:] == ["x = 1", "y = 2"]  # the saved notebook after
    errors = ours(nb.console_errors)  # type: ignore[attr-defined]
    assert not errors, errors


def test_an_interrupt_withdraws_the_turns_waiting_proposals(nb3: Notebook) -> None:
    nb = nb3
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    _, x_id, _ = nb.cell_ids()
    out = _ask(nb, f"notebook edit {x_id}\n```\nx = 99\n```")
    box = nb.cell(1).locator(".acp-proposal-edit")
    expect(box).to_have_attribute("data-state", "waiting", timeout=TURN)
    nb.panel.locator("jp-button[data-command='notebook:interrupt-kernel'], "
                     "button[data-command='notebook:interrupt-kernel']").first.click()
    expect(box).to_have_attribute("data-state", "withdrawn", timeout=TURN)
    expect(box.locator(".acp-proposal-status")).to_have_text("Withdrawn: the turn ended before you answered.")
    expect(box.get_by_role("button", name="Accept")).to_have_count(0)
    assert nb.sources()[1] == "x = 1"
    # The kernel lives on, and the next turn runs.
    out = _ask(nb, "echo still here")
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)


def test_a_kernel_restart_withdraws_waiting_proposals(nb3: Notebook) -> None:
    """The kernel that waited for the answer is gone: the box says so and offers no Accept."""
    nb = nb3
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    _, x_id, _ = nb.cell_ids()
    _ask(nb, f"notebook delete {x_id}")
    box = nb.cell(1).locator(".acp-proposal-delete")
    expect(box).to_have_attribute("data-state", "waiting", timeout=TURN)
    nb.page.evaluate("() => { window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart(); }")
    expect(box).to_have_attribute("data-state", "withdrawn", timeout=TURN)
    expect(box.locator(".acp-proposal-status")).to_have_text("Withdrawn: the kernel restarted or changed.")
    expect(box.get_by_role("button", name="Accept")).to_have_count(0)
    assert nb.sources()[1] == "x = 1"
    # The restarted kernel opens the document comm again, and a new proposal is shown.
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    _ask(nb, f"notebook delete {x_id}")
    expect(nb.cell(1).locator(".acp-proposal-delete[data-state='waiting']")).to_have_count(1, timeout=TURN)


@pytest.fixture
def own_page(lab, browser_context, request):
    """A JupyterLab page of its own (the test reloads it), on a notebook like nb3's."""
    yield from _open_notebook(lab, browser_context, request, "/lab/tree/{name}", cells=["", "x = 1", "y = 2"])


def test_a_proposal_waits_through_a_reload_of_the_page(own_page: Notebook) -> None:
    """The page is reloaded while a proposal waits: the new page shows it again (the time
    left, the same buttons); answered there, the agent hears it and its turn ends."""
    nb = own_page
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    _, x_id, _ = nb.cell_ids()
    _ask(nb, f"notebook insert after {x_id}\n```\n{HOSTILE}\n```")
    expect(nb.cell(1).locator(".acp-proposal-insert")).to_be_visible(timeout=TURN)
    nb.page.reload()
    nb.page.wait_for_function("() => window.jupyterapp !== undefined", timeout=START)
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    box = nb.cell(1).locator(".acp-proposal-insert")
    expect(box).to_have_attribute("data-state", "waiting", timeout=TURN)
    expect(box.locator(".acp-proposal-source")).to_have_text(HOSTILE)
    assert box.locator("img").count() == 0
    box.get_by_role("button", name="Accept").click()
    expect(box).to_have_attribute("data-state", "applied")
    assert nb.sources()[1:] == ["x = 1", HOSTILE, "y = 2"]
    # The agent heard "applied" and its turn ended: the kernel is idle, and the next turn runs.
    expect(nb.panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(1, timeout=TURN)
    out = _ask(nb, "notebook cells")
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    assert HOSTILE.split("\\n")[0] in (_fold(out, "notebook: cells").text_content() or "")


def test_run_cell_asks_with_the_cells_live_source_and_runs_it(pynb: Notebook) -> None:
    """The agent runs a cell the user typed and has not run or saved: the question shows that
    source (as the page has it now), and once allowed the next cell sees what it set."""
    nb = pynb
    nb.run(0, "%load_ext acp_kernel")
    expect(nb.run(1, "%acp connect demo --permissions ask")).to_contain_text("Connected", timeout=TURN)
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    code = "x = 6 * 7\nprint('<img src=x onerror=alert(1)> `a\\nb` $x$ /tmp/a\\nb.py', x)"
    editor = nb.cell(5).locator(".cm-content")
    editor.click()
    nb.page.keyboard.insert_text(code)
    expect(editor).to_have_text(code.replace("\n", ""), use_inner_text=False)
    target = nb.cell_ids()[5]
    out = nb.run(2, f"%%acp\nnotebook run-cell {target}")
    form = out.locator(".acp-permission")
    expect(form).to_have_count(1, timeout=TURN)
    expect(form).to_contain_text("Run Python in this notebook")
    expect(form).to_contain_text("x = 6 * 7")
    assert out.locator("img[src='x']").count() == 0
    form.get_by_role("button", name="Allow once").click()
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    row = _fold(out, "notebook: run_cell")
    expect(row).to_contain_text(f'Cell "{target}" as the user\'s page has it now')
    expect(row).to_contain_text("<img src=x onerror=alert(1)>")
    expect(out.locator("img[src='x']")).to_have_count(0)
    expect(nb.run(3, "x")).to_contain_text("42", timeout=TURN)


@pytest.fixture
def nb7_3(notebook7, browser_context, request):
    """Notebook 7's notebook page: a cell for prompts and two of the user's."""
    yield from _open_notebook(notebook7, browser_context, request, "/notebooks/{name}", cells=["", "x = 1", "y = 2"])


def test_accept_all_and_undo_this_turns_edits_in_notebook7(nb7_3: Notebook) -> None:
    nb = nb7_3
    expect(nb.panel).to_have_attribute(OPEN, "open", timeout=START)
    listed = _ask(nb, "notebook cells")
    expect(status_line(listed)).to_have_text(END_TURN, timeout=TURN)
    result = _fold(listed, "notebook: cells").text_content() or ""
    ids = dict(re.findall(r'## Cell (\d+): code, id "([A-Za-z0-9_-]+)"', result))
    out = _ask(nb, f"notebook all\nedit {ids['2']}\n```\nx = 10\n```\nedit {ids['3']}\n```\n{HOSTILE}\n```")
    bar = _bar(nb)
    expect(bar).to_have_attribute("data-waiting", "2", timeout=TURN)
    expect(nb.cell(2).locator(".acp-add")).to_have_text(f"+ {HOSTILE}")
    assert nb.page.locator("img[src='x']").count() == 0
    bar.get_by_role("button", name="Accept all").click()
    expect(status_line(out)).to_have_text(END_TURN, timeout=TURN)
    expect(_fold(out, "notebook: edit_cell")).to_have_count(2)
    for i in range(2):
        expect(_fold(out, "notebook: edit_cell").nth(i)).to_contain_text("Applied")
    expect(nb.cell(1).locator(".cm-content")).to_have_text("x = 10")
    bar.get_by_role("button", name="Undo this turn's edits").click()
    expect(bar.locator(".acp-proposals-turn-status")).to_have_text("Undid this turn's 2 changes.")
    expect(nb.cell(1).locator(".cm-content")).to_have_text("x = 1")
    expect(nb.cell(2).locator(".cm-content")).to_have_text("y = 2")
