"""The pure part of the notebook tools: running code, previews, cells, bounds."""

from __future__ import annotations

import base64

import nbformat
import pytest

from acp_kernel.notebook_mcp import tools
from acp_kernel.notebook_mcp.wire import MAX_IMAGE_BYTES, MAX_IMAGES, MAX_TEXT
from tests.hostile.render import live

HOSTILE_HTML = "<img src=x onerror=alert(1)>"
SPAN_ACROSS_LINES = "`code span\nacross a line break`"
NEWLINE_PATH = "dir\nwith newline"


# -- run ------------------------------------------------------------------------------


def test_run_returns_the_last_expression_and_keeps_names():
    ns: dict = {}
    out = tools.run("x = 41 + 1\nx", ns)
    assert out.ok and out.has_value and out.value == 42 and ns["x"] == 42
    assert out.summary() == "42"
    assert tools.run("y = 1", ns) == tools.Outcome(ok=True)
    assert tools.run("x + y", ns).value == 43
    nothing = tools.run("None", ns)
    assert nothing.has_value and nothing.value is None and nothing.summary() == "done"


def test_run_error_is_a_traceback_of_the_code_only():
    out = tools.run("def f():\n    raise ValueError('boom')\nf()", {})
    assert not out.ok
    assert "ValueError: boom" in out.error
    assert "raise ValueError('boom')" in out.error  # the code's own line is shown
    assert "notebook_mcp" not in out.error and "tools.py" not in out.error
    assert out.summary() == "ValueError: boom"


def test_run_syntax_error_and_top_level_await():
    out = tools.run("def (", {})
    assert not out.ok and "SyntaxError" in out.error
    awaited = tools.run("import asyncio\nawait asyncio.sleep(0)", {})
    assert not awaited.ok and "top-level await is not available" in awaited.error
    assert "await asyncio.sleep(0)" in awaited.error  # the offending line is shown


def test_run_lets_keyboard_interrupt_through():
    with pytest.raises(KeyboardInterrupt):
        tools.run("raise KeyboardInterrupt", {})


# -- bounds ---------------------------------------------------------------------------


def test_cut_keeps_head_and_tail_and_says_so():
    text = "H" * 30_000 + "T" * 30_000
    short = tools.cut(text)
    assert short.startswith("H") and short.endswith("T")
    assert f"{60_000 - MAX_TEXT} characters cut" in short
    assert len(short) < MAX_TEXT + 200
    assert tools.cut("small") == "small"


def test_stream_is_bounded_as_it_arrives():
    stream = tools.Stream(limit=10)
    for _ in range(1000):
        stream.add("abc")
    text = stream.text()
    assert text.startswith("abcabcabca") and text.endswith("bcabc")
    assert "2980 characters cut" in text


def test_images_and_displays_are_bounded_as_they_arrive():
    png = b"\x89PNG fake"
    captured = tools.Captured()
    for _ in range(10_000):  # code displaying in a loop: nothing past the bounds is kept
        captured.add_image("image/png", png)
        captured.add_display("<b>row</b>\n")
    captured.add_image("image/png", b"x" * (MAX_IMAGE_BYTES + 1))
    captured.add_image("image/png", "not base64 \u2603")
    captured.add_image("image/png", base64.b64encode(png).decode())
    for n in range(tools.MAX_NOTES + 5):
        captured.note(f"[figure {n} could not be drawn]")
    assert len(captured.images) == MAX_IMAGES and not captured.room_for_image()
    assert base64.b64decode(captured.images[0].data) == png and captured.images[0].mimeType == "image/png"
    assert len(captured.displays.text()) < 2 * MAX_TEXT + 100
    notes = captured.all_notes()
    assert len(notes) == tools.MAX_NOTES + 4
    assert f"[{10_000 - MAX_IMAGES + 1} × image past the first {MAX_IMAGES} left out]" in notes
    assert f"[1 × image/png image over {MAX_IMAGE_BYTES} bytes left out]" in notes
    assert "[1 × image/png output that is not valid base64 left out]" in notes
    assert "[5 × note left out]" in notes
    text = tools.execute_content(tools.Outcome(ok=True), captured)[0].text
    assert text.startswith("displayed:\n<b>row</b>\n") and "characters cut" in text


def test_execute_content_sections():
    captured = tools.Captured()
    captured.stdout.add("printed\n")
    captured.add_image("image/png", b"\x89PNG")
    content = tools.execute_content(tools.Outcome(ok=True, has_value=True, value=[1, 2]), captured)
    assert content[0].text == "stdout:\nprinted\n\n\nresult:\n[1, 2]"
    assert content[1].type == "image"
    failed = tools.execute_content(tools.Outcome(ok=False, error="\x1b[31mBoom\x1b[0m"), tools.Captured())
    assert failed[0].text == "error:\nBoom"
    assert tools.execute_content(tools.Outcome(ok=True), tools.Captured())[0].text == "(no output)"


# -- previews -------------------------------------------------------------------------


class StandInFrame:
    """What variables() needs of a DataFrame: shape, dtypes, head()."""

    shape = (3, 2)

    class dtypes:  # noqa: N801 - mirrors pandas' attribute
        @staticmethod
        def to_string():
            return "a    int64\nb    object"

    def head(self, n):
        return f"   a  b\n0  1  x   (first {n})"


class BadRepr:
    def __repr__(self):
        raise RuntimeError("no")


def frame():
    try:
        import pandas as pd
    except ImportError:
        return StandInFrame()
    return pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})


def test_variables_lists_user_names_only():
    import os as some_module

    ns = {"x": 42, "_hidden": 1, "In": [], "Out": {}, "get_ipython": len, "exit": None,
          "os": some_module, "s": "A" * 1000, "bad": BadRepr(), "df": frame()}
    listing = tools.list_variables(ns)
    assert "x: int = 42" in listing
    for absent in ("_hidden", "In:", "Out:", "get_ipython", "exit", "os:"):
        assert absent not in listing
    assert "BadRepr = <BadRepr instance at" in listing  # its __repr__ raised
    assert len([line for line in listing.splitlines() if line.startswith("s: str")][0]) < 250
    assert "shape: (3, 2)" in listing and "int64" in listing
    assert tools.list_variables({"_": 1}).startswith("No user variables")


def test_describe_one_variable():
    ns = {"df": frame(), "items": list(range(500)), "f": tools.cut}
    found, text = tools.describe(ns, "df")
    assert found and "shape: (3, 2)" in text and "head(10)" in text
    found, text = tools.describe(ns, "items")
    assert found and "len: 500" in text and "199" in text
    found, text = tools.describe(ns, "f")
    assert found and "doc: ``text`` within" in text
    found, text = tools.describe(ns, "missing")
    assert not found and "User variables: df, f, items" in text


def test_is_frame_survives_hostile_getattr():
    class Hostile:
        def __getattr__(self, name):
            raise RuntimeError("no attributes for you")

    assert not tools.is_frame(Hostile())
    assert not tools.is_frame(StandInFrame)  # the class itself is not a frame


# -- cells ----------------------------------------------------------------------------


def hostile_notebook(path):
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell(f"print({HOSTILE_HTML!r})\n```\n{HOSTILE_HTML}\n````", execution_count=3)
    code.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=HOSTILE_HTML + "\n"),
        nbformat.v4.new_output("display_data", data={"text/html": HOSTILE_HTML, "image/png": "iVBO"}),
        nbformat.v4.new_output("error", ename="ValueError", evalue="bad",
                               traceback=["\x1b[31mValueError\x1b[0m: bad"]),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell(f"# Title\n{SPAN_ACROSS_LINES}\n{HOSTILE_HTML}"), code]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return nb


def test_cells_from_a_hostile_notebook(tmp_path):
    path = tmp_path / NEWLINE_PATH / f"{HOSTILE_HTML}.ipynb"
    nb = hostile_notebook(path)
    text = tools.cells_from_notebook(str(path))
    assert "2 cells" in text and str(path) in text
    # each source verbatim, inside a fence no source line can close
    for cell in nb.cells:
        assert cell.source in text
    assert "## Cell 2: code, execution count 3" in text
    assert HOSTILE_HTML + "\n" in text  # the stream output, as text
    assert "[image image/png, about 3 bytes: not included]" in text and "ValueError: bad" in text
    assert "[text/html, 28 characters: not included]" in text
    assert "\x1b" not in text
    # rendered by a trusting Markdown frontend, nothing in it is live
    assert live(text) == []


def test_cells_bounds_and_unreadable_files(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("print('x')")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="z" * 50_000)]
    nb.cells = [nbformat.v4.new_code_cell("print(1)", outputs=cell.outputs) for _ in range(20)]
    path = tmp_path / "big.ipynb"
    nbformat.write(nb, str(path))
    text = tools.cells_from_notebook(str(path))
    assert len(text) < MAX_TEXT + 300 and "characters cut" in text
    missing = tools.cells_from_notebook(str(tmp_path / NEWLINE_PATH / "gone.ipynb"))
    assert missing.startswith("The notebook could not be read (FileNotFoundError")
    assert live(missing) == []


def test_cells_from_history():
    text = tools.cells_from_history(["x = 1", f"s = {HOSTILE_HTML!r}\n```"])
    assert "does not know its notebook file" in text and "2 runs" in text
    assert "## Run 2" in text and live(text) == []


def test_offered_tokens_never_look_like_options(monkeypatch):
    """A token starting with '-' would make argparse reject `--token -x` (a real flake)."""
    from acp_kernel.notebook_mcp import host

    assert host.offer(type("B", (), {"tools": frozenset({"cells"})})()) is None  # not in a kernel
    monkeypatch.setattr("ipykernel.connect.get_connection_file", lambda: "/tmp/kernel-x.json")
    tokens = []
    try:
        for _ in range(200):
            entry = host.offer(type("B", (), {"tools": frozenset({"cells"})})())
            assert entry is not None
            tokens.append(host.token_of(entry))
    finally:
        for token in tokens:
            host.withdraw(token)
    assert all(t and t[0].isalnum() for t in tokens)
    assert len(set(tokens)) == len(tokens)


# -- proposals --------------------------------------------------------------------------


def test_the_client_layer_lists_the_servers_tools_in_its_order():
    from acp_kernel.client.notebook import NOTEBOOK_TOOLS
    from acp_kernel.notebook_mcp.wire import TOOLS

    assert NOTEBOOK_TOOLS == TOOLS


def test_edit_arguments_are_a_whole_source_or_one_snippet():
    from acp_kernel.notebook_mcp.tools import proposal_of
    from acp_kernel.notebook_mcp.wire import DeleteCellArgs, EditCellArgs, InsertCellArgs

    assert proposal_of(InsertCellArgs(source="x = 1")) == {"kind": "insert", "cell_id": "", "cell_type": "code",
                                                          "source": "x = 1"}
    assert proposal_of(EditCellArgs(cell_id="c1", source="y")) == {"kind": "edit", "cell_id": "c1", "source": "y"}
    assert proposal_of(EditCellArgs(cell_id="c1", old="a", new="")) == {"kind": "edit", "cell_id": "c1", "old": "a",
                                                                        "new": ""}
    assert "either source" in proposal_of(EditCellArgs(cell_id="c1"))
    assert "either source" in proposal_of(EditCellArgs(cell_id="c1", source="y", old="a", new="b"))
    assert "both old" in proposal_of(EditCellArgs(cell_id="c1", old="a"))
    assert proposal_of(DeleteCellArgs(cell_id="c1")) == {"kind": "delete", "cell_id": "c1"}
    with pytest.raises(ValueError):
        DeleteCellArgs(cell_id="../x\n")  # ids are nbformat's
    with pytest.raises(ValueError):
        InsertCellArgs(source="x" * 20_001)


def test_the_agent_is_told_what_became_of_its_proposal():
    from acp_kernel.notebook_mcp.docwire import Decided
    from acp_kernel.notebook_mcp.tools import decided_text

    said = decided_text("insert", Decided(id=1, outcome="applied", cell_id="new1"))
    assert said.startswith("Applied: inserted as cell \"new1\"")
    said = decided_text("edit", Decided(id=1, outcome="rejected", detail="keep it\nshort"), "c1")
    assert said.startswith("Rejected") and "change to cell \"c1\"" in said and "keep it short" in said
    said = decided_text("edit", Decided(id=1, outcome="conflict", detail="the user changed the cell"), "c1")
    assert said.startswith("Conflict: the user changed the cell") and "read the cells again" in said
    assert decided_text("delete", Decided(id=1, outcome="expired"), "c1").startswith("Expired")
    assert "not in the cell" in decided_text("edit", Decided(id=1, outcome="invalid",
                                                             detail="the snippet old is not in the cell"), "c1")
