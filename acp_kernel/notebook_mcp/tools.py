"""What the tools compute, without any I/O: run code with the value of its last
expression, previews of variables, the notebook's cells as text, and the bounds.

Everything here returns plain text for the agent (never HTML): the strings come from
the agent's code and from the user's namespace, so they are data, shown verbatim inside
fences long enough that no source can close them.
"""

from __future__ import annotations

import ast
import base64
import itertools
import json
import linecache
import os
import re
import reprlib
import time
import traceback
import types
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from . import docwire
from .wire import (MAX_IMAGE_BYTES, MAX_IMAGES, MAX_TEXT, DeleteCellArgs, EditCellArgs, Image, InsertCellArgs,
                   Text)

#: IPython's own names in a user namespace, never "user variables".
HIDDEN = frozenset({"In", "Out", "exit", "quit", "get_ipython"})
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_runs = itertools.count(1)
#: Notes kept per reply (figures that could not be drawn); more are counted.
MAX_NOTES = 20


# -- bounds ---------------------------------------------------------------------------


def cut(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` within ``limit`` characters: the head and the tail (where a traceback
    ends), with a line saying how much was cut."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return (f"{text[:head]}\n[... {len(text) - limit} characters cut: replies are limited to "
            f"{limit} characters ...]\n{text[-tail:]}")


def fence(body: str, info: str = "") -> str:
    """``body`` in a backtick fence longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{info}\n{body}{'' if body.endswith(chr(10)) or not body else chr(10)}{ticks}"


def plain(text: str) -> str:
    """Terminal colours out of a traceback."""
    return _ANSI.sub("", text)


def _b64decode(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=False)
    except (ValueError, TypeError):
        return None


# -- running code ---------------------------------------------------------------------


@dataclass
class Outcome:
    """How one run of ``execute`` ended (``KeyboardInterrupt`` is not caught here)."""

    ok: bool
    has_value: bool = False
    value: Any = None
    error: str = ""  # the traceback text, when not ok

    def summary(self) -> str:
        """One line for the notebook: the result's repr head, or the error's last line."""
        if not self.ok:
            lines = [line for line in self.error.strip().splitlines() if line.strip()]
            return lines[-1] if lines else "error"
        if self.has_value and self.value is not None:
            return one_line(safe_repr(self.value), 120)
        return "done"


def run(code: str, namespace: dict) -> Outcome:
    """Run ``code`` in ``namespace`` like a notebook cell: statements, then the value of
    a final expression (if any). Errors come back as traceback text that shows the
    code's own lines and none of ours."""
    filename = f"<notebook-mcp-{next(_runs)}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    try:
        tree = ast.parse(code, filename=filename, mode="exec")
        last: ast.expr | None = None
        final = tree.body[-1] if tree.body else None
        if isinstance(final, ast.Expr):
            tree.body.pop()
            last = final.value
        body = compile(tree, filename, "exec")
        tail = compile(ast.Expression(last), filename, "eval") if last is not None else None
    except SyntaxError as exc:
        lines = code.splitlines()
        if exc.text is None and exc.lineno and 0 < exc.lineno <= len(lines):
            exc.text = lines[exc.lineno - 1]  # compiling an AST leaves the line out
        text = "".join(traceback.format_exception_only(type(exc), exc))
        if "await" in str(exc.msg):
            text += ("(top-level await is not available in execute: the kernel's event loop is "
                     "busy running this turn; write synchronous code)\n")
        return Outcome(ok=False, error=text)
    namespace.setdefault("__builtins__", __builtins__)
    try:
        exec(body, namespace)  # noqa: S102 - the tool's purpose
        if tail is None:
            return Outcome(ok=True)
        value = eval(tail, namespace)  # noqa: S307
        return Outcome(ok=True, has_value=True, value=value)
    except Exception as exc:  # the code's own error, reported to the agent
        return Outcome(ok=False, error=format_error(exc))


def format_error(exc: BaseException) -> str:
    """The traceback of ``exc`` without this module's frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


# -- previews -------------------------------------------------------------------------


_short = reprlib.Repr()
_short.maxstring = _short.maxother = 200
_short.maxlist = _short.maxtuple = _short.maxset = _short.maxdict = 20
_long = reprlib.Repr()
_long.maxstring = _long.maxother = 5_000
_long.maxlist = _long.maxtuple = _long.maxset = _long.maxdict = 200
_long.maxlevel = 4


def safe_repr(value: Any, long: bool = False) -> str:
    """A bounded repr that never raises (a namespace object's ``__repr__`` may)."""
    try:
        return (_long if long else _short).repr(value)
    except Exception as exc:  # noqa: BLE001 - any user __repr__ failure
        return f"<{type_name(value)} object; repr failed: {type(exc).__name__}>"


def one_line(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def type_name(value: Any) -> str:
    cls = type(value)
    module = getattr(cls, "__module__", "") or ""
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module in ("builtins", "") else f"{module}.{name}"


def is_frame(value: Any) -> bool:
    """A DataFrame-like object (pandas, or anything with shape, dtypes and head())."""
    if isinstance(value, type):
        return False
    try:
        return (hasattr(value, "shape") and hasattr(value, "dtypes")
                and callable(getattr(value, "head", None)))
    except Exception:  # noqa: BLE001 - a hostile __getattr__
        return False


def _as_text(obj: Any) -> str:
    try:
        to_string = getattr(obj, "to_string", None)
        return str(to_string() if callable(to_string) else obj)
    except Exception as exc:  # noqa: BLE001
        return f"<not printable: {type(exc).__name__}>"


def frame_preview(value: Any, rows: int) -> str:
    shape: tuple[Any, ...] | str
    try:
        shape = tuple(value.shape)
    except Exception:  # noqa: BLE001
        shape = "?"
    try:
        head = value.head(rows)
    except Exception as exc:  # noqa: BLE001
        head = f"<head() failed: {type(exc).__name__}>"
    return (f"shape: {shape}\ndtypes:\n{cut(_as_text(value.dtypes), 3_000)}\n"
            f"head({rows}):\n{cut(_as_text(head), 6_000)}")


def user_variables(namespace: dict, hidden: dict | None = None) -> list[tuple[str, Any]]:
    """The user's variables: not ``_``-names, modules or IPython's own names.
    ``hidden``: what the shell itself put in the namespace (IPython's
    ``user_ns_hidden``: ``In``, ``exit``, ipykernel's ``open``...), skipped
    while a name still holds the shell's object (a user's own ``open`` shows)."""
    hidden = hidden or {}
    return sorted(
        ((name, value) for name, value in namespace.items()
         if isinstance(name, str) and not name.startswith("_") and name not in HIDDEN
         and not (name in hidden and hidden[name] is value)
         and not isinstance(value, types.ModuleType)),
        key=lambda item: item[0])


def list_variables(namespace: dict, hidden: dict | None = None) -> str:
    found = user_variables(namespace, hidden)
    if not found:
        return "No user variables yet (names starting with _, modules and IPython's own are not listed)."
    lines = [f"{len(found)} user variable{'' if len(found) == 1 else 's'} (name: type = preview); "
             "ask for one by name for more detail."]
    for name, value in found:
        if is_frame(value):
            lines.append(f"{name}: {type_name(value)}\n" + _indent(frame_preview(value, 3)))
        else:
            lines.append(f"{name}: {type_name(value)} = {one_line(safe_repr(value))}")
    return cut("\n".join(lines))


def describe(namespace: dict, name: str, hidden: dict | None = None) -> tuple[bool, str]:
    """One variable in detail: (found, text)."""
    found = dict(user_variables(namespace, hidden))
    if name not in namespace or name not in found:
        known = ", ".join(found) or "none"
        return False, cut(f"No user variable named {json.dumps(name)}. User variables: {known}.")
    value = found[name]
    parts = [f"{name}: {type_name(value)}"]
    if is_frame(value):
        parts.append(frame_preview(value, 10))
    else:
        try:
            parts.append(f"len: {len(value)}")
        except Exception:  # noqa: BLE001 - no len, or a failing one
            pass
        parts.append("repr:\n" + safe_repr(value, long=True))
        if callable(value):
            doc = (getattr(value, "__doc__", None) or "").strip()
            if isinstance(doc, str) and doc:
                parts.append("doc: " + cut(doc, 2_000))
        try:
            attrs = [a for a in dir(value) if not a.startswith("_")]
        except Exception:  # noqa: BLE001
            attrs = []
        if attrs:
            parts.append("public attributes: " + one_line(", ".join(attrs), 2_000))
    return True, cut("\n".join(parts))


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


# -- cells ----------------------------------------------------------------------------
#
# One formatter for the live notebook (a page's snapshot) and the saved file: both
# become a docwire.Snapshot, cut the same way, then laid out within CELLS_BUDGET.

CELLS_BUDGET, CELL_SOURCE_LIMIT, CELL_OUTPUT_LIMIT = (docwire.CELLS_BUDGET, docwire.CELL_SOURCE_LIMIT,
                                                     docwire.CELL_OUTPUT_LIMIT)
#: At most this share of the budget goes to one-line stubs of cells not shown in full.
STUB_SHARE = 0.35


def text_cut(text: str, limit: int) -> docwire.Text:
    """``text`` cut as the page cuts it: the head and the tail, and the count between."""
    if len(text) <= limit:
        return docwire.Text(head=text)
    head = (limit + 1) // 2
    return docwire.Text(head=text[:head], tail=text[len(text) - (limit - head):] if limit > head else "",
                        omitted=len(text) - limit)


def _whole(text: docwire.Text) -> str:
    middle = f"\n[... {text.omitted} characters cut ...]\n" if text.omitted else ""
    return text.head + middle + text.tail


def _joined(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _mime_note(mime: docwire.Mime) -> str:
    name = one_line(mime.mime, 100)  # a mime key is the code's choice: one line, bounded
    if name.startswith("image/"):
        return f"[image {name}, about {mime.size * 3 // 4:,} bytes: not included]"
    return f"[{name}, {mime.size:,} characters: not included]"


def output_summary(output: Any) -> str:
    """One output as text: a stream's text, an error's name and value, a result's
    text/plain, and every other part named with its size (images never included)."""
    if isinstance(output, docwire.Stream):
        return plain(_whole(output.text))
    if isinstance(output, docwire.Error):
        return plain(f"{output.ename}: {_whole(output.evalue)}")
    if isinstance(output, docwire.Data):
        parts = [plain(_whole(output.text))] if output.text is not None else []
        return "\n".join(parts + [_mime_note(m) for m in output.others])
    return f"[{one_line(str(getattr(output, 'output_type', '?')), 80)} output]"


def saved_output(output: dict) -> Any:
    """A saved (nbformat) output as the page would have sent it."""
    kind = output.get("output_type")
    limit = docwire.OUTPUT_CHARS
    if kind == "stream":
        return docwire.Stream(output_type="stream", name=str(output.get("name", "stdout"))[:200],
                              text=text_cut(_joined(output.get("text", "")), limit))
    if kind == "error":
        return docwire.Error(output_type="error", ename=str(output.get("ename", ""))[:200],
                             evalue=text_cut(str(output.get("evalue", "")), limit))
    if kind in ("execute_result", "display_data"):
        data = output.get("data") or {}
        text = text_cut(_joined(data["text/plain"]), limit) if "text/plain" in data else None
        others = [docwire.Mime(mime=str(k)[:200], size=len(_joined(v)) if isinstance(v, (str, list)) else len(json.dumps(v)))
                  for k, v in sorted(data.items()) if k != "text/plain"][:50]
        return docwire.Data(output_type=kind, text=text, others=others)
    return docwire.OtherOutput(output_type=str(kind)[:200])


def snapshot_of_saved(nb: Any, path: str = "") -> docwire.Snapshot:
    """A saved notebook (nbformat's dict) as a snapshot: no active cell, nothing selected."""
    cells = []
    for cell in list(nb.get("cells", []))[: docwire.MAX_CELLS]:
        outputs = list(cell.get("outputs", []) or [])
        cells.append(docwire.Cell(
            id=str(cell.get("id", "") or "")[:200], cell_type=str(cell.get("cell_type", "?"))[:200],
            source=text_cut(_joined(cell.get("source", "")), docwire.SOURCE_CHARS),
            execution_count=cell.get("execution_count") if isinstance(cell.get("execution_count"), int) else None,
            outputs=[saved_output(o) for o in outputs[: docwire.OUTPUTS_PER_CELL] if isinstance(o, dict)],
            outputs_omitted=max(0, len(outputs) - docwire.OUTPUTS_PER_CELL)))
    return docwire.Snapshot(id=0, path=path, cells=cells,
                            cells_omitted=max(0, len(nb.get("cells", [])) - docwire.MAX_CELLS))


def _lang(kind: str) -> str:
    return "python" if kind == "code" else ("markdown" if kind == "markdown" else "")


def _marks(snap: docwire.Snapshot, index: int, selected: set[int]) -> str:
    marks = (["active: the user's cursor is here"] if index == snap.active else []) + (
        ["selected"] if index in selected else [])
    return f" ({', '.join(marks)})" if marks else ""


def _heading(snap: docwire.Snapshot, index: int, selected: set[int]) -> str:
    cell = snap.cells[index]
    count = f", execution count {cell.execution_count}" if cell.execution_count else ""
    ident = f", id {json.dumps(cell.id)}" if cell.id else ""
    return f"## Cell {index + 1}: {one_line(cell.cell_type, 40)}{count}{ident}{_marks(snap, index, selected)}"


def _full(snap: docwire.Snapshot, index: int, selected: set[int]) -> str:
    cell = snap.cells[index]
    parts = [_heading(snap, index, selected), fence(cut(_whole(cell.source), CELL_SOURCE_LIMIT), _lang(cell.cell_type))]
    if cell.stub:
        parts.append("[the page sent only the start of this cell: the notebook is large]")
    outputs = [text for text in (output_summary(o) for o in cell.outputs) if text]
    if outputs:
        parts.append("Outputs:\n" + fence(cut("\n".join(outputs), CELL_OUTPUT_LIMIT), "text"))
    if cell.outputs_omitted:
        parts.append(f"[{_count(cell.outputs_omitted, 'more output')} not sent]")
    return "\n".join(parts)


def _stub(snap: docwire.Snapshot, index: int, selected: set[int]) -> str:
    source = _whole(snap.cells[index].source)
    first = next((line for line in source.splitlines() if line.strip()), "")
    lines = source.count("\n") + 1 if source else 0
    return (f"{_heading(snap, index, selected)}: {_count(lines, 'line')}"
            + (f", first: {json.dumps(one_line(first, 100))}" if first else ""))


def _priority(snap: docwire.Snapshot, selected: set[int]) -> list[int]:
    """Which cells matter most: the active one, the selected ones, then by distance from
    the active cell (else from the last one: the newest work is usually at the end)."""
    n = len(snap.cells)
    anchor = snap.active if snap.active is not None and 0 <= snap.active < n else n - 1
    return sorted(range(n), key=lambda i: (i != anchor, i not in selected, abs(i - anchor), i))


def format_cells(snap: docwire.Snapshot, intro: str, budget: int = CELLS_BUDGET) -> str:
    """The cells within ``budget`` characters: every cell in full when they fit; else the
    cells that matter most (:func:`_priority`) in full, others as one-line stubs, and
    the farthest named only as a range left out."""
    selected = set(snap.selected)
    n = len(snap.cells)
    full = [_full(snap, i, selected) for i in range(n)]
    room = budget - len(intro) - 400  # the notes on cells left out
    if sum(len(f) + 2 for f in full) <= room:
        level = [2] * n
    else:
        level = [0] * n
        stubs = [_stub(snap, i, selected) for i in range(n)]
        order = _priority(snap, selected)
        used = 0
        for i in order:
            if used + len(stubs[i]) + 2 > room * STUB_SHARE:
                break
            level[i], used = 1, used + len(stubs[i]) + 2
        for i in order:
            extra = len(full[i]) - (len(stubs[i]) if level[i] else 0) + (0 if level[i] else 2)
            if used + extra <= room:
                level[i], used = 2, used + extra
    parts = [intro]
    gap: list[int] = []

    def close_gap() -> None:
        if gap:
            span = f"Cells {gap[0] + 1}–{gap[-1] + 1}" if len(gap) > 1 else f"Cell {gap[0] + 1}"
            parts.append(f"[{span} left out ({_count(len(gap), 'cell')}) to keep this answer within "
                         f"{budget:,} characters]")
            gap.clear()

    for i in range(n):
        if level[i] == 0:
            gap.append(i)
            continue
        close_gap()
        parts.append(full[i] if level[i] == 2 else _stub(snap, i, selected))
    close_gap()
    if snap.cells_omitted:
        parts.append(f"[{_count(snap.cells_omitted, 'more cell')} past the first {n:,} not sent]")
    return cut("\n\n".join(parts), budget)


def _limits_line() -> str:
    return (f"Each cell's source is cut to {CELL_SOURCE_LIMIT:,} characters and its outputs' text to "
            f"{CELL_OUTPUT_LIMIT:,} (head and tail); images and HTML are named with their size, not "
            f"included; errors show their name and value. When the cells do not fit in "
            f"{CELLS_BUDGET:,} characters, those nearest the active cell are shown in full and the "
            "others as one line each.")


def cells_from_snapshot(snap: docwire.Snapshot, budget: int = CELLS_BUDGET) -> str:
    """The live notebook as the user's page has it now (unsaved edits included)."""
    n = len(snap.cells) + snap.cells_omitted
    state = "it has unsaved changes" if snap.dirty else "no unsaved changes"
    where = f"Its path (relative to the Jupyter server's root):\n{fence(snap.path, 'text')}" if snap.path else ""
    active = (f"The user's active cell is cell {snap.active + 1}."
              if snap.active is not None and 0 <= snap.active < len(snap.cells) else "No cell is active.")
    chosen = [i + 1 for i in snap.selected if 0 <= i < len(snap.cells)]
    picked = f" Selected: cells {', '.join(map(str, chosen[:50]))}." if chosen else ""
    intro = (f"The notebook as it is now in the user's page (live, unsaved edits included; {state}): "
             f"{_count(n, 'cell')}, numbered from 1. {active}{picked} {_limits_line()}"
             + (f"\n{where}" if where else ""))
    return format_cells(snap, intro, budget)


def age(seconds: float) -> str:
    """A duration in words a reader takes in at a glance."""
    seconds = max(0, int(seconds))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    if seconds < 48 * 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} days"


def cells_from_notebook(path: str, why: str = "", now: float | None = None) -> str:
    """The notebook at ``path`` as last saved, saying why the live notebook is not
    used (``why``) and how old the file is."""
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
        mtime = os.stat(path).st_mtime
    except Exception as exc:  # noqa: BLE001 - a missing, unreadable or invalid file
        return (f"The notebook could not be read ({type(exc).__name__}: {one_line(str(exc), 300)}). "
                f"Its path:\n{fence(path, 'text')}")
    now = time.time() if now is None else now
    saved_at = datetime.fromtimestamp(mtime, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    snap = snapshot_of_saved(nb, path)
    intro = ("The notebook as last saved (unsaved edits are not included"
             + (f": {why}" if why else "") + f"). The file was saved {age(now - mtime)} ago ({saved_at}). "
             f"{_count(len(nb.cells), 'cell')}, numbered from 1. {_limits_line()} "
             f"Its path:\n{fence(path, 'text')}")
    return format_cells(snap, intro)


def saved_cell(path: str, cell_id: str) -> tuple[str, str] | str:
    """(cell type, source) of the cell ``cell_id`` in the notebook file, or why not."""
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # noqa: BLE001 - a missing, unreadable or invalid file
        return f"the notebook file could not be read ({type(exc).__name__}: {one_line(str(exc), 300)})"
    for cell in nb.cells:
        if cell.get("id") == cell_id:
            return str(cell.get("cell_type", "")), str(cell.get("source", ""))
    return f"the notebook as last saved has no cell with id {json.dumps(cell_id)} (a new cell is in the file once saved)"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def cells_from_history(history: list[str], language: str = "python", why: str = "") -> str:
    """The sources run in this kernel, when the notebook file is not known
    (``language`` "": the ACP kernel's cells are prompts, not code)."""
    intro = ("This kernel does not know its notebook file" + (f" and {why}" if why else "") + ", so "
             f"these are the sources of the cells run in this kernel, oldest first "
             f"({_count(len(history), 'run')}, no outputs).")
    parts = [intro] + [f"## Run {n}\n{fence(source, language)}" for n, source in enumerate(history, 1)]
    return cut("\n\n".join(parts))


# -- the execute reply ----------------------------------------------------------------


class Stream:
    """Text written by a run, kept within bounds as it arrives (a loop may print
    gigabytes): the first and the last ``limit`` characters and a count of the rest."""

    def __init__(self, limit: int = MAX_TEXT) -> None:
        self.limit, self.head, self.tail, self.dropped = limit, "", "", 0

    def add(self, text: str) -> None:
        if len(self.head) < self.limit:
            room = self.limit - len(self.head)
            self.head, text = self.head + text[:room], text[room:]
        if text:
            self.tail += text
            if len(self.tail) > self.limit:
                self.dropped += len(self.tail) - self.limit
                self.tail = self.tail[-self.limit:]

    def text(self) -> str:
        middle = f"\n[... {self.dropped} characters cut ...]\n" if self.dropped else ""
        return self.head + middle + self.tail

    def __bool__(self) -> bool:
        return bool(self.head)


@dataclass
class Captured:
    """What a run printed and displayed, bounded as it arrives (code may display
    thousands of images or print gigabytes): the streams' heads and tails, the
    first :data:`MAX_IMAGES` images of at most :data:`MAX_IMAGE_BYTES`, and a
    count of each kind of thing left out."""

    stdout: Stream = field(default_factory=Stream)
    stderr: Stream = field(default_factory=Stream)
    displays: Stream = field(default_factory=Stream)  # text/plain of display() calls
    images: list[Image] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. a figure that could not be drawn
    left_out: Counter[str] = field(default_factory=Counter)

    def room_for_image(self) -> bool:
        """Whether another image would be kept (a figure not kept is not drawn)."""
        return len(self.images) < MAX_IMAGES

    def add_image(self, mime: str, data: str | bytes) -> None:
        """A displayed image: raw bytes or base64 text, as front-ends get it."""
        raw = data if isinstance(data, bytes) else _b64decode(data)
        if raw is None:
            self.left_out[f"{mime} output that is not valid base64"] += 1
        elif len(raw) > MAX_IMAGE_BYTES:
            self.left_out[f"{mime} image over {MAX_IMAGE_BYTES} bytes"] += 1
        elif not self.room_for_image():
            self.left_out[f"image past the first {MAX_IMAGES}"] += 1
        else:
            self.images.append(Image(data=base64.b64encode(raw).decode("ascii"), mimeType=mime))

    def add_display(self, text: str) -> None:
        self.displays.add(text.rstrip("\n") + "\n")

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)
        else:
            self.left_out["note"] += 1

    def all_notes(self) -> list[str]:
        return self.notes + [f"[{n} × {what} left out]" for what, n in self.left_out.items()]


def execute_content(outcome: Outcome, captured: Captured) -> list[Text | Image]:
    """The agent's view of one run: output, the value or the traceback, then images."""
    sections: list[str] = []
    if captured.stdout:
        sections.append("stdout:\n" + captured.stdout.text())
    if captured.stderr:
        sections.append("stderr:\n" + captured.stderr.text())
    if captured.displays:
        sections.append("displayed:\n" + captured.displays.text().rstrip("\n"))
    if not outcome.ok:
        sections.append("error:\n" + plain(outcome.error))
    elif outcome.has_value and outcome.value is not None:
        sections.append("result:\n" + safe_repr(outcome.value, long=True))
    notes = captured.all_notes()
    if notes:
        sections.append("\n".join(notes))
    if not sections:
        sections.append("(no output)")
    return [Text(text=cut("\n\n".join(sections))), *captured.images]


# -- proposals (insert_cell, edit_cell, delete_cell) -------------------------------------


def proposal_of(args: Any) -> dict[str, Any] | str:
    """The :class:`~.docwire.Propose` fields (but ``id`` and ``apply``) for one edit tool's
    arguments, or what is wrong with them (said to the agent)."""
    if isinstance(args, InsertCellArgs):
        return {"kind": "insert", "cell_id": args.after or "", "cell_type": args.cell_type, "source": args.source}
    if isinstance(args, DeleteCellArgs):
        return {"kind": "delete", "cell_id": args.cell_id}
    assert isinstance(args, EditCellArgs)
    whole, snippet = args.source is not None, args.old is not None or args.new is not None
    if whole == snippet:
        return "edit_cell takes either source (the whole new source) or old and new (one snippet replaced)"
    if snippet and (args.old is None or args.new is None):
        return "edit_cell: give both old (the snippet, found exactly once) and new (what replaces it)"
    if whole:
        return {"kind": "edit", "cell_id": args.cell_id, "source": args.source}
    return {"kind": "edit", "cell_id": args.cell_id, "old": args.old, "new": args.new}


#: What the agent hears of a new cell the front-end puts below the turn's cell (``set_next_input``).
BELOW_TEXT = ("Accepted, not yet in the notebook: this front-end has no acp-kernel extension, so the new cell "
              "goes below the cell running this turn when the turn ends (Jupyter's set_next_input; VS Code, "
              "JupyterLab and Notebook 7 do it; a console puts it in the next prompt). Its id is not known "
              "until then: read the cells again in a later turn.")


def proposal_shown(proposal: dict[str, Any]) -> tuple[str, str]:
    """(title, text) of a proposal shown in the turn as text (no page of ours to show it)."""
    cell = json.dumps(proposal.get("cell_id") or "")
    if proposal["kind"] == "insert":
        return "Proposed new cell (not inserted: no acp-kernel extension here)", proposal.get("source") or ""
    if proposal["kind"] == "delete":
        return f"Proposed: delete cell {cell} (not applied: no acp-kernel extension here)", ""
    if proposal.get("source") is not None:
        return f"Proposed new source of cell {cell} (not applied: no acp-kernel extension here)", proposal["source"]
    return (f"Proposed change to cell {cell} (not applied: no acp-kernel extension here)",
            f"replace:\n{proposal.get('old') or ''}\nwith:\n{proposal.get('new') or ''}")


_WHAT = {"insert": "the new cell", "edit": "the change to cell {cell}", "delete": "deleting cell {cell}"}
_CONFLICT = {"insert": "the cell to insert below changed or went", "edit": "the user changed cell {cell}",
             "delete": "the user changed cell {cell}"}


def decided_text(kind: str, decided: docwire.Decided, cell_id: str = "") -> str:
    """What the agent is told became of its proposal (``cell_id``: the cell it named)."""
    cell = json.dumps(decided.cell_id or cell_id) if decided.cell_id or cell_id else "(unknown)"
    what = _WHAT[kind].format(cell=cell)
    words = f" The user's words: {one_line(decided.detail, 2_000)}" if decided.detail and decided.outcome == "rejected" else ""
    if decided.outcome == "applied":
        done = {"insert": f"inserted as cell {cell}", "edit": f"cell {cell} changed", "delete": f"cell {cell} deleted"}
        return f"Applied: {done[kind]} in the user's notebook (unsaved until the user saves)."
    if decided.outcome == "rejected":
        return f"Rejected: the user did not accept {what}; the notebook was not changed.{words}"
    if decided.outcome == "conflict":
        why = one_line(decided.detail, 300) or _CONFLICT[kind].format(cell=cell)
        return f"Conflict: {why} while {what} waited, so it was not applied; read the cells again with cells."
    if decided.outcome == "expired":
        return f"Expired: nobody answered {what} in time; the notebook was not changed."
    if decided.outcome == "withdrawn":
        why = one_line(decided.detail, 300) or "its turn ended"
        return f"Withdrawn: {why} before the user answered {what}; the notebook was not changed."
    return f"Not applicable: {one_line(decided.detail, 2_000) or 'no reason given'}; the notebook was not changed."
