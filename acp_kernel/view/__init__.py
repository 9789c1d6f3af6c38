"""The turn view: one live rendering per turn, shared by the kernel and the magics.

- :class:`TurnView` (``turnview``): subscribe to a Turn, write display messages to a sink.
- :class:`DisplaySink` and its implementations (``sink``): where messages go.
- :func:`render_markdown` (``transcript``): the whole turn as plain markdown.

Pure parts: ``markdown`` (block splitting), ``truncate``, ``diff``, ``form``,
``transcript``, ``coalesce``. Widgets (ipywidgets, anywidget) are imported
only when a view shows one.
"""

from .sink import DisplaySink, IPythonSink, RecordingSink
from .transcript import render_markdown
from .turnview import TurnView

__all__ = ["DisplaySink", "IPythonSink", "RecordingSink", "TurnView", "render_markdown"]
