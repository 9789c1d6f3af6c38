"""The ``cells`` answer from the live notebook (a page's snapshot, docwire's shapes) and
from the saved file, laid out within its budget: pure, no processes."""

from __future__ import annotations

import os

import nbformat
import pytest
from pydantic import ValidationError

from acp_kernel.notebook_mcp import docwire, document, tools
from tests.hostile.render import live

HOSTILE = "<img src=x onerror=alert(1)>\n```\n</details>"


def snapshot(**kwargs) -> docwire.Snapshot:
    """A snapshot as the page sends it (JSON), validated as the kernel does."""
    return docwire.Snapshot.model_validate({"type": "snapshot", "id": 1, **kwargs})


def cell(source: str, cell_type: str = "code", **kwargs) -> dict:
    return {"id": f"id-{abs(hash(source)) % 10_000}", "cell_type": cell_type,
            "source": {"head": source, "tail": "", "omitted": 0}, **kwargs}


def test_the_live_notebook_with_unsaved_edits_the_active_and_the_selected_cells():
    snap = snapshot(path="work/analysis.ipynb", dirty=True, active=1, selected=[1, 2], cells=[
        cell("# Title", "markdown"),
        cell("x = 1  # typed, not saved", execution_count=4, outputs=[
            {"output_type": "stream", "name": "stdout", "text": {"head": "a" * 500, "tail": "z" * 500, "omitted": 5000}},
            {"output_type": "display_data", "text": {"head": "<Figure>"}, "others": [{"mime": "image/png", "size": 40_000}]},
            {"output_type": "error", "ename": "ValueError", "evalue": {"head": "bad value"}},
            {"output_type": "something_new", "data": 1},
        ]),
        cell(HOSTILE, outputs=[{"output_type": "stream", "name": "stdout", "text": {"head": HOSTILE}},
                               {"output_type": "display_data", "others": [{"mime": "text/x\n## Cell 9: code", "size": 3}]}]),
    ])
    text = tools.cells_from_snapshot(snap)
    assert text.startswith("The notebook as it is now in the user's page (live, unsaved edits included; "
                           "it has unsaved changes): 3 cells")
    assert "The user's active cell is cell 2. Selected: cells 2, 3." in text
    assert ('## Cell 2: code, execution count 4, id "' in text
            and "(active: the user's cursor is here, selected)" in text)
    assert "x = 1  # typed, not saved" in text and "work/analysis.ipynb" in text
    assert "a" * 500 + "\n[... 5000 characters cut ...]\n" + "z" * 500 in text
    assert "[image image/png, about 30,000 bytes: not included]" in text
    assert "ValueError: bad value" in text and "[something_new output]" in text
    assert HOSTILE in text and live(text) == []  # agent text stays text
    assert "\n## Cell 9" not in text and "[text/x ## Cell 9: code, 3 characters: not included]" in text
    assert f"{tools.CELL_SOURCE_LIMIT:,} characters" in text  # the budgets are said


def test_the_page_is_not_believed_past_the_bounds():
    with pytest.raises(ValidationError):
        snapshot(cells=[cell("x" * (docwire.SOURCE_CHARS + 1_000))])
    with pytest.raises(ValidationError):
        snapshot(cells=[cell("x", outputs=[{"output_type": "stream", "text": {"head": "y"}}] * 50)])
    # fields and output types a newer page may send are ignored, not refused
    snap = snapshot(cells=[cell("x", future_field=1, outputs=[{"output_type": "widget_view", "model": "m"}])],
                    proposals=[])
    assert "[widget_view output]" in tools.cells_from_snapshot(snap)


def big(n: int = 500, active: int | None = 250) -> docwire.Snapshot:
    cells = [cell(f"value_{i} = compute({i})\n" + "# a comment line\n" * 30, execution_count=i + 1,
                  outputs=[{"output_type": "stream", "name": "stdout", "text": {"head": f"{i}\n" * 200}}])
             for i in range(n)]
    return snapshot(active=active, cells=cells)


def test_a_500_cell_notebook_stays_within_the_budget_nearest_the_active_cell_first():
    text = tools.cells_from_snapshot(big())
    assert len(text) <= tools.CELLS_BUDGET
    assert "[... " not in text[-200:]  # laid out to fit, not cut at the end
    assert "value_250 = compute(250)" in text and "(active: the user's cursor is here)" in text
    assert "## Cell 251: code, execution count 251" in text
    full = text.count("Outputs:")
    stubs = text.count(" lines, first: ")
    assert full >= 3 and stubs > full  # the nearest in full, more as one line each
    assert "## Cell 250:" in text and "## Cell 252:" in text
    assert "left out (" in text and "Cells 1–" in text and "–500 left out" in text


def test_without_an_active_cell_the_last_cells_come_first():
    text = tools.cells_from_snapshot(big(active=None))
    assert "No cell is active." in text and "## Cell 500:" in text and "Cells 1–" in text


def test_a_small_notebook_is_shown_whole():
    snap = snapshot(cells=[cell(f"print({i})") for i in range(5)], active=0)
    text = tools.cells_from_snapshot(snap)
    assert "left out" not in text and " lines, first: " not in text
    assert all(f"print({i})" in text for i in range(5))


def test_the_saved_file_says_why_and_how_old_it_is(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("y = 2", execution_count=1)])
    nb.cells[0].outputs = [nbformat.v4.new_output("error", ename="KeyError", evalue="'k'", traceback=["tb"])]
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, str(path))
    os.utime(path, (1_000_000, 1_000_000))
    text = tools.cells_from_notebook(str(path), "no notebook page is connected", now=1_000_000 + 3 * 3600 + 120)
    assert text.startswith("The notebook as last saved (unsaved edits are not included: no notebook page "
                           "is connected). The file was saved 3 h 2 min ago (1970-01-12 13:46:40 UTC).")
    assert "y = 2" in text and "KeyError: 'k'" in text


def test_a_large_saved_notebook_is_laid_out_like_a_live_one(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"v{i} = {i}\n" + "#\n" * 40)
                                         for i in range(500)])
    path = tmp_path / "large.ipynb"
    nbformat.write(nb, str(path))
    text = tools.cells_from_notebook(str(path))
    assert len(text) <= tools.CELLS_BUDGET and "## Cell 500:" in text and "left out" in text


@pytest.mark.parametrize("seconds, words", [(5, "5 s"), (600, "10 min"), (7_300, "2 h 1 min"), (3 * 86_400, "3 days")])
def test_ages(seconds, words):
    assert tools.age(seconds) == words


class Page:
    """Stands for a page's comm in :func:`document.choose` (only its path is read)."""


def test_the_page_showing_the_kernels_own_notebook_is_asked(monkeypatch):
    pages = [document.Page(comm=Page(), path=p, app="lab") for p in ("a/one.ipynb", "two.ipynb", "three.ipynb")]
    monkeypatch.setattr(document, "_pages", pages)
    assert document.choose("/srv/root/a/one.ipynb") is pages[0]
    assert document.choose("/srv/root/two.ipynb") is pages[1]
    assert document.choose("/srv/root/other.ipynb") is pages[2]  # else the newest
    assert document.choose(None) is pages[2]
    monkeypatch.setattr(document, "_pages", [])
    assert document.choose("/x.ipynb") is None


def test_cells_the_page_sent_as_stubs_say_so():
    """Past the page's total (1,000,000 characters) it sends each cell's start only."""
    snap = snapshot(cells=[cell("x = 1"), {**cell("y = 2  # the start of a long cell"), "stub": True}])
    text = tools.cells_from_snapshot(snap)
    assert "y = 2  # the start of a long cell" in text
    assert text.count("[the page sent only the start of this cell: the notebook is large]") == 1


async def test_at_most_proposals_waiting_wait_and_an_answer_frees_a_place(monkeypatch):
    """Each proposal is a box in the user's page: the agent may keep only so many waiting."""
    import asyncio

    sent: list[dict] = []

    class Comm:
        def send(self, data):
            sent.append(data)

    page = document.Page(comm=Comm(), path="a.ipynb", app="lab")
    monkeypatch.setattr(document, "_pages", [page])
    proposal = {"kind": "delete", "cell_id": "c1"}
    waiting = [asyncio.create_task(document.propose(None, proposal, 30)) for _ in range(docwire.PROPOSALS_WAITING)]
    while len(sent) < docwire.PROPOSALS_WAITING:
        await asyncio.sleep(0)
    decided, why = await document.propose(None, proposal, 30)
    assert decided is None and f"{docwire.PROPOSALS_WAITING} proposals already wait" in why
    assert len(sent) == docwire.PROPOSALS_WAITING  # the one refused never reached the page
    document._on_msg(page, {"content": {"data": {"type": "decided", "id": sent[0]["id"], "outcome": "rejected"}}})
    first, _ = await waiting[0]
    assert first is not None and first.outcome == "rejected"
    extra = asyncio.create_task(document.propose(None, proposal, 30))
    while len(sent) < docwire.PROPOSALS_WAITING + 1:
        await asyncio.sleep(0)
    for task in [*waiting[1:], extra]:
        task.cancel()
    await asyncio.gather(*waiting[1:], extra, return_exceptions=True)
    assert document._waiting == 0


class _Comm:
    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, data):
        self.sent.append(data)


async def _until(check, what: str):
    """Let the loop run until ``check()`` holds (each step is an event the code under test scheduled)."""
    import asyncio

    for _ in range(1_000):
        if check():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def test_a_proposal_is_shown_again_in_a_reloaded_page_and_answered_there(monkeypatch):
    """A page of the same notebook that opens while a proposal waits (a reload) shows it
    with the time left; its answer settles it, and the first page is told it is withdrawn."""
    import asyncio

    old = document.Page(comm=_Comm(), path="work/a.ipynb", app="lab")
    other = document.Page(comm=_Comm(), path="work/b.ipynb", app="lab")
    monkeypatch.setattr(document, "_pages", [other, old])
    proposal = {"kind": "insert", "source": "<img src=x onerror=alert(1)>", "seconds": 900}
    waiting = asyncio.create_task(document.propose("/srv/work/a.ipynb", proposal, 930))
    await _until(lambda: old.comm.sent, "the proposal reached the page")
    rid = old.comm.sent[0]["id"]

    new = document.Page(comm=_Comm(), path="work/a.ipynb", app="lab")
    document._pages.append(new)
    document._show_again(new)
    document._show_again(other)  # another notebook's page is not shown it
    assert other.comm.sent == []
    again = new.comm.sent[0]
    assert again["id"] == rid and again["source"] == proposal["source"] and 800 < again["seconds"] <= 900

    document._on_msg(new, {"content": {"data": {"type": "decided", "id": rid, "outcome": "applied", "cell_id": "c9"}}})
    decided, why = await waiting
    assert decided is not None and decided.outcome == "applied" and decided.cell_id == "c9", why
    assert old.comm.sent[-1] == {"type": "withdrawn", "id": rid, "why": "answered in another page"}
    assert document._pending == {} and document._waiting == 0


async def test_a_proposal_outlives_its_page_for_a_grace_then_fails(monkeypatch):
    """The last page showing a proposal closed: it waits PAGE_GRACE for a page of the
    notebook (the user reopens it) and fails after, saying why; a snapshot fails at once."""
    import asyncio

    monkeypatch.setattr(document, "PAGE_GRACE", 0.05)
    page = document.Page(comm=_Comm(), path="a.ipynb", app="lab")
    monkeypatch.setattr(document, "_pages", [page])
    waiting = asyncio.create_task(document.propose(None, {"kind": "delete", "cell_id": "c1"}, 30))
    snap = asyncio.create_task(document.snapshot(None, 30))
    await _until(lambda: len(page.comm.sent) == 2, "both requests reached the page")
    document._forget(page)
    live, why = await snap
    assert live is None and "closed its comm" in why
    decided, why = await asyncio.wait_for(waiting, 5)
    assert decided is None and "no page of the notebook opened within" in why


async def test_a_proposal_the_agent_stops_waiting_for_is_withdrawn_in_the_page(monkeypatch):
    import asyncio

    page = document.Page(comm=_Comm(), path="a.ipynb", app="lab")
    monkeypatch.setattr(document, "_pages", [page])
    decided, why = await document.propose(None, {"kind": "delete", "cell_id": "c1"}, 0.01)
    assert decided is None and "did not answer within" in why
    rid = page.comm.sent[0]["id"]
    assert page.comm.sent[-1] == {"type": "withdrawn", "id": rid, "why": "the agent stopped waiting"}
    task = asyncio.create_task(document.propose(None, {"kind": "delete", "cell_id": "c1"}, 30))
    await _until(lambda: len(page.comm.sent) == 3, "the second proposal reached the page")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert page.comm.sent[-1]["type"] == "withdrawn" and document._waiting == 0


def test_what_the_agent_hears_of_a_withdrawn_proposal():
    decided = docwire.Decided(id=1, outcome="withdrawn", detail="its turn ended (the cell finished or was interrupted)")
    assert tools.decided_text("edit", decided, "c1") == (
        'Withdrawn: its turn ended (the cell finished or was interrupted) before the user answered '
        'the change to cell "c1"; the notebook was not changed.')


def test_a_turns_origin_is_its_execute_request_and_the_cell_the_front_end_named():
    from acp_kernel.client.notebook import NO_ORIGIN, Origin

    parent = {"header": {"msg_type": "execute_request", "msg_id": "m-1"}, "metadata": {"cellId": "c-7"}}
    assert Origin.of(parent) == Origin("m-1", "c-7")
    assert Origin.of({"header": {"msg_type": "execute_request", "msg_id": "m-2"}}) == Origin("m-2", "")
    # a comm message (a widget click, the server's tool call) is no turn's request
    assert Origin.of({"header": {"msg_type": "comm_msg", "msg_id": "m-3"}}) == NO_ORIGIN
    assert Origin.of(None) == NO_ORIGIN and Origin.of({"header": None, "metadata": 3}) == NO_ORIGIN
