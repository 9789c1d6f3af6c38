"""The base of this package's anywidgets: their assets are class traits.

anywidget adds ``_esm``, ``_css`` and ``_anywidget_id`` to every instance
with ``add_traits``, and traitlets builds a new class for each such call: a
turn with 2,000 tool call widgets spent most of its time there. Subclasses
declare the three as class traits; the base (in :mod:`acp_kernel.compat`,
since it leans on how anywidget sets them) adds only what is missing.
Defined on first use, so importing the view imports no widget library.
"""

from __future__ import annotations

from typing import Any
from ..compat import class_traits_anywidget


def base_class() -> Any:
    return class_traits_anywidget()
