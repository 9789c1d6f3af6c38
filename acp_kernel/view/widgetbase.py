"""The base of this package's anywidgets: their assets are class traits.

anywidget adds ``_esm``, ``_css`` and ``_anywidget_id`` to every instance
with ``add_traits``, and traitlets builds a new class for each such call: a
turn with 2,000 tool call widgets spent most of its time there. Subclasses
declare the three as class traits; this base adds only what is missing.
Defined on first use, so importing the view imports no widget library.
"""

from __future__ import annotations

from typing import Any

_base: Any = None


def base_class() -> Any:
    global _base
    if _base is None:
        import anywidget

        class ClassTraitsWidget(anywidget.AnyWidget):
            def add_traits(self, **traits: Any) -> None:
                missing = {k: v for k, v in traits.items() if not self.has_trait(k)}
                if missing:
                    super().add_traits(**missing)

        _base = ClassTraitsWidget
    return _base
