"""The widget of one turn: its ordered blocks, synced a few at a time.

Blocks (text, thoughts, tool calls, plans, questions, notices, the status
line) are dicts under their own keys (``b:0``, ``b:1``, ...) beside
``count``, like the tool call rows of :mod:`.toolcall`: only changed blocks
travel, as one partial ``update`` per flush, and ``get_state`` (comm open, a
reloaded page, the saved notebook) has them all. The frontend writes
``expanded`` (block key -> open) and ``shown`` (how many of the last blocks
the reader keeps on the page): both survive a new view of the widget.

Defined on first use, so importing the view imports no widget library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

STATIC = Path(__file__).parent / "static"
#: How many of the last blocks the page shows before "show N earlier".
DEFAULT_SHOWN = 120

_widget_class: Any = None


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

    from ..compat import send_partial_state
    from .widgetbase import base_class
    from .toolcall import esm_source

    css = (STATIC / "toolcall.css").read_text(encoding="utf-8") + (STATIC / "turn.css").read_text(encoding="utf-8")

    class TurnWidget(base_class()):  # type: ignore[misc]
        """Synced state of one turn's blocks (see static/turn.js)."""

        _esm = t.Unicode(esm_source("turn.js")).tag(sync=True)
        _css = t.Unicode(css).tag(sync=True)
        _anywidget_id = t.Unicode("acp_kernel.view.turnwidget.TurnWidget").tag(sync=True)
        #: block key -> open (True) or folded (False), as the reader chose; set by the frontend
        expanded = t.Dict().tag(sync=True)
        #: how many of the last blocks the page shows (the reader's "show earlier" raises it)
        shown = t.Int(DEFAULT_SHOWN).tag(sync=True)

        def __init__(self, **kwargs: Any) -> None:
            self._blocks: dict[str, dict[str, Any]] = {}  # before super(): opening the comm reads it
            super().__init__(**kwargs)

        def blocks(self) -> dict[str, dict[str, Any]]:
            return dict(self._blocks)

        def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
            state = super().get_state(key, drop_defaults)
            if key is None:
                state.update(self._blocks)
                state["count"] = len(self._blocks)
            return state

        def push_blocks(self, changed: dict[str, dict[str, Any]]) -> None:
            """Send changed blocks (and the block count) as one partial state update."""
            if not changed:
                return
            self._blocks.update(changed)
            state = dict(changed)
            state["count"] = len(self._blocks)
            send_partial_state(self, state)

    return TurnWidget
