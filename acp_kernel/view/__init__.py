"""The turn view: one live rendering per turn, shared by the kernel and the magics.

- :class:`TurnView` (``turnview``): subscribe to a Turn, write display messages to a sink.
- :class:`DisplaySink` and its implementations (``sink``): where messages go.
- :func:`render_markdown` (``transcript``): the whole turn as plain markdown.
- :class:`Frontend` and :func:`frontend_for` (``frontend``): what a cell's
  frontend can show (widgets, in-place updates, who answers questions), and
  how a kernel tells a notebook from a console from a headless run.

Pure parts: ``markdown`` (block splitting), ``truncate``, ``diff``, ``form``,
``transcript``, ``coalesce``. Widgets (ipywidgets, anywidget) are imported
only when a view shows one.
"""

from .frontend import HEADLESS, NOTEBOOK, TERMINAL, Frontend, WidgetClients, frontend_for
from .sink import CellContext, DisplaySink, IPythonSink, RecordingSink
from .transcript import render_markdown
from .turnview import TurnView

__all__ = ["HEADLESS", "NOTEBOOK", "TERMINAL", "CellContext", "DisplaySink", "Frontend", "IPythonSink",
           "RecordingSink", "TurnView", "WidgetClients", "frontend_for", "render_markdown"]
