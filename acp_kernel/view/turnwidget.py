"""The widget of one turn: its ordered blocks, synced a few at a time.

Blocks (text, thoughts, tool calls, plans, questions, notices, the status
line) are dicts under their own keys (``b:0``, ``b:1``, ...) beside
``count``, like the tool call rows of :mod:`.toolcall`: only changed blocks
travel, as one partial ``update`` per flush, and ``get_state`` (comm open, a
reloaded page, the saved notebook) has them all. The frontend writes
``expanded`` (block key -> open) and ``shown`` (how many of the last blocks
the reader keeps on the page): both survive a new view of the widget.

The widget lives only while its turn runs: the finished turn's output is
static (:mod:`.finished`) and :meth:`TurnWidget.retire` closes the widget.
The synced ``_esm`` is a small loader (``static/turnloader.js``), not the
turn's module: a notebook saved while a turn runs, or by a runner that keeps
closed models (nbclient), saves a widget's code with every model, and the
real module (common.js + turn.js, toolcall.css + turn.css: about 25 KB)
would be saved once per turn. A view asks the kernel for it with a custom
message, the widget answers with :func:`module_message`, and the page keeps
it per version; without a kernel the loader shows the blocks plainly (text
blocks as the HTML safe.markdown_html made, the rest as text).

Defined on first use, so importing the view imports no widget library.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
import threading
from pathlib import Path
from typing import Any
from .toolcall import esm_source
from ..compat import send_partial_state
from .widgetbase import base_class

STATIC = Path(__file__).parent / "static"
#: How many of the last blocks the page shows before "show N earlier".
DEFAULT_SHOWN = 120

_widget_class: Any = None
#: Full-line comments, indentation and blank lines: dropped from the synced loader (no
#: template literal or string there spans lines).
_TRIM = re.compile(r"^[ \t]*(?:(?://|/\*).*)?\n|^[ \t]+", re.M)


@functools.cache
def module_assets() -> dict[str, str]:
    """The turn's real module and stylesheet, and their version (a hash of both)."""
    esm = esm_source("turn.js")
    css = "".join((STATIC / f).read_text(encoding="utf-8") for f in ("toolcall.css", "turn.css"))
    version = hashlib.sha256((esm + "\0" + css).encode()).hexdigest()[:16]
    return {"version": version, "esm": esm, "css": css}


def module_message() -> dict[str, str]:
    """The answer to a view's ``{"type": "module"}`` request (static/turnloader.js)."""
    return {"type": "module", **module_assets()}


@functools.cache
def loader_source() -> tuple[str, str]:
    """The synced ``_esm`` and ``_css``: the loader for this version, comment lines and indentation removed."""
    esm = (STATIC / "turnloader.js").read_text(encoding="utf-8").replace("__VERSION__", module_assets()["version"])
    css = (STATIC / "turnplain.css").read_text(encoding="utf-8")
    return _TRIM.sub("", esm), _TRIM.sub("", css)


def block_key(index: int) -> str:
    """The model key of the ``index``-th block (never a trait name)."""
    return f"b:{index}"


def turn_widget_class() -> Any:
    global _widget_class
    if _widget_class is None:
        _widget_class = _define()
    return _widget_class


def _define() -> Any:
    import traitlets as t


    esm, css = loader_source()

    class TurnWidget(base_class()):  # type: ignore[misc]
        """Synced state of one turn's blocks (see static/turn.js)."""

        _esm = t.Unicode(esm).tag(sync=True)
        _css = t.Unicode(css).tag(sync=True)
        _anywidget_id = t.Unicode("acp_kernel.view.turnwidget.TurnWidget").tag(sync=True)
        #: block key -> open (True) or folded (False), as the reader chose; set by the frontend
        expanded = t.Dict().tag(sync=True)
        #: how many of the last blocks the page shows (the reader's "show earlier" raises it)
        shown = t.Int(DEFAULT_SHOWN).tag(sync=True)
        #: the turn's id: a view drawn again takes over its predecessor's drawing (static/turn.js)
        turn = t.Unicode("").tag(sync=True)

        def __init__(self, **kwargs: Any) -> None:
            self._blocks: dict[str, dict[str, Any]] = {}  # before super(): opening the comm reads it
            self._count = 0  # the turn's blocks (some not sent: out of the page's window)
            super().__init__(**kwargs)
            try:  # requests may arrive on a comm thread: the answer goes out on this loop
                self._home: tuple[Any, int] | None = (asyncio.get_running_loop(), threading.get_ident())
            except RuntimeError:
                self._home = None
            self.on_msg(_serve_module)

        def blocks(self) -> dict[str, dict[str, Any]]:
            return dict(self._blocks)

        def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
            state = super().get_state(key, drop_defaults)
            if key is None:
                state.update(self._blocks)
                state["count"] = self._count  # (push_blocks keeps it at least the blocks sent)
            return state

        def push_blocks(self, changed: dict[str, dict[str, Any]], count: int | None = None) -> None:
            """Send changed blocks and the block count (``count``: the turn's, which may hold
            blocks not sent yet; else those sent) as one partial state update."""
            self._blocks.update(changed)
            count = len(self._blocks) if count is None else max(count, len(self._blocks))
            if not changed and count == self._count:
                return
            self._count = count
            state: dict[str, Any] = dict(changed)
            state["count"] = count
            send_partial_state(self, state)

        def retire(self) -> None:
            """Close, the blocks emptied first: the turn's output no longer shows this
            widget (view/finished.py), and a runner that saves every model's last state
            (nbclient keeps a closed comm's) saves a husk, not the whole turn again."""
            if self.comm is not None and (self._blocks or self._count):
                send_partial_state(self, {**dict.fromkeys(self._blocks), "count": 0})
            self._blocks, self._count = {}, 0
            self.close()

    return TurnWidget


def _serve_module(widget: Any, content: Any, _buffers: Any) -> None:
    """A view asked for the turn's module: send it (custom messages are never saved)."""
    if not isinstance(content, dict) or content.get("type") != "module":
        return
    home = getattr(widget, "_home", None)
    if home is not None and home[1] != threading.get_ident() and not home[0].is_closed():
        home[0].call_soon_threadsafe(widget.send, module_message())
    else:
        widget.send(module_message())
