"""The turn view: one live rendering per turn, shared by the kernel and the magics.

- :func:`view_for` picks the live view of a turn: :class:`TurnOutput`
  (``turnoutput``: one output, one widget holding the turn's blocks) for
  notebooks, :class:`TurnView` (``turnview``: markdown displays, or
  append-only for terminal frontends) otherwise.
- :class:`DisplaySink` and its implementations (``sink``): where messages go.
- :func:`render_markdown` (``transcript``): the whole turn as plain markdown.
- :class:`Frontend` and :func:`frontend_for` (``frontend``): what a cell's
  frontend can show (widgets, in-place updates, who answers questions), and
  how a kernel tells a notebook from a console from a headless run.

Pure parts: ``markdown`` (block splitting), ``truncate``, ``diff``, ``form``,
``transcript``, ``coalesce``. Widgets (ipywidgets, anywidget) are imported
only when a view shows one.

The names below are imported on first use (as :mod:`acp_kernel`'s): a caller of one pure
part (the CLI's tool call lines, ``view.transcript``) does not pay for the live views'
imports, 9 ms of its first tool call's output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_attr

if TYPE_CHECKING:
    from .frontend import HEADLESS, NOTEBOOK, TERMINAL, Frontend, WidgetClients, frontend_for
    from .sink import CellContext, DisplaySink, IPythonSink, RecordingSink
    from .transcript import render_markdown
    from .turnoutput import TurnOutput, view_for
    from .turnview import TurnView

__all__ = ["HEADLESS", "NOTEBOOK", "TERMINAL", "CellContext", "DisplaySink", "Frontend", "IPythonSink",
           "RecordingSink", "TurnOutput", "TurnView", "WidgetClients", "frontend_for", "render_markdown", "view_for"]

_LAZY = {
    **dict.fromkeys(("HEADLESS", "NOTEBOOK", "TERMINAL", "Frontend", "WidgetClients", "frontend_for"), "frontend"),
    **dict.fromkeys(("CellContext", "DisplaySink", "IPythonSink", "RecordingSink"), "sink"),
    "render_markdown": "transcript",
    "TurnOutput": "turnoutput",
    "view_for": "turnoutput",
    "TurnView": "turnview",
}


def __getattr__(name: str) -> Any:
    return lazy_attr(__name__, _LAZY, name)
