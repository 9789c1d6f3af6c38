"""Where the turn view's output goes: Jupyter display messages, nothing else.

The view never talks to a kernel. It calls ``display`` (a new output, at the
end of the cell) and ``update`` (replace an earlier output by its
``display_id``, in place). The ACP kernel implements this with
``display_data`` / ``update_display_data`` on iopub (``transient:
{display_id}``); IPython with :class:`IPythonSink`; tests with
:class:`RecordingSink`.

All sink calls happen on the event loop thread the turn's events arrive on.
Every sink refuses text data that :mod:`acp_kernel.safe` did not make
(:func:`~acp_kernel.safe.check_data`), so no output path can skip escaping.
"""

from __future__ import annotations

import contextvars
import json
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from .. import compat
from ..safe import Html, Markdown, bundle, check_data, unwrapped


class DisplaySink(Protocol):
    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None:
        """Append a new output; with ``display_id`` it can be updated later."""

    def update(self, data: dict, metadata: dict | None = None, display_id: str = "") -> None:
        """Replace the output(s) shown under ``display_id``."""


WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def widget_bundle(widget: Any, plain: str, md: Markdown | None = None, html: Html | None = None) -> dict[str, Any]:
    """A display's data: the widget's view (when there is a widget) with text
    (and markdown, and its HTML) for frontends and saved notebooks without
    widgets. ``html`` defaults to the markdown's (:func:`~acp_kernel.safe.inert_html`)."""
    extra = {WIDGET_MIME: {"model_id": widget.model_id, "version_major": 2, "version_minor": 1}} if widget is not None else None
    return bundle(md, plain, html, extra=extra)


class CellContext:
    """The context variables of the cell that made a view, to run its work in.

    ipykernel picks the parent header of a message from context variables
    (``Kernel.get_parent()``): display messages of the IPython machinery and
    *every widget comm message* (``comm.publish_msg``). A turn's events arrive
    in the connection's reader task, whose context is the one the agent was
    started in (an earlier cell): widgets made or synced there would be
    parented to that cell, and nbclient, which files comm messages under the
    cell they name, would save their state with the wrong cell or not at all.
    Running the view's work here keeps them with the cell that shows them.
    """

    def __init__(self) -> None:
        self._context = contextvars.copy_context()
        self._inside: int | None = None  # the thread inside, if any

    def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` inside the context (nested or concurrent calls run as they are)."""
        if self._inside is not None:
            return fn(*args, **kwargs)
        self._inside = threading.get_ident()
        try:
            return self._context.run(fn, *args, **kwargs)
        finally:
            self._inside = None


class IPythonSink:
    """For the magics: IPython's own display machinery (lazy import).

    Publishes in the context of the cell that created it (:class:`CellContext`).
    """

    def __init__(self) -> None:
        self._cell = CellContext()

    def run_in_context(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn`` inside the creating cell's context (once: nested calls run as they are)."""
        return self._cell.run(fn, *args, **kwargs)

    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None:
        from IPython.display import display

        check_data(data)
        kwargs: dict[str, Any] = {"raw": True, "metadata": metadata or {}}
        if display_id:
            kwargs["display_id"] = display_id
        with compat.cell_displays():  # never taken for the output of code the agent runs
            self.run_in_context(display, data, **kwargs)

    def update(self, data: dict, metadata: dict | None = None, display_id: str = "") -> None:
        from IPython.display import update_display

        check_data(data)
        with compat.cell_displays():
            self.run_in_context(update_display, data, raw=True, metadata=metadata or {}, display_id=display_id)


@dataclass
class Message:
    """One recorded display message. ``size`` approximates its iopub content
    in bytes (the JSON of data, metadata and transient)."""

    kind: str  # "display" or "update"
    data: dict
    metadata: dict
    display_id: str | None
    size: int


def message_size(data: dict, metadata: dict | None, display_id: str | None) -> int:
    content = {"data": data, "metadata": metadata or {}, "transient": {"display_id": display_id} if display_id else {}}
    return len(json.dumps(content).encode("utf-8"))


class RecordingSink:
    """Records every message and its size; rebuilds the output area like a frontend would."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.listeners: list[Any] = []  # called with each Message (tests await on them)

    def _record(self, kind: str, data: dict, metadata: dict | None, display_id: str | None) -> None:
        check_data(data)
        msg = Message(kind, data, dict(metadata or {}), display_id, message_size(data, metadata, display_id))
        self.messages.append(msg)
        for listener in list(self.listeners):
            listener(msg)

    def display(self, data: dict, metadata: dict | None = None, display_id: str | None = None) -> None:
        self._record("display", data, metadata, display_id)

    def update(self, data: dict, metadata: dict | None = None, display_id: str = "") -> None:
        if not display_id:
            raise ValueError("update needs a display_id")
        self._record("update", data, metadata, display_id)

    # -- reading ------------------------------------------------------------

    @property
    def total_bytes(self) -> int:
        return sum(m.size for m in self.messages)

    def updates(self, display_id: str | None = None) -> list[Message]:
        return [m for m in self.messages if m.kind == "update" and (display_id is None or m.display_id == display_id)]

    def outputs(self) -> list[dict]:
        """The output area as a frontend shows it: displays in order, each
        replaced by the last update to its display id."""
        outs: list[dict] = []
        where: dict[str, list[int]] = {}
        for m in self.messages:
            if m.kind == "display":
                if m.display_id:
                    where.setdefault(m.display_id, []).append(len(outs))
                outs.append(m.data)
            else:
                for i in where.get(m.display_id or "", ()):
                    outs[i] = m.data
        return outs

    def markdown(self) -> str:
        """All outputs' markdown (or plain text), joined: what a reader sees
        (without the element around it that keeps MathJax off)."""
        parts = []
        for data in self.outputs():
            parts.append(unwrapped(data.get("text/markdown") or "") or data.get("text/plain") or "")
        return "\n\n".join(parts)
