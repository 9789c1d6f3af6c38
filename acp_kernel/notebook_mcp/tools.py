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
import re
import reprlib
import traceback
import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .wire import MAX_IMAGE_BYTES, MAX_IMAGES, MAX_TEXT, Image, Text

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

#: Per-cell bound on output text, so one huge output does not hide the others.
CELL_OUTPUT_LIMIT = 2_000


def output_text(output: dict) -> str:
    """The text of one saved output (images and HTML are named, not included)."""
    kind = output.get("output_type")
    if kind == "stream":
        return _joined(output.get("text", ""))
    if kind == "error":
        tb = "\n".join(_joined(line) for line in output.get("traceback", []) or [])
        return plain(tb) or f"{output.get('ename', '')}: {output.get('evalue', '')}"
    if kind in ("execute_result", "display_data"):
        data = output.get("data", {}) or {}
        if "text/plain" in data:
            text = _joined(data["text/plain"])
        else:
            text = ""
        others = sorted(k for k in data if k != "text/plain")
        if others:
            text += ("\n" if text else "") + f"[also {', '.join(others)}]"
        return text
    return f"[{kind} output]"


def _joined(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def cells_from_notebook(path: str) -> str:
    """The notebook at ``path`` as last saved: each cell's source and text outputs."""
    import nbformat

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # noqa: BLE001 - a missing, unreadable or invalid file
        return (f"The notebook could not be read ({type(exc).__name__}: {one_line(str(exc), 300)}). "
                f"Its path:\n{fence(path, 'text')}")
    parts = [f"The notebook as last saved (unsaved edits are not included): {_count(len(nb.cells), 'cell')}, "
             f"numbered from 1. Its path:\n{fence(path, 'text')}"]
    for number, cell in enumerate(nb.cells, 1):
        kind = cell.get("cell_type", "?")
        count = cell.get("execution_count")
        head = f"## Cell {number}: {kind}" + (f", execution count {count}" if count else "")
        lang = "python" if kind == "code" else ("markdown" if kind == "markdown" else "")
        parts.append(f"{head}\n{fence(_joined(cell.get('source', '')), lang)}")
        outputs = [output_text(o) for o in cell.get("outputs", []) or []]
        outputs = [o for o in outputs if o]
        if outputs:
            parts.append("Outputs:\n" + fence(cut("\n".join(outputs), CELL_OUTPUT_LIMIT), "text"))
    return cut("\n\n".join(parts))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def cells_from_history(history: list[str], language: str = "python") -> str:
    """The sources run in this kernel, when the notebook file is not known
    (``language`` "": the ACP kernel's cells are prompts, not code)."""
    intro = ("This kernel does not know its notebook file, so these are the sources of the cells "
             f"run in this kernel, oldest first ({_count(len(history), 'run')}, no outputs).")
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
